"""redis-server under a YCSB-like workload A: N keys loaded, then a read/update mix (half
each) over keys drawn with a skew, pipelined, as a cache server sees it. Starts its own
redis-server (no persistence) on a free port, speaks RESP over a socket, and prints a
checksum of what it read. Usage: redis_ycsb.py [N] [OPS] (default 400,000 keys, 800,000
operations)."""
import socket
import subprocess
import sys
import time

n = int(sys.argv[1]) if len(sys.argv) > 1 else 400_000
ops = int(sys.argv[2]) if len(sys.argv) > 2 else 800_000
probe = socket.socket()
probe.bind(("127.0.0.1", 0))
port = probe.getsockname()[1]
probe.close()
server = subprocess.Popen(
    ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
     "--appendonly", "no", "--protected-mode", "no"],
    stdout=subprocess.DEVNULL,
)
for _ in range(500):
    try:
        sock = socket.create_connection(("127.0.0.1", port))
        break
    except OSError:
        time.sleep(0.02)
else:
    sys.exit("redis-server did not start")
replies = sock.makefile("rb")


def command(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def reply():
    line = replies.readline()
    if line[:1] == b"$":
        size = int(line[1:])
        return None if size < 0 else replies.read(size + 2)[:-2]
    return line.strip()


def value(i, gen):
    return (f"value-{i}-{gen}-{i * 7919 % 1000003}-" * 7).encode()


BATCH = 500
for first in range(0, n, BATCH):
    keys = range(first, min(n, first + BATCH))
    sock.sendall(b"".join(command("SET", f"user:{i}", value(i, 0)) for i in keys))
    for _ in keys:
        reply()
x = 42
checksum = 0
for first in range(0, ops, BATCH):
    batch = []
    for _ in range(min(BATCH, ops - first)):
        x = (x * 6364136223846793005 + 1442695040888963407) % 2**64
        # Skewed: one key in five is drawn from a twentieth of the keys.
        k = (x >> 20) % (n // 20) if (x >> 8) % 5 else (x >> 20) % n
        if (x >> 4) % 2:
            batch.append(command("GET", f"user:{k}"))
        else:
            batch.append(command("SET", f"user:{k}", value(k, first)))
    sock.sendall(b"".join(batch))
    for _ in batch:
        r = reply()
        checksum = (checksum * 31 + len(r or b"") + (r[-3] if r and len(r) > 3 else 0)) % 1000000007
sock.sendall(command("DBSIZE"))
size = reply()
sock.sendall(command("SHUTDOWN", "NOSAVE"))
server.wait()
print(size.decode(), checksum)
