"""The poison corpus of scripts/chaos, sent through the HTTP API.

    poison.py INGEST_URL DIR PREFIX

Every case is one request with an expectation: `valid` (the contract says it is a good message:
202, then stored in all four stores), `invalid` (the contract says no: a 4xx at the edge) or
`either` (a 4xx at the edge, or 202 and stored everywhere). Any 5xx, timeout or connection error
fails the case whatever the expectation. Writes DIR/poison.json (every case, its answer and
verdict) and the id files DIR/poison-{accepted,uncertain,refused}.ids for reconcile; prints one
line per case. Exit 1 if a case failed its expectation.

Accepted ids carry the digest of what was sent (`id:digest`, pipeline_common::digest::sent), so
reconcile checks that every store holds exactly that, byte for byte, not only that the stores
agree. That needs the canonical sent_at: every case sends SENT_AT unless it tests sent_at itself
(those, and the one without sent_at, are compared store against store only).
"""
import hashlib
import http.client
import json
import os
import sys
import time
import urllib.parse

url, out_dir, P = sys.argv[1], sys.argv[2], sys.argv[3]
u = urllib.parse.urlsplit(url)
MAXB = 16384
# The API key (scripts/lib.sh points INGEST_KEY_FILE at the lab's token).
KEY = open(os.environ["INGEST_KEY_FILE"]).read().strip() if os.environ.get("INGEST_KEY_FILE") else ""
HEADERS = {"Content-Type": "application/json", **({"Authorization": f"Bearer {KEY}"} if KEY else {})}


# A sent_at already in the stores' canonical form (UTC, milliseconds): what they hold of it.
SENT_AT = "2026-01-01T00:00:00.000Z"


def digest(m):
    """`id:digest` when this script knows what the stores must hold of `m`, else the bare id."""
    if m.get("sent_at") != SENT_AT or not all(isinstance(m.get(k), str) for k in ("id", "sender", "recipient", "body")):
        return m.get("id")
    fields = json.dumps([m["sender"], m["recipient"], m["body"], SENT_AT], ensure_ascii=False, separators=(",", ":"))
    return f"{m['id']}:{hashlib.sha256(fields.encode('utf-8')).hexdigest()[:16]}"


def msg(i, sender="poison-sender", recipient="poison-recipient", body="poison", sent_at=SENT_AT):
    m = {"id": i, "sender": sender, "recipient": recipient, "body": body}
    if sent_at is not None:
        m["sent_at"] = sent_at
    return m


def enc(obj):
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


cases = []  # (name, route, body bytes, submitted ids, expectation)


def single(name, m, expect):
    cases.append((name, "/v1/messages", enc(m), [m["id"]], expect))


def raw(name, i, body_json_text, expect):
    """A message whose body value is given as raw JSON text (bytes), for what json.dumps cannot write."""
    head = json.dumps({"id": i, "sender": "poison-sender", "recipient": "poison-recipient", "sent_at": SENT_AT})[:-1].encode()
    cases.append((name, "/v1/messages", head + b', "body": ' + body_json_text + b"}", [i], expect))


def batch(name, items, expect, body=None):
    cases.append((name, "/v1/messages/batch", body if body is not None else enc(items), [m["id"] for m in items], expect))


def pid(tag):
    return f"{P}-{tag}"


# --- sent_at at and past the edges of what every store holds (UTC years 1000..9999) -------------
for tag, t, e in [
    ("d-0000p0001", "0000-01-01T00:00:00+00:01", "either"),  # year -1 in UTC
    ("d-9999m0001", "9999-12-31T23:59:59-00:01", "either"),  # year 10000 in UTC
    ("d-1000z", "1000-01-01T00:00:00Z", "valid"),
    ("d-9999us", "9999-12-31T23:59:59.999999Z", "valid"),
    ("d-9999ns", "9999-12-31T23:59:59.9999999Z", "either"),
    ("d-0999", "0999-12-31T23:59:59Z", "either"),
    ("d-leapsec", "2016-12-31T23:59:60Z", "either"),
    ("d-lowercase", "2024-02-29t12:00:00z", "either"),
    ("d-feb30", "2024-02-30T00:00:00Z", "invalid"),
    ("d-nooffset", "2024-02-29T12:00:00", "invalid"),
]:
    single(tag, msg(pid(tag), sent_at=t), e)
