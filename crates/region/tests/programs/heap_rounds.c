/* A program that knows nothing of uzswap (built static): it maps one heap with mmap, and
 * four threads each fill their quarter of it, then rewrite random pages, discard runs of
 * pages with madvise(MADV_DONTNEED) and check every page against what they last wrote, for
 * several rounds; then it unmaps the heap. It prints "bad N" (pages found changed) and exits
 * 0 when N is 0.
 *
 * Usage: heap_rounds HEAP_MIB ROUNDS */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE 4096
#define THREADS 4

static unsigned char *heap;
static size_t nr_pages, rounds;
/* What each page last held: 0 for zeros, else the version its bytes derive from. */
static uint32_t *version;
static long bad[THREADS];

static uint64_t mix(uint64_t x) {
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

/* A page's bytes for version v: a 512-byte random head, then words that compress. */
static void fill(size_t p, uint32_t v, unsigned char *out) {
	uint64_t *w = (uint64_t *)out;
	for (size_t i = 0; i < PAGE / 8; i++)
		w[i] = i < 64 ? mix(p * 1000003 + v * 7919 + i) : (p << 20) + v + (i & 7);
}

static int matches(size_t p) {
	unsigned char want[PAGE];
	if (version[p] == 0)
		memset(want, 0, PAGE);
	else
		fill(p, version[p], want);
	return memcmp(heap + p * PAGE, want, PAGE) == 0;
}

static void *work(void *arg) {
	long t = (long)arg;
	size_t first = nr_pages / THREADS * t, last = nr_pages / THREADS * (t + 1);
	uint64_t rng = mix(t + 1);
	for (size_t p = first; p < last; p++) {
		version[p] = 1;
		fill(p, 1, heap + p * PAGE);
	}
	for (size_t r = 0; r < rounds; r++) {
		for (size_t i = 0; i < (last - first) / 2; i++) {
			rng = mix(rng);
			size_t p = first + rng % (last - first);
			if (!matches(p))
				bad[t]++;
			version[p] = version[p] + 1 + (version[p] == UINT32_MAX);
			fill(p, version[p], heap + p * PAGE);
		}
		rng = mix(rng);
		size_t at = first + rng % (last - first - 64), n = 1 + rng % 64;
		if (madvise(heap + at * PAGE, n * PAGE, MADV_DONTNEED) != 0) {
			perror("madvise");
			exit(2);
		}
		for (size_t p = at; p < at + n; p++)
			version[p] = 0;
		for (size_t p = first; p < last; p++)
			if (!matches(p))
				bad[t]++;
	}
	return NULL;
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: heap_rounds HEAP_MIB ROUNDS\n");
		return 2;
	}
	size_t len = (size_t)atol(argv[1]) << 20;
	rounds = atol(argv[2]);
	nr_pages = len / PAGE;
	version = calloc(nr_pages, sizeof *version);
	heap = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (heap == MAP_FAILED || !version) {
		perror("mmap");
		return 2;
	}
	printf("heap %p\n", (void *)heap);
	fflush(stdout);
	pthread_t threads[THREADS];
	for (long t = 0; t < THREADS; t++)
		pthread_create(&threads[t], NULL, work, (void *)t);
	long total = 0;
	for (long t = 0; t < THREADS; t++) {
		pthread_join(threads[t], NULL);
		total += bad[t];
	}
	if (munmap(heap, len) != 0) {
		perror("munmap");
		return 2;
	}
	printf("bad %ld\n", total);
	return total != 0;
}
