// posix_memalign and aligned_alloc at every alignment from 16 bytes to 64 MiB, each block
// written whole and freed: "ok", as without uzswap.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
int main(void) {
    for (size_t align = 16; align <= (64u << 20); align <<= 1) {
        void *p = NULL;
        int r = posix_memalign(&p, align, 3 * align + 100);
        void *q = aligned_alloc(align, align * 2);
        if (r || !p || !q || ((uintptr_t)p % align) || ((uintptr_t)q % align)) { printf("fail at %zu r=%d\n", align, r); return 1; }
        memset(p, 1, 3 * align + 100); memset(q, 2, align * 2);
        free(p); free(q);
    }
    printf("ok\n");
    return 0;
}
