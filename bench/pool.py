"""multiprocessing.Pool(4) over a 240 MB heap: 60,000 blocks of 4 KB (16 random bytes
repeated: they compress), four forked workers hashing a quarter each; prints a digest of
the blocks, the workers' digests, and the pool's time. BENCHMARKS.md's fork table:
uzswap run --memory-high 128M --stats=full -- python3.11 bench/pool.py"""
import hashlib
import multiprocessing as mp
import random
import time

N = 60000
random.seed(7)
data = [random.randbytes(16) * 256 for _ in range(N)]
digest = hashlib.sha256(b"".join(data[::97])).hexdigest()


def work(k):
    h = hashlib.sha256()
    for i in range(k, N, 4):
        h.update(data[i][:64])
    return h.hexdigest()


if __name__ == "__main__":
    mp.set_start_method("fork")
    t = time.time()
    with mp.Pool(4) as p:
        r = p.map(work, range(4))
    print(digest[:16], [x[:8] for x in r], "%.1f s" % (time.time() - t))
