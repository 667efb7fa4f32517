// A heap past the limit, then what shells and daemons do with descriptors: a log file
// dup2()ed onto each of the numbers 3..63 in turn and written, every number up to 1023
// closed one by one, close_range(3, ~0U, 0), closefrom(3). Then the heap is checked byte for
// byte, another heap as large is built and checked, and the log's size is printed: the same
// as without uzswap.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLOCK (64 << 10)

// Bytes that compress about 2:1, so that the pool fills and pages go to the swap file.
static unsigned char byte_at(size_t b, size_t i) {
    size_t x = (b * 2654435761u + (i / 2) * 40503u) ^ (i >> 9);
    return (unsigned char)((x >> 11) & 0x0f);
}

static unsigned char **build(size_t n, size_t salt) {
    unsigned char **blocks = malloc(n * sizeof *blocks);
    for (size_t b = 0; b < n; b++) {
        blocks[b] = malloc(BLOCK);
        for (size_t i = 0; i < BLOCK; i++) blocks[b][i] = byte_at(b + salt, i);
    }
    return blocks;
}

static int check(unsigned char **blocks, size_t n, size_t salt) {
    for (size_t b = 0; b < n; b++)
        for (size_t i = 0; i < BLOCK; i++)
            if (blocks[b][i] != byte_at(b + salt, i)) return 0;
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    size_t n = (size_t)atoi(argv[2]) * (1 << 20) / BLOCK;
    unsigned char **first = build(n, 0);
    int log = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (log < 0) return 3;
    for (int fd = 3; fd < 64; fd++) {
        if (fd == log) continue;
        if (dup2(log, fd) != fd) return 4;
        char line[32];
        int len = snprintf(line, sizeof line, "line on %d\n", fd);
        if (write(fd, line, len) != len) return 5;
        close(fd);
    }
    for (int fd = 3; fd < 1024; fd++) close(fd);
    log = -1;
    close_range(3, ~0U, 0);
    closefrom(3);
    int ok = check(first, n, 0);
    unsigned char **second = build(n, 7);
    ok = ok && check(second, n, 7) && check(first, n, 0);
    struct stat st;
    if (stat(argv[1], &st) != 0) return 6;
    printf("heap %s log %lld bytes\n", ok ? "ok" : "CORRUPT", (long long)st.st_size);
    return 0;
}
