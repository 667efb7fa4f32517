/* One read(2) and one pread(2) of a 16 MiB regular file into a heap buffer partly evicted,
 * its first page resident: each returns the whole file, as without uzswap (a program may
 * read a regular file in one call and take a short count for its end: bash does). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1024 * 1024)
#define SIZE (16 * MIB)

static volatile unsigned sink;

static unsigned char expected(size_t i) { return (unsigned char)(i * 13 + i / 4096); }

int main(int argc, char **argv) {
    int fd = open(argv[1], O_CREAT | O_TRUNC | O_RDWR, 0600);
    if (fd < 0) { perror("open"); return 2; }
    static unsigned char chunk[4096];
    for (size_t at = 0; at < SIZE; at += sizeof chunk) {
        for (size_t i = 0; i < sizeof chunk; i++) chunk[i] = expected(at + i);
        if (write(fd, chunk, sizeof chunk) != sizeof chunk) { perror("write"); return 3; }
    }
    unsigned char *in = malloc(SIZE);
    int whole = 0;
    for (int round = 0; round < 2; round++) {
        memset(in, 0xaa, SIZE);
        /* More heap after it, so that most of `in` leaves memory. */
        unsigned char *other = malloc(2 * SIZE);
        memset(other, round + 1, 2 * SIZE);
        sink += other[round * SIZE + 12345]; /* used: the fill is not optimized away */
        free(other);
        in[0] = 0; /* its first page in: the kernel copies up to the first page that is not */
        ssize_t n = round == 0 ? (lseek(fd, 0, SEEK_SET), read(fd, in, SIZE)) : pread(fd, in, SIZE, 0);
        if (n != SIZE) {
            printf("%s returned %zd of %d\n", round == 0 ? "read" : "pread", n, SIZE);
            continue;
        }
        size_t i = 0;
        while (i < SIZE && in[i] == expected(i)) i++;
        if (i < SIZE) { printf("mismatch at %zu\n", i); return 4; }
        whole++;
    }
    printf("whole %d\n", whole);
    unlink(argv[1]);
    return 0;
}
