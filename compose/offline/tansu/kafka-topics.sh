#!/bin/sh
# Stands in for Apache Kafka's kafka-topics.sh, for the compose file's healthcheck only:
#   kafka-topics.sh --bootstrap-server HOST:PORT --list
# lists the broker's topics with a metadata request (confluent-kafka); exits non-zero when the
# broker does not answer in 5 s.
set -eu
[ "${1:-}" = --bootstrap-server ] && [ "${3:-}" = --list ] || { echo "usage: $0 --bootstrap-server HOST:PORT --list" >&2; exit 2; }
exec python3 -c '
import sys
from confluent_kafka.admin import AdminClient
for t in sorted(AdminClient({"bootstrap.servers": sys.argv[1]}).list_topics(timeout=5).topics):
    print(t)
' "$2"
