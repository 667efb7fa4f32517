/* read(2) into never-touched heap buffers and write(2) out of evicted ones; bad pointers
 * still get EFAULT. */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1024 * 1024)
#define SIZE (64 * MIB)

static void *volatile bad_pointer = (void *)8;

int main(int argc, char **argv) {
    const char *path = argv[1];
    unsigned char *out = malloc(SIZE);
    for (size_t i = 0; i < SIZE; i++) out[i] = (unsigned char)(i * 7 + i / 4096);
    /* More heap after it, so that `out` is the coldest and leaves memory. */
    unsigned char *other = malloc(SIZE);
    memset(other, 1, SIZE);
    int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
    if (fd < 0) { perror("open"); return 2; }
    for (size_t done = 0; done < SIZE;) {
        ssize_t n = write(fd, out + done, SIZE - done);
        if (n <= 0) { perror("write"); return 3; }
        done += (size_t)n;
    }
    unsigned char *in = malloc(SIZE); /* never touched before the read */
    if (lseek(fd, 0, SEEK_SET) != 0) { perror("lseek"); return 4; }
    for (size_t done = 0; done < SIZE;) {
        ssize_t n = read(fd, in + done, SIZE - done);
        if (n <= 0) { perror("read"); return 5; }
        done += (size_t)n;
    }
    for (size_t i = 0; i < SIZE; i++)
        if (in[i] != (unsigned char)(i * 7 + i / 4096) || out[i] != in[i]) {
            printf("mismatch at %zu\n", i);
            return 6;
        }
    /* Bad pointers fail with EFAULT, as without uzswap: the iovec array and the msghdr
     * themselves, and a buffer outside every mapping. */
    void *bad = bad_pointer; /* volatile: the compiler does not see through it */
    struct iovec bad_base = {bad, 16};
    int sv[2];
    if (lseek(fd, 0, SEEK_SET) != 0) { perror("lseek"); return 7; }
    if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) != 0) { perror("socketpair"); return 7; }
#define EFAULTS(call)                                                         \
    do {                                                                      \
        errno = 0;                                                            \
        ssize_t r_ = (call);                                                  \
        if (r_ != -1 || errno != EFAULT) {                                    \
            printf("%s: returned %zd, errno %d\n", #call, r_, errno);         \
            return 8;                                                         \
        }                                                                     \
    } while (0)
    EFAULTS(readv(fd, (struct iovec *)bad, 1));
    EFAULTS(writev(fd, (struct iovec *)bad, 1));
    EFAULTS(writev(fd, &bad_base, 1));
    EFAULTS(read(fd, bad, 16));
    EFAULTS(sendmsg(sv[0], (struct msghdr *)bad, 0));
    EFAULTS(recvmsg(sv[1], (struct msghdr *)bad, MSG_DONTWAIT));
    close(sv[0]);
    close(sv[1]);
    printf("ok %d\n", other[SIZE - 1]);
    close(fd);
    unlink(path);
    return 0;
}
