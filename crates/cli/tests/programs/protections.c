/* Protections over heap memory, kept as the kernel keeps them, with the heap past its limit
 * and evicted in part: each access a protection forbids traps (SIGSEGV, caught and counted),
 * each it allows reads what was written. Prints one line of counts, the same as without
 * uzswap:
 * - a 1 MiB PROT_NONE reservation traps on read, then a part committed with mprotect reads
 *   zero and keeps what is written;
 * - a page of written data made PROT_NONE traps, made read-only reads its bytes and traps on
 *   write, made read-write again has them all;
 * - a fixed PROT_NONE mapping over part of a block (a decommit) traps, and reads zero once
 *   made read-write;
 * - a guard page at the start of a malloc'd buffer traps, the rest is written and read;
 * - a block whose protections changed, unmapped, then mapped again, is plain read-write. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE 4096UL
#define BLOCK (32UL << 20)

static sigjmp_buf back;
static void on_segv(int sig) { (void)sig; siglongjmp(back, 1); }

/* 1 if reading (or writing, with `write`) `p` traps. */
static int traps(volatile unsigned char *p, int write) {
    if (sigsetjmp(back, 1)) return 1;
    if (write) *p = 1; else (void)*p;
    return 0;
}

static unsigned char byte_at(size_t i) { return (unsigned char)(i / PAGE * 7 + i % 13 + 1); }

int main(void) {
    struct sigaction sa = {0};
    sa.sa_handler = on_segv;
    sigaction(SIGSEGV, &sa, NULL);
    int trapped = 0, wrong = 0;
    unsigned char *data = mmap(NULL, BLOCK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (size_t i = 0; i < BLOCK; i++) data[i] = byte_at(i);
    /* Another heap as large, so that the first is evicted in part. */
    unsigned char *more = mmap(NULL, BLOCK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (size_t i = 0; i < BLOCK; i++) more[i] = (unsigned char)(i * 31 >> 9);

    unsigned char *reserved = mmap(NULL, 1 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    trapped += traps(reserved, 0) + traps(reserved + (1 << 19), 0);
    mprotect(reserved, 256 << 10, PROT_READ | PROT_WRITE);
    wrong += reserved[100] != 0;
    memset(reserved, 5, 256 << 10);
    trapped += traps(reserved + (256 << 10), 0);
    wrong += reserved[(256 << 10) - 1] != 5;

    unsigned char *page = data + 8 * PAGE;
    mprotect(page, PAGE, PROT_NONE);
    trapped += traps(page, 0) + traps(page + 100, 1);
    mprotect(page, PAGE, PROT_READ);
    trapped += traps(page, 1);
    for (size_t i = 0; i < PAGE; i++) wrong += page[i] != byte_at(8 * PAGE + i);
    mprotect(page, PAGE, PROT_READ | PROT_WRITE);
    page[0] = byte_at(8 * PAGE);

    unsigned char *part = data + BLOCK / 2;
    mmap(part, 64 * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    trapped += traps(part, 0) + traps(part + 63 * PAGE, 1);
    mprotect(part, 64 * PAGE, PROT_READ | PROT_WRITE);
    for (size_t i = 0; i < 64 * PAGE; i++) wrong += part[i] != 0;
    for (size_t i = 0; i < 64 * PAGE; i++) part[i] = byte_at(BLOCK / 2 + i);

    unsigned char *buf = malloc(64 * PAGE);
    unsigned char *guard = (unsigned char *)(((uintptr_t)buf + PAGE - 1) & ~(PAGE - 1));
    mprotect(guard, PAGE, PROT_NONE);
    trapped += traps(guard, 1);
    memset(guard + PAGE, 3, 32 * PAGE);
    mprotect(guard, PAGE, PROT_READ | PROT_WRITE);
    free(buf);

    for (size_t i = 0; i < BLOCK; i++) wrong += data[i] != byte_at(i);
    for (size_t i = 0; i < BLOCK; i++) wrong += more[i] != (unsigned char)(i * 31 >> 9);

    mprotect(data, PAGE, PROT_READ);
    munmap(data, BLOCK);
    munmap(reserved, 1 << 20);
    unsigned char *again = mmap(NULL, BLOCK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    trapped += traps(again, 1) + traps(again + BLOCK - 1, 1);
    wrong += again[0] != 1;
    printf("trapped %d wrong %d\n", trapped, wrong);
    return 0;
}
