import hashlib, sys
n = int(sys.argv[1])
d = {}
for i in range(n):
    d[f"key{i}"] = [i, str(i) * 5, (i, i * 2)]
h = hashlib.sha256()
for k in sorted(d):
    h.update(repr(d[k]).encode())
print(len(d), h.hexdigest())
