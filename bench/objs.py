import hashlib
# A few million small objects and a dict: about 300 MB at the peak.
d = {}
for i in range(800_000):
    d[f"key{i}"] = (i, str(i) * 3, [i, i + 1])
h = hashlib.sha256()
for k in sorted(d):
    h.update(repr(d[k]).encode())
print(len(d), h.hexdigest())
