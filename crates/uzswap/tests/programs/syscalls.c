/* read(2) into never-touched heap buffers and write(2) out of evicted ones. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1024 * 1024)
#define SIZE (64 * MIB)

int main(int argc, char **argv) {
    const char *path = argv[1];
    unsigned char *out = malloc(SIZE);
    for (size_t i = 0; i < SIZE; i++) out[i] = (unsigned char)(i * 7 + i / 4096);
    /* More heap after it, so that `out` is the coldest and leaves memory. */
    unsigned char *other = malloc(SIZE);
    memset(other, 1, SIZE);
    int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
    if (fd < 0) { perror("open"); return 2; }
    for (size_t done = 0; done < SIZE;) {
        ssize_t n = write(fd, out + done, SIZE - done);
        if (n <= 0) { perror("write"); return 3; }
        done += (size_t)n;
    }
    unsigned char *in = malloc(SIZE); /* never touched before the read */
    if (lseek(fd, 0, SEEK_SET) != 0) { perror("lseek"); return 4; }
    for (size_t done = 0; done < SIZE;) {
        ssize_t n = read(fd, in + done, SIZE - done);
        if (n <= 0) { perror("read"); return 5; }
        done += (size_t)n;
    }
    for (size_t i = 0; i < SIZE; i++)
        if (in[i] != (unsigned char)(i * 7 + i / 4096) || out[i] != in[i]) {
            printf("mismatch at %zu\n", i);
            return 6;
        }
    printf("ok %d\n", other[SIZE - 1]);
    close(fd);
    unlink(path);
    return 0;
}
