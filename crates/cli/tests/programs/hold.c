/* Allocate and fill MIB MiB of heap (argv[1]), say "ready PID", then hold it until stdin ends
 * (uzswap stat's test reads the statistics meanwhile). Writes from a stack buffer and reads
 * into a static one: no system call touches the heap, so it runs with --user-mode-only too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char input[4096];

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
    size_t len = mib << 20;
    unsigned char *heap = malloc(len);
    if (!heap) return 1;
    for (size_t i = 0; i < len; i++) heap[i] = (unsigned char)(i / 4096 % 7 + (i % 64 == 0));
    char line[64];
    int n = snprintf(line, sizeof line, "ready %d\n", (int)getpid());
    if (write(1, line, n) != n) return 1;
    while (read(0, input, sizeof input) > 0) {
    }
    unsigned long sum = 0;
    for (size_t i = 0; i < len; i += 4096) sum += heap[i];
    n = snprintf(line, sizeof line, "sum %lu\n", sum);
    return write(1, line, n) == n ? 0 : 1;
}
