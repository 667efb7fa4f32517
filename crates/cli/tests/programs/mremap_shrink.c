// 64 times: a 64 MiB mapping written, shrunk by mremap to 1 MiB, grown in place to 2 MiB
// (the new part reads zero), unmapped at its last length: "ok", as without uzswap.
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
int main(void) {
    for (int i = 0; i < 64; i++) {
        size_t big = 64 << 20, small = 1 << 20;
        char *p = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) { printf("mmap failed at %d\n", i); return 1; }
        memset(p, 1, big);
        char *q = mremap(p, big, small, 0);
        if (q != p || q[small - 1] != 1) { printf("mremap failed at %d\n", i); return 1; }
        q = mremap(q, small, 2 * small, 0);
        if (q != p || q[small] != 0 || q[0] != 1) { printf("regrow failed at %d\n", i); return 1; }
        munmap(q, 2 * small);
    }
    printf("ok\n");
    return 0;
}
