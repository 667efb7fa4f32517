#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
/* Forks a child that outlives it (and the `uzswap run` it ran under): the child maps and
 * writes memory a second later, then writes "child ok" (or what failed) to the file given. */
int main(int argc, char **argv) {
	if (fork() == 0) {
		sleep(1);
		size_t n = 8 << 20;
		char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		FILE *f = fopen(argv[1], "w");
		if (p == MAP_FAILED) { fprintf(f, "mmap failed\n"); fclose(f); return 1; }
		memset(p, 1, n);
		fprintf(f, "child ok\n");
		fclose(f);
		return 0;
	}
	return 0;
}
