/* A malloc-heavy workload: rounds of allocating and freeing many small and some large
 * blocks of random sizes, each block written and checked, as an interpreter or a server
 * does. Prints a checksum of what it read, the same with any allocator.
 * Usage: mallocs [ROUNDS] [LIVE]  (defaults 40 rounds, 200,000 live blocks). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t state = 88172645463325252ull;
static uint64_t next(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 40;
    size_t live = argc > 2 ? (size_t)atol(argv[2]) : 200000;
    unsigned char **blocks = calloc(live, sizeof *blocks);
    size_t *sizes = calloc(live, sizeof *sizes);
    uint64_t sum = 0;
    for (int r = 0; r < rounds; r++) {
        for (size_t i = 0; i < live; i++) {
            size_t k = next() % live;
            if (blocks[k]) {
                sum += blocks[k][0] + blocks[k][sizes[k] - 1];
                free(blocks[k]);
            }
            /* Mostly small, one in 64 up to 64 KiB. */
            size_t n = next() % 64 == 0 ? 1 + next() % 65536 : 1 + next() % 256;
            blocks[k] = malloc(n);
            if (!blocks[k]) return 1;
            memset(blocks[k], (int)(k + r), n);
            sizes[k] = n;
        }
    }
    for (size_t k = 0; k < live; k++) free(blocks[k]);
    printf("%llu\n", (unsigned long long)sum);
    return 0;
}
