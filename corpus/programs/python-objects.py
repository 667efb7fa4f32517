# A CPython process holding typical program data: a dict of records (str, int, float, list,
# nested dict), their JSON and CSV text, a word index, float lists, bytes. It stops itself
# (SIGSTOP) when everything is built, for `uzswap corpus capture` to read.
import json
import os
import random
import signal

rng = random.Random(1)
words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
         "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
         "sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu"]
cities = ["Berlin", "Lisbon", "Osaka", "Lagos", "Lima", "Austin", "Hanoi", "Perth", "Quito"]

users = {}
for i in range(120_000):
    name = f"{rng.choice(words).title()} {rng.choice(words).title()}"
    users[f"user-{i:06d}"] = {
        "id": i,
        "name": name,
        "email": f"{name.lower().replace(' ', '.')}{i}@example.org",
        "city": rng.choice(cities),
        "score": rng.random() * 100,
        "visits": rng.randrange(1000),
        "tags": rng.sample(words, rng.randrange(1, 5)),
        "address": {"street": f"{rng.randrange(1, 300)} {rng.choice(words).title()} Street",
                    "zip": f"{rng.randrange(10000, 99999)}"},
    }

json_text = [json.dumps(u) for u in list(users.values())[:40_000]]
csv_text = "\n".join(f"{u['id']},{u['name']},{u['city']},{u['score']:.3f},{u['visits']}"
                     for u in users.values())
index = {}
for key, u in users.items():
    for t in u["tags"]:
        index.setdefault(t, []).append(key)
series = [[rng.gauss(0, 1) for _ in range(1000)] for _ in range(300)]
by_city = {c: sum(1 for u in users.values() if u["city"] == c) for c in cities}
blobs = [bytes(rng.getrandbits(8) for _ in range(64)) * 4 for _ in range(2000)]

os.kill(os.getpid(), signal.SIGSTOP)
