"""Reads back what the poison scenario stored and compares it with what was sent.

    fidelity.py DIR        (DIR/poison-sent.jsonl; stores from the environment, as the services see them)

For every accepted poison message (each single case, the first and last item of each batch) the
sender, recipient and body must come back byte for byte from MySQL, Redis, Elasticsearch and
MongoDB, and sent_at must be the same instant to the second in every store that keeps a time
(Mongo keeps milliseconds, MySQL microseconds). Prints one line per difference; exit 1 if any.
"""
import datetime as dt
import json
import os
import re
import socket
import subprocess
import sys
import urllib.parse as up
import urllib.request
import zlib

from pymongo import MongoClient

d = sys.argv[1]
first = {}  # id -> every message sent under it (an id posted twice is stored once, with one of them)
for line in open(os.path.join(d, "poison-sent.jsonl")):
    m = json.loads(line)
    first.setdefault(m["id"], []).append(m)


TIME = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:\.\d+)?(?:([Zz])|([+-])(\d\d):(\d\d))?$")


def second(v):
    """An RFC 3339 time, a datetime or None → UTC epoch seconds (None if it cannot be compared)."""
    if isinstance(v, dt.datetime):
        return int(v.replace(tzinfo=v.tzinfo or dt.timezone.utc).timestamp())
    m = TIME.match(v or "")
    if not m or m.group(6) == "60":  # a leap second: a store holds :59 or the next second
        return None
    y, mo, da, h, mi, se = (int(x) for x in m.groups()[:6])
    try:
        t = dt.datetime(y, mo, da, h, mi, se, tzinfo=dt.timezone.utc)
    except ValueError:
        return None
    if m.group(8):
        off = dt.timedelta(hours=int(m.group(9)), minutes=int(m.group(10)))
        t = t - off if m.group(8) == "+" else t + off
    return int(t.timestamp())


got = {k: {} for k in ("mysql", "redis", "es", "mongo")}
ids = list(first)

# MySQL, through the mariadb client (hex, so NULs and every plane come back intact)
m = up.urlsplit(os.environ["MYSQL_URL"])
by_table = {}
for i in ids:
    by_table.setdefault(zlib.crc32(i.encode()) % 16, []).append(i)
sql = " UNION ALL ".join(
    f"SELECT id, HEX(sender), HEX(recipient), HEX(body), DATE_FORMAT(sent_at, '%Y-%m-%dT%H:%i:%sZ') FROM messages_{t:02d} "
    f"WHERE id IN ({','.join(repr(x) for x in v)})" for t, v in by_table.items())
out = subprocess.run(["mariadb", "-N", "-B", f"-h{m.hostname}", f"-P{m.port or 3306}", f"-u{up.unquote(m.username)}",
                      f"-p{up.unquote(m.password or '')}", m.path.strip("/"), "-e", sql],
                     capture_output=True, text=True, check=True).stdout
for row in out.splitlines():
    i, s_, r_, b_, t_ = row.split("\t")
    h = lambda x: bytes.fromhex(x).decode("utf-8")
    got["mysql"][i] = {"sender": h(s_), "recipient": h(r_), "body": h(b_), "sent_at": t_}

# Redis: a minimal RESP GET (values hold NULs; redis-cli would mangle them)
r = up.urlsplit(os.environ["REDIS_URL"])
sock = socket.create_connection((r.hostname, r.port or 6379), timeout=10)
f = sock.makefile("rb")


def cmd(*args):
    sock.sendall(b"".join([f"*{len(args)}\r\n".encode()] + [b"$%d\r\n%s\r\n" % (len(a), a) for a in (x.encode() for x in args)]))
    line = f.readline()
    if line.startswith(b"$-1"):
        return None
    if line.startswith(b"$"):
        data = f.read(int(line[1:]) + 2)[:-2]
        return data
    return line


if r.password:
    cmd("AUTH", up.unquote(r.password))
cmd("SELECT", (r.path.strip("/") or "0"))
for i in ids:
    v = cmd("GET", f"msg:{i}")
    if v is not None:
        got["redis"][i] = json.loads(v.decode("utf-8"))

# Elasticsearch / OpenSearch: _mget
es = os.environ.get("ES_URL", "http://127.0.0.1:9200").rstrip("/")
req = urllib.request.Request(f"{es}/{os.environ['ES_INDEX']}/_mget", data=json.dumps({"ids": ids}).encode(),
                             headers={"Content-Type": "application/json"})
for doc in json.load(urllib.request.urlopen(req, timeout=30))["docs"]:
    if doc.get("found"):
        got["es"][doc["_id"]] = doc["_source"]

# MongoDB
mc = MongoClient(os.environ.get("MONGO_URL", "mongodb://127.0.0.1:27017"), serverSelectionTimeoutMS=5000)
for doc in mc[os.environ["MONGO_DB"]][os.environ.get("MONGO_COLLECTION", "messages")].find({"_id": {"$in": ids}}):
    got["mongo"][doc["_id"]] = doc

bad = 0
for i, variants in first.items():
    for store, have in got.items():
        h = have.get(i)
        if h is None:
            print(f"{store}: {i} ({variants[0]['case']}) not found")
            bad += 1
            continue
        # The stored copy must equal one of the variants sent under this id (an id posted twice
        # with different content keeps one of them).
        def same(v):
            if any(h.get(k) != v.get(k) for k in ("sender", "recipient", "body")):
                return False
            want = second(v["sent_at"]) if v.get("sent_at") else None
            return want is None or second(h.get("sent_at")) == want
        if not any(same(v) for v in variants):
            v = variants[0]
            diffs = [k for k in ("sender", "recipient", "body") if h.get(k) != v.get(k)]
            detail = ", ".join(f"{k}: sent {v.get(k)!r:.60} stored {h.get(k)!r:.60}" for k in diffs) or \
                f"sent_at: sent {v.get('sent_at')} stored {h.get('sent_at')}"
            print(f"{store}: {i} ({v['case']}) differs: {detail}")
            bad += 1
print(f"fidelity: {len(first)} messages × 4 stores read back, {bad} differences")
sys.exit(1 if bad else 0)
