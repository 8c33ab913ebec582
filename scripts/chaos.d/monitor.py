"""Samples the pipeline's progress for scripts/chaos, every INTERVAL seconds, until killed.

    monitor.py BROKERS TOPIC GROUP PARTITIONS OUT.jsonl [--writers PORT,PORT,...] [--interval 0.5]

One JSON line per sample: {"t": epoch, "committed": [per partition], "high": [per partition],
"w": {port: {metric{labels}: value}}}. `committed` is the writers' group offset as the broker holds
it (what the writers committed, i.e. what is in all four stores), `high` the high watermark (what
the ingest produced); the writer metrics are the few families chaos reports on (and two buckets
of writer_store_write_seconds, to count writes slower than 1 s), scraped from each
writer's /metrics (a writer that is down is simply absent from `w`).
"""
import argparse
import json
import signal
import sys
import time
import urllib.request

from confluent_kafka import Consumer, TopicPartition

FAMILIES = (
    "writer_store_retries_total", "writer_store_errors_total", "writer_pool_rejected_total",
    "writer_pool_queue_depth", "writer_pool_queue_depth_peak", "writer_pool_active_workers",
    "writer_pool_caller_runs_total", "writer_records_total", "writer_dlq_records_total",
    "writer_consumer_failures_total", "pipeline_process_info",
)


def scrape(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1.0) as r:
            text = r.read().decode("utf-8", "replace")
    except Exception:
        return None
    out = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name == "writer_store_write_seconds_bucket":
            if 'le="1"' not in line and 'le="+Inf"' not in line:
                continue  # writes over 1 s = +Inf minus le=1: a stalled store shows there
        elif name not in FAMILIES:
            continue
        key, _, val = line.rpartition(" ")
        try:
            out[key] = float(val)
        except ValueError:
            pass
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("brokers")
    ap.add_argument("topic")
    ap.add_argument("group")
    ap.add_argument("partitions", type=int)
    ap.add_argument("out")
    ap.add_argument("--writers", default="")
    ap.add_argument("--interval", type=float, default=0.5)
    a = ap.parse_args()
    ports = [p for p in a.writers.split(",") if p]
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    c = Consumer({"bootstrap.servers": a.brokers, "group.id": a.group, "enable.auto.commit": False,
                  "log_level": 3})
    tps = [TopicPartition(a.topic, p) for p in range(a.partitions)]
    with open(a.out, "a", buffering=1) as f:
        while not stop:
            t0 = time.time()
            rec = {"t": round(t0, 3)}
            try:
                committed = [max(tp.offset, 0) for tp in c.committed(tps, timeout=5)]
                high = [c.get_watermark_offsets(tp, timeout=5, cached=False)[1] for tp in tps]
                rec["committed"], rec["high"] = committed, high
            except Exception as e:  # the broker is never frozen, but say so if it does not answer
                rec["error"] = str(e)
            rec["w"] = {p: m for p in ports if (m := scrape(p)) is not None}
            f.write(json.dumps(rec) + "\n")
            time.sleep(max(0.0, a.interval - (time.time() - t0)))
    c.close()


if __name__ == "__main__":
    sys.exit(main())
