"""Load a Redis server with keys, or check them, speaking RESP over a socket (no client
library needed). Usage: redis_keys.py PORT fill|check N. Prints one line: what it did and
how many keys were wrong."""
import socket
import sys

port, mode, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
sock = socket.create_connection(("127.0.0.1", port))
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


def value(i):
    # About 250 bytes, different for every key, compressible as real values are.
    return (f"value-{i}-{i * 7919 % 1000003}-" * 8).encode()


BATCH = 1000
wrong = 0
for first in range(0, n, BATCH):
    keys = range(first, min(n, first + BATCH))
    if mode == "fill":
        sock.sendall(b"".join(command("SET", f"key:{i}", value(i)) for i in keys))
        wrong += sum(reply() != b"+OK" for _ in keys)
    else:
        sock.sendall(b"".join(command("GET", f"key:{i}") for i in keys))
        wrong += sum(reply() != value(i) for i in keys)
print(mode, n, "wrong", wrong)
