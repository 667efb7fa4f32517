/* Reservations larger than any block the heap's allocator makes (a JVM's -Xmx3g), under a
 * limit far below them: a 2.5 GiB PROT_NONE reservation traps, 96 MiB of it committed with
 * mprotect keep every byte written there while the heap is evicted; unmapped in two
 * halves and reserved again, it reads zero where committed (the block's pages were
 * discarded); and a 2 GiB read-write mapping reads zero. Prints one line, the same as
 * without uzswap. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define MIB (1UL << 20)
#define RESERVED (2560 * MIB)
#define COMMITTED (96 * MIB)

static sigjmp_buf back;
static void on_segv(int sig) { (void)sig; siglongjmp(back, 1); }

static int traps(volatile unsigned char *p) {
    if (sigsetjmp(back, 1)) return 1;
    (void)*p;
    return 0;
}

static uint64_t word_at(size_t i) { return i * 0x9e3779b97f4a7c15ull; }

int main(void) {
    struct sigaction sa = {0};
    sa.sa_handler = on_segv;
    sigaction(SIGSEGV, &sa, NULL);
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    unsigned char *r = mmap(NULL, RESERVED, PROT_NONE, flags, -1, 0);
    if (r == MAP_FAILED) return 1;
    int trapped = traps(r) + traps(r + RESERVED - 1);
    if (mprotect(r, COMMITTED, PROT_READ | PROT_WRITE)) return 2;
    uint64_t *w = (uint64_t *)r;
    size_t n = COMMITTED / 8, wrong = 0;
    for (size_t i = 0; i < n; i++) w[i] = word_at(i);
    for (size_t i = 0; i < n; i++) wrong += w[i] != word_at(i);
    trapped += traps(r + COMMITTED);
    if (munmap(r + RESERVED / 2, RESERVED / 2)) return 3;
    if (munmap(r, RESERVED / 2)) return 4;
    unsigned char *again = mmap(NULL, RESERVED, PROT_NONE, flags, -1, 0);
    if (again == MAP_FAILED) return 5;
    if (mprotect(again, COMMITTED, PROT_READ | PROT_WRITE)) return 6;
    size_t nonzero = 0;
    for (size_t i = 0; i < COMMITTED; i += 4096) nonzero += again[i] != 0 || again[i + 8] != 0;
    if (munmap(again, RESERVED)) return 8;
    unsigned char *rw = mmap(NULL, 2048 * MIB, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (rw == MAP_FAILED) return 7;
    for (size_t i = 0; i < 2048 * MIB; i += 64 * MIB) nonzero += rw[i] != 0;
    printf("trapped %d wrong %zu nonzero %zu\n", trapped, wrong, nonzero);
    return 0;
}
