/* A heap shaped like a Java server's, in C: an old generation of 64 KiB objects, updated 64
 * bytes at a time at Zipf-skewed places, 1-8 KiB of garbage allocated and freed on every
 * operation, and two full marks that read every object, as a collector's mark phase does.
 * Prints a checksum. Usage: java_like_heap [OLD_MIB] [OPS] (default 192 MiB, 4,000,000). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OBJ (64 << 10)

static uint64_t state = 88172645463325252ull;
static uint64_t next(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

static uint64_t mark(unsigned char **old, size_t n) {
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < OBJ; j += 4096) sum += old[i][j];
    return sum;
}

int main(int argc, char **argv) {
    size_t n = (argc > 1 ? (size_t)atol(argv[1]) : 192) * (1 << 20) / OBJ;
    long ops = argc > 2 ? atol(argv[2]) : 4000000;
    unsigned char **old = malloc(n * sizeof *old);
    for (size_t i = 0; i < n; i++) {
        old[i] = malloc(OBJ);
        /* Compressible as objects are: fields, small numbers, some text. */
        for (size_t j = 0; j < OBJ; j += 8) {
            uint64_t v = (i * 131 + j / 8) % 977;
            memcpy(old[i] + j, &v, 8);
        }
        memcpy(old[i] + 64, "java.lang.String", 16);
    }
    /* Zipf-like ranks: object r is drawn with weight 1/(r+1); ranks scattered by a stride. */
    double h = 0;
    for (size_t r = 0; r < n; r++) h += 1.0 / (r + 1);
    uint64_t sum = mark(old, n);
    for (long op = 0; op < ops; op++) {
        double u = (double)(next() >> 11) / 9007199254740992.0 * h;
        /* The rank whose harmonic sum is u: H(r + 1) ~ ln(r + 1) + 0.5772 (Euler's gamma). */
        size_t r = (size_t)(exp(u - 0.5772) - 1);
        if (r >= n) r = n - 1;
        size_t i = (r * 2654435761u) % n;
        size_t at = (next() % (OBJ / 64)) * 64;
        for (int k = 0; k < 64; k++) old[i][at + k] += (unsigned char)(op + k);
        size_t g = 1024 + next() % 7168;
        unsigned char *garbage = malloc(g);
        memset(garbage, (int)op, g);
        sum += garbage[g / 2] + old[i][at];
        free(garbage);
        if (op == ops / 2) sum += mark(old, n);
    }
    sum += mark(old, n);
    printf("%zu %llu\n", n, (unsigned long long)sum);
    return 0;
}
