/* Waits until its stdin is closed: a program whose memory the test reads and writes from
 * outside (remote_model.rs). */
#include <unistd.h>

int main(void) {
    char c;
    return read(0, &c, 1) < 0;
}
