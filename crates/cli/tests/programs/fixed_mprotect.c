/* Fixed mappings over heap memory, after the heap has been evicted in part: a fresh
 * anonymous read-write mapping over part of a block reads zero there and leaves the rest as
 * written; fixed mappings that are not a fresh part of a block (MAP_FIXED_NOREPLACE, a page
 * of malloc'd memory) fail cleanly instead of replacing the region's memory. Prints "ok" and
 * the number of refusals. (Protections: protections.c.) */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define BLOCK (64UL << 20)
#define PAGE 4096UL

int main(void) {
    unsigned char *p = mmap(NULL, BLOCK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); return 1; }
    for (size_t i = 0; i < BLOCK; i += PAGE) memset(p + i, (int)(i / PAGE % 251) + 1, PAGE);
    /* A fresh mapping over the second quarter. */
    unsigned char *q = mmap(p + BLOCK / 4, BLOCK / 4, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (q != p + BLOCK / 4) { perror("fixed mmap"); return 1; }
    for (size_t i = 0; i < BLOCK; i += PAGE) {
        int want = (i >= BLOCK / 4 && i < BLOCK / 2) ? 0 : (int)(i / PAGE % 251) + 1;
        if (p[i] != want || p[i + PAGE - 1] != want) { printf("page %zu wrong\n", i / PAGE); return 1; }
    }
    memset(q, 7, BLOCK / 4);
    if (mprotect(p, BLOCK, PROT_READ | PROT_WRITE) != 0) { perror("mprotect rw"); return 1; }
    int refused = 0;
    if (mmap(p, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) == MAP_FAILED && errno == EEXIST) refused++;
    /* Heap memory from malloc is no block: a fixed mapping over it is refused, its bytes stay. */
    unsigned char *m = malloc(1 << 20);
    memset(m, 9, 1 << 20);
    void *page = (void *)(((uintptr_t)m + PAGE) & ~(PAGE - 1));
    if (mmap(page, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) refused++;
    for (size_t i = 0; i < (1 << 20); i++) if (m[i] != 9) { puts("malloc'd bytes lost"); return 1; }
    /* The block is still whole and writable. */
    for (size_t i = 0; i < BLOCK; i += PAGE) {
        int want = (i >= BLOCK / 4 && i < BLOCK / 2) ? 7 : (int)(i / PAGE % 251) + 1;
        if (p[i] != want) { printf("page %zu wrong at the end\n", i / PAGE); return 1; }
    }
    printf("ok %d\n", refused);
    return 0;
}
