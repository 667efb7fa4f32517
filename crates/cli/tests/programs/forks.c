// Forks under pressure: `tables MIB` forks while threads use the preload's tables; `nested
// MIB` forks a child that forks a grandchild, each checking the heap byte for byte; `threads
// MIB` forks while four threads allocate and free; `shared MIB
// UNDER_MIB MOST_MIB` discards a page of every fourth block (its folio then partly present),
// forks a child that waits while the parent, whose fork brought its heap back, waits (at
// most 30 s) for its anonymous memory to go under UNDER_MIB, the two processes' anonymous
// memory together (Pss_Anon: a page they share counted once) sampled every 10 ms meanwhile
// against MOST_MIB, then lets the child check its copy, and checks its own.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>

#define BLOCK (64 << 10)
static unsigned char **blocks;
static size_t nblocks;
// Per block, the page discarded in it (its offset in the block), or -1.
static long *holes;
static volatile int stop;

static unsigned char byte_at(size_t b, size_t i) { return (unsigned char)(b * 31 + i / 4096 * 7 + 1); }

static void fill(void) {
    for (size_t b = 0; b < nblocks; b++) {
        blocks[b] = malloc(BLOCK);
        for (size_t i = 0; i < BLOCK; i += 512) memset(blocks[b] + i, byte_at(b, i), 512);
    }
}

static int check(void) {
    for (size_t b = 0; b < nblocks; b++)
        for (size_t i = 0; i < BLOCK; i += 512)
            for (size_t j = 0; j < 512; j++) {
                long at = (long)(i + j);
                int hole = holes && holes[b] >= 0 && at >= holes[b] && at < holes[b] + 4096;
                if (blocks[b][i + j] != (hole ? 0 : byte_at(b, i))) return 0;
            }
    return 1;
}

// Discard the second whole page of every fourth block.
static void punch_holes(void) {
    holes = calloc(nblocks, sizeof *holes);
    for (size_t b = 0; b < nblocks; b++) {
        holes[b] = -1;
        uintptr_t page = ((uintptr_t)blocks[b] + 4095) / 4096 * 4096 + 4096;
        if (b % 4 == 0 && page + 4096 <= (uintptr_t)blocks[b] + BLOCK &&
            madvise((void *)page, 4096, MADV_DONTNEED) == 0)
            holes[b] = (long)(page - (uintptr_t)blocks[b]);
    }
}

static int wait_child(pid_t pid) {
    int status;
    if (waitpid(pid, &status, 0) != pid) return 99;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

static void *churn(void *arg) {
    (void)arg;
    void *held[64] = {0};
    unsigned n = 0;
    while (!stop) {
        unsigned k = n++ % 64;
        free(held[k]);
        held[k] = malloc(1024 + (n * 4099) % (256 << 10));
        memset(held[k], 1, 1024);
    }
    for (int k = 0; k < 64; k++) free(held[k]);
    return NULL;
}

// The line `FIELD: N kB` of the /proc file at `path`, in KiB, or -1.
static long proc_kib(const char *path, const char *field) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    long kib = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':' && sscanf(line + n + 1, "%ld", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

// This process's anonymous memory in KiB (RssAnon), or -1.
static long rss_anon_kib(void) { return proc_kib("/proc/self/status", "RssAnon"); }

// Pss_Anon of `pid` in KiB: its anonymous pages, one it shares with N processes counted as
// 1/N. -1 if unreadable.
static long pss_anon_kib(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)pid);
    return proc_kib(path, "Pss_Anon");
}

