#!/usr/bin/env python3
"""The table of scripts/bench, from its evidence folder alone (so it can be re-printed later):
   python3 scripts/bench_table.py OUT VUS BATCH BATCH_VUS IN_FLIGHT RECORDS"""
import csv
import json
import os
import re
import sys
from pathlib import Path

SEED_RATE = 10171  # the seed's batch figure: 4 cores / 8 threads, servers in Docker, same laptop
HZ = 100  # /proc/<pid>/stat ticks per second (USER_HZ)
out, vus, batch, batch_vus, in_flight, records = sys.argv[1], *map(int, sys.argv[2:7])
out = Path(out)
ref = out / "references"


def load(p):
    return json.loads(Path(p).read_text())


def fmt(v, digits=0):
    return "—" if v is None else f"{v:,.{digits}f}"


def null_ref(name):
    s, cpu = load(ref / f"{name}.json"), load(ref / f"{name}.cpu.json")
    m, msgs = s["measured"], max(s["accepted"], 1)
    lat = m["latency_ms"]
    return {
        "rate": m["messages_per_s"], "requests": m["rate_per_s"], "p50": lat["p50"], "p99": lat["p99"],
        "server_us": cpu["null_ticks"] / HZ * 1e6 / msgs, "k6_us": cpu["k6_ticks"] / HZ * 1e6 / msgs,
    }


def alone(name):
    line = (ref / f"alone-{name}.txt").read_text().strip().splitlines()[-1]
    rate = float(re.search(r"([\d.]+) msg/s", line).group(1))
    client = float(re.search(r"([\d.]+) µs CPU/msg", line).group(1))
    ticks = load(ref / f"alone-{name}.cpu.json")["server_ticks"]
    return {"rate": rate, "server_us": ticks / HZ * 1e6 / records, "client_us": client, "line": line}


def pipeline(name):
    """The run's verdict, plus its end-to-end rate: every message stored in all four stores, over
    the time from k6's start until the last one was (the writer's per-store counters in the
    round's timeline). Kafka decouples the two halves: the ingest may accept faster than the
    stores write, and the backlog drains after k6 stops, so k6's accepted rate alone overstates
    what reached the stores. Only for a valid run in which every message that entered was stored
    (the counters also count a redelivered message again, so they are capped at that number)."""
    v = load(out / name / "verdicts.json")[0]
    rnd = out / name / "rounds" / v["round"]
    started = load(rnd / "round.json")["k6"]["started_s"]
    stored = {}
    with open(rnd / "timeline.csv") as f:
        for row in csv.DictReader(f):
            if row["source"] == "writer" and row["name"] == "writer_store_records_total":
                stored.setdefault(float(row["t_s"]), {})[row["labels"]] = float(row["value"])
    entered = v.get("messages") or 0
    in_all = [(t, min(min(c.values()), entered)) for t, c in sorted(stored.items()) if len(c) == 4]
    done = min((t for t, n in in_all if n >= entered), default=None) if entered else None
    ok = v["valid"] and done is not None and done > started
    v["e2e"] = entered / (done - started) if ok else None
    v["e2e_messages"], v["e2e_seconds"] = entered, (done - started) if ok else None
    return v


print(f"# Performance run: {out.name}\n")
if (out / "PROFILING").exists():
    print("**PROFILING RUN: not an acceptance run.**\n")
ns, nb = null_ref("null-single"), null_ref("null-batch")
stores = os.environ["PIPELINE_STORES"].split()  # the registry's (scripts/bench: writer --list-stores)
servers = {k: alone(k) for k in stores + ["kafka"]}
slowest = min(servers, key=lambda k: servers[k]["rate"])
ps, pb = pipeline("single"), pipeline("batch")

print("## End to end\n")
print("*messages/s*: every message stored in all four stores, over the time from k6's start until the last one was "
      "(the ratio uses it). *accepted/s*: k6's measured phase at the ingest. *stored/s under load*: the writer during "
      "that phase. Kafka decouples the halves: what the ingest accepts faster than the stores write drains after k6 stops.\n")