single("d-absent", msg(pid("d-absent"), sent_at=None), "valid")  # the ingest's clock gives it one

# --- maximum field lengths, and one past them ---------------------------------------------------
id64 = (pid("id64-") + "x" * 64)[:64]
single("id-64", msg(id64), "valid")
single("id-64-again", msg(id64, body="posted twice: stored once"), "valid")
single("id-65", msg((pid("id65-") + "x" * 65)[:65]), "invalid")
single("id-bad-char", msg(pid("bad id")), "invalid")
single("sender-64", msg(pid("s64"), sender="s" * 64), "valid")
single("sender-65", msg(pid("s65"), sender="s" * 65), "invalid")
single("recipient-64", msg(pid("r64"), recipient="r" * 64), "valid")
single("recipient-65", msg(pid("r65"), recipient="r" * 65), "invalid")
single("sender-empty", msg(pid("s0"), sender=""), "invalid")
single("sender-64-astral", msg(pid("s64a"), sender="\U0001F600" * 64, recipient="\U00020000" * 64), "either")
single("body-16384", msg(pid("b16384"), body="b" * MAXB), "valid")
single("body-16385", msg(pid("b16385"), body="b" * (MAXB + 1)), "invalid")
single("body-16384-4byte", msg(pid("b4096x4"), body="\U0001F600" * (MAXB // 4)), "valid")
single("body-16388-4byte", msg(pid("b4097x4"), body="\U0001F600" * (MAXB // 4 + 1)), "invalid")
single("body-16384-2byte", msg(pid("b8192x2"), body="\u00e9" * (MAXB // 2)), "valid")
single("body-16384-nul", msg(pid("b16384nul"), body="\u0000" * MAXB), "either")
single("body-empty", msg(pid("b0"), body=""), "either")

# --- every Unicode plane --------------------------------------------------------------------
PLANES = {
    0: "\u00e9\u4e2d\u200b\ufeff\ufffd\uffff\ud7ff\ue000",
    1: "\U00010000\U0001F600\U0001D11E\U0001FFFF",
    2: "\U00020000\U0002A6D6\U0002FFFD",
    14: "\U000E0001\U000E0041\U000E0100",
    15: "\U000F0000\U000FFFFD",
    16: "\U00100000\U0010FFFD\U0010FFFF",
}
for p in range(17):
    chars = PLANES.get(p, "".join(chr(p * 0x10000 + o) for o in (0x0000, 0x0100, 0xFFFD)))
    body = (chars * (2000 // len(chars) + 1))[:2000]
    single(f"plane-{p:02d}", msg(pid(f"plane{p:02d}"), sender=(chars * 64)[:64], recipient=chars[0] * 64, body=body), "either")
raw("json-surrogate-pair", pid("surrpair"), b'"\\ud83d\\ude00 escaped pair"', "valid")
raw("json-lone-surrogate", pid("surrlone"), b'"\\ud800 lone"', "invalid")
raw("raw-invalid-utf8", pid("badutf8"), b'"\xff\xfe bytes"', "invalid")
raw("raw-nul-in-string", pid("rawnul"), b'"a\x00b"', "invalid")

# --- NUL and control characters (escaped, i.e. valid JSON) -----------------------------------------
single("nul-body", msg(pid("nulbody"), body="a\u0000b\u0000"), "either")
single("nul-sender", msg(pid("nulsender"), sender="s\u0000s"), "either")
single("nul-recipient", msg(pid("nulrecip"), recipient="\u0000"), "either")
single("controls-body", msg(pid("ctrl"), body="".join(chr(c) for c in range(32)) + "\u007f\u0085\u2028\u2029"), "either")

# --- batches: the largest allowed, by count and by bytes, and one past -------------------------
batch("batch-1000", [msg(pid(f"b1k-{k:04d}")) for k in range(1000)], "valid")
batch("batch-1000x8000B", [msg(pid(f"b1k8-{k:04d}"), body="m" * 8000) for k in range(1000)], "valid")
batch("batch-480x16384B", [msg(pid(f"b480-{k:03d}"), body="M" * MAXB) for k in range(480)], "valid")
batch("batch-1001", [msg(pid(f"b1001-{k:04d}")) for k in range(1001)], "invalid")
batch("batch-over-8MiB", [msg(pid(f"bbig-{k:03d}"), body="B" * MAXB) for k in range(520)], "invalid")
batch("batch-one-bad-item", [msg(pid(f"bbad-{k}")) for k in range(5)] + [msg(pid("bbad-5"), sender="")], "invalid")
batch("batch-dup-id", [msg(pid("bdup")), msg(pid("bdup"), body="second")], "either")
batch("batch-empty", [], "either")


def post(route, body):
    c = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=60)
    try:
        try:
            c.request("POST", route, body=body, headers=HEADERS)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer (413) and close before reading all of a large body
        r = c.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        c.close()


results, failed = [], 0
acc, unc, ref = [], [], []
for name, route, body, ids, expect in cases:
    t0 = time.time()
    try:
        status, text = post(route, body)
    except Exception as e:  # a connection error after sending: uncertain
        status, text = 0, f"{type(e).__name__}: {e}"
    got_ids = []
    if status == 202:
        try:
            j = json.loads(text)
            got_ids = j["ids"] if "ids" in j else [j["id"]]
        except Exception:
            got_ids = []
    problems = []
    if status == 202:
        # What the stores must hold: per id, the last item sent with it (a later item of a batch
        # gets the later version, which every store keeps).
        try:
            items = json.loads(body)
            items = items if isinstance(items, list) else [items]
        except ValueError:
            items = []
        tokens = {it.get("id"): digest(it) for it in items if isinstance(it, dict)}
        acc.extend(tokens.get(i) or i for i in dict.fromkeys(got_ids))
        if sorted(set(got_ids)) != sorted(set(ids)):
            problems.append(f"202 names ids {got_ids[:3]}... not the {len(set(ids))} sent")
        if expect == "invalid":
            problems.append("the contract refuses it, the ingest accepted it")
    elif 400 <= status < 500:
        ref.extend(ids)
        if expect == "valid":
            problems.append("a valid message was refused")
    else:
        (ref if status == 503 else unc).extend(ids)
        problems.append(f"answer {status}: neither 202 nor a 4xx")
    failed += bool(problems)
    results.append({"case": name, "route": route, "bytes": len(body), "messages": len(ids), "expect": expect,
                    "status": status, "answer": text[:300], "seconds": round(time.time() - t0, 3),
                    "ok": not problems, "problems": problems})
    print(f"{'ok  ' if not problems else 'FAIL'} {name:22} {expect:7} -> {status} {text[:100]!r}"
          + (f"  [{'; '.join(problems)}]" if problems else ""), flush=True)

with open(f"{out_dir}/poison.json", "w") as f:
    json.dump(results, f, indent=1)
for cls, ids in (("accepted", acc), ("uncertain", unc), ("refused", ref)):
    with open(f"{out_dir}/poison-{cls}.ids", "w") as f:
        f.write("".join(i + "\n" for i in ids if "\n" not in i))
print(f"poison: {len(cases)} cases, {len(set(acc))} ids accepted, {len(set(unc))} uncertain, {len(set(ref))} refused, "
      f"{failed} cases failed their expectation")
sys.exit(1 if failed else 0)
