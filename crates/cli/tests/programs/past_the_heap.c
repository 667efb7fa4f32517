/* Memory past the heap's address space: 12 blocks of 32 MiB from malloc and 12 anonymous
 * read-write mappings of 32 MiB (768 MiB in all), a byte a page written and read back.
 * Without uzswap each allocation succeeds; under a --max-heap of 256M each must too. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define N 12
#define SIZE (32ul << 20)

int main(void) {
    char *blocks[2 * N];
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(SIZE);
        if (!blocks[i]) { printf("malloc %d failed\n", i); return 1; }
        void *m = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) { printf("mmap %d failed\n", i); return 1; }
        blocks[N + i] = m;
        for (size_t o = 0; o < SIZE; o += 4096) {
            blocks[i][o] = (char)(i + o / 4096);
            blocks[N + i][o] = (char)(i * 3 + o / 4096);
        }
    }
    size_t wrong = 0;
    for (int i = 0; i < N; i++)
        for (size_t o = 0; o < SIZE; o += 4096) {
            wrong += blocks[i][o] != (char)(i + o / 4096);
            wrong += blocks[N + i][o] != (char)(i * 3 + o / 4096);
        }
    printf("ok wrong %zu\n", wrong);
    return 0;
}
