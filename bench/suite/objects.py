"""CPython objects: a dict of small tuples, strings and lists built, then sorted and hashed
(an interpreter's heap of many small objects, touched in key order at the end).
Usage: objects.py [N] (default 600,000 keys, about 250 MB at the peak)."""
import hashlib
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 600_000
d = {}
for i in range(n):
    d[f"key{i}"] = (i, str(i) * 3, [i, i + 1])
h = hashlib.sha256()
for k in sorted(d):
    h.update(repr(d[k]).encode())
print(len(d), h.hexdigest())
