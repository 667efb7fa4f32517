/* A heap of 64 MiB filled with a pattern; prints its address and size, waits for a line on
 * stdin, then checks every word and prints how many were wrong. Built static: nothing of
 * uzswap's can be preloaded into it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
    size_t n = 64 << 20;
    uint64_t *p = malloc(n);
    if (!p) return 2;
    for (size_t i = 0; i < n / 8; i++) p[i] = i * 0x9E3779B97F4A7C15ull;
    printf("%p %zu\n", (void *)p, n);
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin)) return 3;
    size_t bad = 0;
    for (size_t i = 0; i < n / 8; i++) bad += p[i] != i * 0x9E3779B97F4A7C15ull;
    printf("bad %zu\n", bad);
    return bad != 0;
}