print("| run | messages/s | accepted/s | stored/s under load | p50 ms | p99 ms | reference | ratio | goal | reconcile |")
print("|---|---|---|---|---|---|---|---|---|---|")
rows = [
    (f"single POSTs, {vus} VUs", ps, f"null 202: {fmt(ns['rate'])}/s", ns["rate"], "≥ 0.6"),
    (f"batches of {batch}, {batch_vus} VUs", pb, f"slowest server alone ({slowest}): {fmt(servers[slowest]['rate'])}/s",
     servers[slowest]["rate"], "≥ 0.7"),
]
for label, v, ref_text, ref_rate, goal in rows:
    ratio = "—" if v["e2e"] is None else f"{v['e2e'] / ref_rate:.2f}"
    print(f"| pipeline, {label} | {fmt(v['e2e'])} | {fmt(v['throughput'])} | {fmt(v.get('writer_rate'))} | "
          f"{fmt(v.get('p50_ms'))} | {fmt(v['p99_ms'])} | {ref_text} | {ratio} | {goal} | "
          f"{'exact' if v['valid'] else 'INVALID: ' + v['reasons']} |")
print(f"\n{fmt(pb['e2e_messages'])} messages in {fmt(pb['e2e_seconds'], 1)} s with batches. The seed reported "
      f"{SEED_RATE:,} messages/s (4 cores / 8 threads, servers in Docker on the same laptop): batches here reach "
      f"{(pb['e2e'] or 0) / SEED_RATE:.2f} × that end to end on 2 cores.\n")

print("## References, measured alone in this run\n")
print("| reference | messages/s | p50 / p99 ms | server CPU µs/msg | client CPU µs/msg |")
print("|---|---|---|---|---|")
print(f"| null 202, single POSTs, {vus} VUs ({fmt(ns['requests'])} requests/s) | {fmt(ns['rate'])} | {fmt(ns['p50'], 1)} / {fmt(ns['p99'], 1)} | {fmt(ns['server_us'], 1)} | k6 {fmt(ns['k6_us'], 1)} |")
print(f"| null 202, batches of {batch}, {batch_vus} VUs | {fmt(nb['rate'])} | {fmt(nb['p50'], 1)} / {fmt(nb['p99'], 1)} | {fmt(nb['server_us'], 1)} | k6 {fmt(nb['k6_us'], 1)} |")
# Each store's server of the native stack (docs/architecture.md lists them), by the store's name.
names = {**{k: f"{k}'s server" for k in stores}, "kafka": "tansu (produce, then consume)"}
for k, s in servers.items():
    how = f"{records:,} messages, {batch} to a record" if k == "kafka" else f"{records // batch} batches of {batch}, {in_flight} in flight"
    print(f"| {names[k]} alone, {how} | {fmt(s['rate'])} | — | {fmt(s['server_us'], 1)} | {fmt(s['client_us'], 1)} |")

print("\n## CPU per message, per process, in the pipeline runs\n")
print("µs of CPU (user + system, /proc) from k6's start until the writer stored the last record, per message that entered the pipeline.\n")
procs = ["ingest", "writer", "k6", "kafka"] + stores
goals = {"ingest": ("≤ 40", "≤ 8"), "writer": ("≤ 30", "≤ 30")}
print(f"| process | single POSTs | goal | batches of {batch} | goal |")
print("|---|---|---|---|---|")
for p in procs:
    a, b = ps.get("cpu_us_per_msg", {}).get(p), pb.get("cpu_us_per_msg", {}).get(p)
    g = goals.get(p, ("", ""))
    print(f"| {p} | {fmt(a)} | {g[0]} | {fmt(b)} | {g[1]} |")
ta, tb = sum(ps.get("cpu_us_per_msg", {}).values()), sum(pb.get("cpu_us_per_msg", {}).values())
print(f"| **all** | {fmt(ta)} | | {fmt(tb)} | |")
print(f"\nk6 used {fmt(ps.get('k6_cores'), 2)} / {fmt(pb.get('k6_cores'), 2)} cores; processes outside the runs "
      f"{fmt(ps.get('outside_cores'), 2)} / {fmt(pb.get('outside_cores'), 2)} cores (single / batches).")
