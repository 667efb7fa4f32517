/* setlocale, then a heap filled past the limit (the locale's tables, malloc'ed by
 * setlocale, are the coldest), then threads: each new thread reads the locale's LC_CTYPE
 * tables before it can take a signal. Prints how many threads ran. */
#include <locale.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024 * 1024)
#define THREADS 16

static volatile unsigned sink;

static void *run(void *arg) {
    sink += (unsigned)(size_t)arg;
    return arg;
}

int main(void) {
    if (!setlocale(LC_ALL, "C.UTF-8")) { perror("setlocale"); return 2; }
    for (int round = 0; round < 4; round++) {
        unsigned char *heap = malloc(64 * MIB);
        memset(heap, round + 1, 64 * MIB);
        for (size_t i = 0; i < 64 * MIB; i += 4096) heap[i] = (unsigned char)(i >> 12);
        sink += heap[12345];
        free(heap);
        pthread_t t[THREADS];
        for (int i = 0; i < THREADS; i++)
            if (pthread_create(&t[i], NULL, run, (void *)(size_t)i) != 0) { perror("pthread_create"); return 3; }
        for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    }
    printf("threads %d\n", 4 * THREADS);
    return 0;
}
