/* 16 threads allocating, filling, checking and freeing at once, on a heap under a limit. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 32
#define SLOTS 128
#define ROUNDS 1000

static int failed;

static void *work(void *arg) {
    uintptr_t id = (uintptr_t)arg;
    unsigned seed = (unsigned)id * 2654435761u;
    unsigned char *slot[SLOTS] = {0};
    size_t len[SLOTS] = {0};
    for (int r = 0; r < ROUNDS; r++) {
        int s = rand_r(&seed) % SLOTS;
        if (slot[s]) {
            for (size_t i = 0; i < len[s]; i += 61)
                if (slot[s][i] != (unsigned char)(id + s + i)) failed = 1;
            free(slot[s]);
        }
        len[s] = 16 + rand_r(&seed) % (rand_r(&seed) % 8 == 0 ? 50000 : 1000);
        slot[s] = malloc(len[s]);
        for (size_t i = 0; i < len[s]; i += 61) slot[s][i] = (unsigned char)(id + s + i);
    }
    for (int s = 0; s < SLOTS; s++) free(slot[s]);
    return NULL;
}

int main(void) {
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, work, (void *)i);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    puts(failed ? "corrupt" : "ok");
    return failed;
}
