/* Pointers the preload did not hand out: blocks from glibc's own malloc, as a library bound
 * to libc's malloc with RTLD_DEEPBIND gets them, given to the program's free, realloc and
 * malloc_usable_size. They must go back to glibc, never into the region's heap. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t);

int main(void) {
    for (int i = 0; i < 10000; i++) {
        char *p = __libc_malloc(100 + i % 300);
        if (!p) return 1;
        snprintf(p, 100, "block %d", i);
        if (malloc_usable_size(p) < 100) { puts("usable size wrong"); return 1; }
        char *q = realloc(p, 5000 + i % 3000);
        if (!q) return 1;
        char want[100];
        snprintf(want, sizeof want, "block %d", i);
        if (strcmp(q, want) != 0) { puts("realloc lost the bytes"); return 1; }
        free(q);
        /* And the heap's own blocks still work beside them. */
        char *r = malloc(64);
        if (!r) return 1;
        memset(r, i, 64);
        free(r);
    }
    puts("ok");
    return 0;
}