static int shared(long under_mib, long most_mib) {
    int go[2];
    if (pipe(go)) return 2;
    pid_t child = fork();
    if (child == 0) {
        char c;
        close(go[1]);
        if (read(go[0], &c, 1) != 1) _exit(3);
        _exit(check() ? 0 : 1);
    }
    close(go[0]);
    long kib = rss_anon_kib();
    long most = pss_anon_kib(getpid()) + pss_anon_kib(child);
    for (int i = 0; i < 3000 && kib > under_mib * 1024; i++) {
        struct timespec t = {0, 10 * 1000 * 1000};
        nanosleep(&t, NULL);
        kib = rss_anon_kib();
        long both = pss_anon_kib(getpid()) + pss_anon_kib(child);
        if (both > most) most = both;
    }
    int under = kib <= under_mib * 1024;
    if (!under) fprintf(stderr, "the parent still holds %ld KiB\n", kib);
    int within = most > 0 && most <= most_mib * 1024;
    fprintf(stderr, "the two held at most %ld KiB\n", most);
    if (write(go[1], "g", 1) != 1) return 2;
    int c = wait_child(child);
    printf("under %d within %d child %d parent %d\n", under, within, c, check());
    return 0;
}

// Map and unmap a block of the heap, free an over-aligned allocation and reserve address
// space: each kept by the preload in a table of its own, under a lock.
static void map_once(unsigned n) {
    size_t len = (64 << 10) << (n >> 16) % 5;
    unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
        p[0] = 1;
        munmap(p, len);
    }
    void *a = NULL;
    if (!posix_memalign(&a, 256 << 10, 4096)) free(a);
    void *r = mmap(NULL, 1UL << 30, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r != MAP_FAILED) munmap(r, 1UL << 30);
}

// One of `tables`' four threads, until `stop`, at full speed, each kept by the preload in a
// table: over-aligned allocations, blocks mapped and unmapped, a runtime's 1 GiB reservation
// taken and given back (each a discard the region reads an event for), all three at random.
static void *map_churn(void *arg) {
    unsigned n = 7;
    while (!stop) {
        if ((uintptr_t)arg == 0) {
            void *a = NULL;
            if (!posix_memalign(&a, 256 << 10, 4096)) free(a);
        } else if ((uintptr_t)arg == 1) {
            void *p = mmap(NULL, 64 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p != MAP_FAILED) munmap(p, 64 << 10);
        } else if ((uintptr_t)arg == 2) {
            void *r = mmap(NULL, 1UL << 30, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (r != MAP_FAILED) munmap(r, 1UL << 30);
        } else {
            map_once(n = n * 1103515245 + 12345);
        }
    }
    return NULL;
}

// `tables`: forks 40 children while four threads use the preload's tables (map_churn); each
// child uses all three once (map_once), under an alarm that kills it if it hangs on a table
// a thread of its parent held at the fork.
static int tables(void) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, map_churn, (void *)(uintptr_t)i);
    int bad = 0;
    for (int f = 0; f < 40; f++) {
        pid_t child = fork();
        if (child == 0) {
            alarm(5);
            map_once((unsigned)f * 2654435761u);
            _exit(check() ? 0 : 1);
        }
        bad += wait_child(child) != 0;
    }
    stop = 1;
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    printf("bad children %d parent %d\n", bad, check());
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "shared")) {
        nblocks = (size_t)atoi(argv[2]) * (1 << 20) / BLOCK;
        blocks = calloc(nblocks, sizeof *blocks);
        fill();
        punch_holes();
        return shared(atol(argv[3]), atol(argv[4]));
    }
    if (argc != 3) return 2;
    nblocks = (size_t)atoi(argv[2]) * (1 << 20) / BLOCK;
    blocks = calloc(nblocks, sizeof *blocks);
    fill();
    if (!strcmp(argv[1], "tables")) return tables();
    if (!strcmp(argv[1], "nested")) {
        pid_t child = fork();
        if (child == 0) {
            if (!check()) _exit(1);
            pid_t grandchild = fork();
            if (grandchild == 0) _exit(check() ? 0 : 1);
            int g = wait_child(grandchild);
            memset(blocks[0], 0, BLOCK);
            _exit(g ? 10 + g : 0);
        }
        int c = wait_child(child);
        printf("child %d parent %d\n", c, check());
    } else {
        pthread_t t[4];
        for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, churn, NULL);
        int bad = 0;
        for (int f = 0; f < 5; f++) {
            pid_t child = fork();
            if (child == 0) _exit(check() ? 0 : 1);
            bad += wait_child(child) != 0;
        }
        stop = 1;
        for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
        printf("bad children %d parent %d\n", bad, check());
    }
    return 0;
}
