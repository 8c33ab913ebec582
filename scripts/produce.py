"""Produce N valid messages straight to a topic (for writer benchmarks), with lz4 and acks=all.

    produce.py BROKERS TOPIC N [BODY_BYTES] [PER_RECORD]

PER_RECORD messages go to one record as a JSON array, as the ingest sends a batch POST or a
window of requests (docs/architecture.md, "The topic's records"); 1 writes one JSON object per
record, the format before batch records. Default 100.
"""
import datetime
import json
import sys
import uuid

from confluent_kafka import Producer

brokers, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
body = "x" * int(sys.argv[4] if len(sys.argv) > 4 else 256)
per_record = max(1, int(sys.argv[5] if len(sys.argv) > 5 else 100))
# The same producer settings as pipeline_common::kafka::producer_config (acks=all, idempotent, lz4).
p = Producer({"bootstrap.servers": brokers, "acks": "all", "enable.idempotence": True,
              "compression.type": "lz4", "linger.ms": 20, "batch.size": 1 << 20})
now = datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")
failed = []


def send(value):
    while True:
        try:
            p.produce(topic, value=value, on_delivery=lambda e, m: e and failed.append(e))
            break
        except BufferError:
            p.poll(0.05)
    p.poll(0)


record = []
for i in range(n):
    record.append({"id": str(uuid.uuid4()), "sender": f"user-{i % 97}", "recipient": f"user-{i % 89}",
                   "body": body, "sent_at": now})
    if len(record) == per_record or i == n - 1:
        send(json.dumps(record[0] if per_record == 1 else record, separators=(",", ":")))
        record = []
p.flush(120)
if failed:
    sys.exit(f"{len(failed)} deliveries failed: {failed[0]}")
print(f"produced {n} to {topic}")
