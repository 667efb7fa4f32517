# A heap of N blocks of 64 KiB (a SHA-256 digest repeated: compressible), built, then each
# checked; prints a digest of them. bench/overhead.sh's companion for a program that crosses
# half its limit (BENCHMARKS.md): python3 bench/blocks.py 24000 is about 1.5 GB.
import hashlib
import sys

n = int(sys.argv[1])
blocks = [hashlib.sha256(str(i).encode()).digest() * 2048 for i in range(n)]
h = hashlib.sha256()
for i, b in enumerate(blocks):
    assert b == hashlib.sha256(str(i).encode()).digest() * 2048, i
    h.update(b[:32])
print(h.hexdigest())
