#!/bin/bash
# gcc compiling one large generated C file at -O2 (a compiler's garbage-collected heap of
# trees and RTL), printing a checksum of the object code. Usage: cc.sh [FUNCTIONS]
# (default 400 functions).
set -euo pipefail
n=${1:-400}
dir=$(mktemp -d /tmp/uzswap-suite-cc.XXXXXX)
trap 'rm -rf "$dir"' EXIT
awk -v n="$n" 'BEGIN {
  for (f = 0; f < n; f++) {
    printf "int f%d(int x, int y) {\n  int a = x, b = y;\n  switch ((x ^ %d) & 63) {\n", f, f
    for (c = 0; c < 64; c++) printf "  case %d: a = a * %d + b; b ^= a >> %d; break;\n", c, c + f, c % 13
    printf "  }\n  for (int i = 0; i < (y & 15); i++) a += (b << (i & 7)) ^ %d;\n  return a + b;\n}\n", f
  }
  printf "int main(void) { int s = 0;\n"
  for (f = 0; f < n; f++) printf "  s += f%d(%d, %d);\n", f, f, f * 3
  printf "  return s & 1; }\n"
}' > "$dir/big.c"
gcc -O2 -c "$dir/big.c" -o "$dir/big.o"
md5sum < "$dir/big.o"
