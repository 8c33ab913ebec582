"""Readiness probes and topic setup for scripts/stack: each makes a real protocol round trip.

    stack_probe.py kafka BROKERS                      metadata request; exit 0 if the broker answers
    stack_probe.py topic BROKERS TOPIC PARTITIONS     create the topic if missing, check its partitions
    stack_probe.py mongo URL                          ping command
"""
import sys


def kafka(brokers):
    from confluent_kafka.admin import AdminClient

    AdminClient({"bootstrap.servers": brokers}).list_topics(timeout=3)


def topic(brokers, name, partitions):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": brokers})
    md = admin.list_topics(timeout=10)
    if name not in md.topics or md.topics[name].error is not None:
        fut = admin.create_topics([NewTopic(name, num_partitions=int(partitions), replication_factor=1)])[name]
        fut.result(timeout=30)
        md = admin.list_topics(topic=name, timeout=10)
    have = len(md.topics[name].partitions)
    if have != int(partitions):
        sys.exit(f"topic {name} has {have} partitions, {partitions} configured (topics are never deleted on tansu; "
                 "use another KAFKA_TOPIC or `scripts/stack reset-data`)")
    print(f"topic {name}: {have} partitions")


def mongo(url):
    from pymongo import MongoClient

    MongoClient(url, serverSelectionTimeoutMS=3000).admin.command("ping")


if __name__ == "__main__":
    {"kafka": kafka, "topic": topic, "mongo": mongo}[sys.argv[1]](*sys.argv[2:])
