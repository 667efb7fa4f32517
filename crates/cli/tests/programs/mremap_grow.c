// A 48 MiB mapping, a third of its 64 KiB chunks written (evicted in part under the limit),
// grown by mremap past its block to 96 MiB, moved: the written chunks keep their bytes, the
// rest and the new part read zero. "ok", as without uzswap.
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/mman.h>
#define CHUNK (64 << 10)
static unsigned char expected(size_t at) {
    size_t chunk = at / CHUNK;
    return chunk % 3 == 0 ? (unsigned char)(chunk * 7 + at % 251 + 1) : 0;
}
int main(void) {
    size_t len = 48 << 20, grown = 96 << 20;
    unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { printf("mmap failed\n"); return 1; }
    for (size_t at = 0; at < len; at += CHUNK)
        if (at / CHUNK % 3 == 0)
            for (size_t b = at; b < at + CHUNK; b++) p[b] = expected(b);
    unsigned char *q = mremap(p, len, grown, MREMAP_MAYMOVE);
    if (q == MAP_FAILED) { printf("mremap failed\n"); return 1; }
    size_t wrong = 0;
    for (size_t b = 0; b < grown; b++)
        wrong += q[b] != (b < len ? expected(b) : 0);
    printf(wrong ? "wrong %zu\n" : "ok\n", wrong);
    return 0;
}
