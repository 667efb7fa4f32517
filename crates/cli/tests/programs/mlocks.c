/* Memory locked with mlock (a malloc'd block, its address not on a page boundary) and
 * mlockall (MCL_CURRENT), then a heap three times the limit written and read back. Under
 * uzswap the heap is not locked (said once), so it stays within the limit; what the program
 * reads is the same. Prints a checksum of what it read (not the locks' results, which depend
 * on RLIMIT_MEMLOCK). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MIB (1UL << 20)

int main(void) {
    unsigned char *key = malloc(1 << 20);
    memset(key, 0x5a, 1 << 20);
    (void)mlock(key, 1 << 20);
    (void)mlockall(MCL_CURRENT);
    size_t len = 72 * MIB;
    unsigned char *heap = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (heap == MAP_FAILED) return 1;
    for (size_t i = 0; i < len; i++) heap[i] = (unsigned char)(i * 2654435761u >> 13);
    uint64_t sum = 0;
    for (size_t i = 0; i < len; i += 61) sum += heap[i];
    for (size_t i = 0; i < (1 << 20); i++) sum += key[i];
    (void)munlockall();
    (void)munlock(key, 1 << 20);
    printf("%llu\n", (unsigned long long)sum);
    return 0;
}
