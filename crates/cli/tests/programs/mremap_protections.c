/* Protections kept across mremap, with the heap past its limit and evicted in part: a
 * read-only mapping grown in place and then moved keeps its bytes and stays read-only, the
 * part it grew by included; a PROT_NONE reservation moved still traps. Each access a
 * protection forbids traps (SIGSEGV, caught and counted). Prints one line of counts, the
 * same as without uzswap. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define MIB (1UL << 20)

static sigjmp_buf back;
static void on_segv(int sig) { (void)sig; siglongjmp(back, 1); }

/* 1 if reading (or writing, with `write`) `p` traps. */
static int traps(volatile unsigned char *p, int write) {
    if (sigsetjmp(back, 1)) return 1;
    if (write) *p = 1; else (void)*p;
    return 0;
}

static unsigned char byte_at(size_t i) { return (unsigned char)(i / 4096 * 7 + i % 13 + 1); }

int main(void) {
    struct sigaction sa = {0};
    sa.sa_handler = on_segv;
    sigaction(SIGSEGV, &sa, NULL);
    int trapped = 0, wrong = 0, failed = 0;
    /* The layout is fixed inside a reservation: a 2 MiB mapping, free space after it, and
     * a page mapped 4 MiB in that keeps it from growing past there in place. */
    unsigned char *r = mmap(NULL, 64 * MIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    unsigned char *a = mmap(r, 2 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    munmap(r + 2 * MIB, 62 * MIB);
    mmap(r + 4 * MIB, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    for (size_t i = 0; i < 2 * MIB; i++) a[i] = byte_at(i);
    mprotect(a, 2 * MIB, PROT_READ);
    /* Another heap, larger than the limit, so that `a` is evicted in part. */
    unsigned char *more = mmap(NULL, 48 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (size_t i = 0; i < 48 * MIB; i++) more[i] = (unsigned char)(i * 31 >> 9);

    /* Grown in place: the new part is read-only too, and reads zero. */
    unsigned char *g = mremap(a, 2 * MIB, 3 * MIB, 0);
    failed += g == MAP_FAILED;
    if (g != MAP_FAILED) {
        trapped += traps(g + 2 * MIB, 1) + traps(g + 3 * MIB - 1, 1) + traps(g, 1);
        wrong += g[2 * MIB + 5] != 0;
        for (size_t i = 0; i < 2 * MIB; i++) wrong += g[i] != byte_at(i);
        a = g;
    }
    /* Moved (the page at 4 MiB is in the way): still read-only, every byte there. */
    unsigned char *m = mremap(a, 3 * MIB, 6 * MIB, MREMAP_MAYMOVE);
    failed += m == MAP_FAILED;
    if (m != MAP_FAILED) {
        trapped += traps(m, 1) + traps(m + 5 * MIB, 1);
        for (size_t i = 0; i < 2 * MIB; i++) wrong += m[i] != byte_at(i);
        wrong += m[2 * MIB + 100] != 0 || m[6 * MIB - 1] != 0;
        /* Made read-write again, it takes writes. */
        mprotect(m, 6 * MIB, PROT_READ | PROT_WRITE);
        m[6 * MIB - 1] = 9;
        wrong += m[6 * MIB - 1] != 9;
    }
    /* Data made PROT_NONE and moved (a page mapped right after it is in the way): it traps
     * where it went, and made readable there has every byte. */
    unsigned char *n = mmap(NULL, MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (size_t i = 0; i < MIB; i++) n[i] = byte_at(i + 3);
    mprotect(n, MIB, PROT_NONE);
    mmap(n + MIB, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    unsigned char *n2 = mremap(n, MIB, 2 * MIB, MREMAP_MAYMOVE);
    failed += n2 == MAP_FAILED;
    if (n2 != MAP_FAILED) {
        trapped += traps(n2, 0) + traps(n2 + MIB + 5, 0);
        mprotect(n2, 2 * MIB, PROT_READ);
        for (size_t i = 0; i < MIB; i++) wrong += n2[i] != byte_at(i + 3);
        wrong += n2[MIB + 5] != 0;
    }
    /* Shrunk over two protections: only the rest is unmapped, whatever it was. */
    unsigned char *t = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    t[0] = 7;
    mprotect(t + 2 * 4096, 2 * 4096, PROT_READ);
    failed += mremap(t, 4 * 4096, 4096, 0) != t;
    wrong += t[0] != 7;

    for (size_t i = 0; i < 48 * MIB; i += 4093) wrong += more[i] != (unsigned char)(i * 31 >> 9);
    printf("trapped %d wrong %d failed %d\n", trapped, wrong, failed);
    return 0;
}
