/* Under `uzswap run --in-thread-faults`: a program that blocks every signal (in its main
 * thread and in a worker it starts) and sets its own SIGBUS handler still has its evicted heap
 * served; it reads back its own handler; and a SIGBUS that is not a heap fault (a file mapping
 * touched past the end of its file) reaches its handler, which exits with 42. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MIB (1024 * 1024)
#define SIZE (48 * MIB)

static void on_sigbus(int sig, siginfo_t *info, void *ctx) {
    (void)sig; (void)info; (void)ctx;
    _exit(42);
}

static int check(unsigned char *p, unsigned seed) {
    for (size_t i = 0; i < SIZE; i += 512)
        if (p[i] != (unsigned char)(i / 4096 + seed)) return 1;
    return 0;
}

static void *worker(void *arg) {
    unsigned char *p = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    for (size_t i = 0; i < SIZE; i += 512) p[i] = (unsigned char)(i / 4096 + 3);
    return (void *)(long)check(p, 3);
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    if (sigaction(SIGBUS, &sa, NULL) != 0) { perror("sigaction"); return 2; }
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL);

    unsigned char *a = malloc(SIZE), *b = malloc(SIZE);
    for (size_t i = 0; i < SIZE; i += 512) a[i] = (unsigned char)(i / 4096 + 1);
    pthread_t t;
    void *bad;
    pthread_create(&t, NULL, worker, b);
    pthread_join(t, &bad);
    if (bad || check(a, 1) || check(b, 3)) { puts("lost"); return 3; }

    struct sigaction now;
    sigaction(SIGBUS, NULL, &now);
    if (now.sa_sigaction != on_sigbus) { puts("not its own handler"); return 4; }
    sigset_t mask;
    sigprocmask(SIG_BLOCK, NULL, &mask);
    printf("ok %d\n", sigismember(&mask, SIGBUS));
    fflush(stdout);

    char path[] = "/tmp/uzswap-sigbus-XXXXXX";
    int fd = mkstemp(path);
    unlink(path);
    volatile char *m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
    return m[0] == 0 ? 5 : 6; /* SIGBUS: the handler exits with 42 */
}
