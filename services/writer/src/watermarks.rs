//! The lag graphs' data: the topic's high watermarks and the group's committed offsets, sampled
//! from the broker by one task per process, which startup owns (not a consumer: a consumer's
//! task must only consume).

use metrics::gauge;
use pipeline_common::catalog;
use pipeline_common::config::KafkaArgs;
use pipeline_common::kafka::client_config;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaResult;
use rdkafka::{Offset, TopicPartitionList};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often the partitions' offsets are sampled (for the lag graphs; reconcile asks the broker itself).
const WATERMARK_EVERY: Duration = Duration::from_secs(5);

/// Every [`WATERMARK_EVERY`], samples from the broker the high watermark
/// (`writer_partition_high_watermark`) and the group's committed offset
/// (`writer_partition_committed_offset`) of every partition of the topic, on a blocking thread
/// with its own Kafka client (never on a consumer's task), until `stop` is cancelled. One per
/// process. The committed offset is also set when a commit of this process is acknowledged; the
/// sample keeps it current for partitions other members own, and when acknowledgements of
/// asynchronous commits do not reach the callback (they can be missing while the group commits
/// every offset).
pub(crate) fn spawn(kafka: &KafkaArgs, stop: CancellationToken) {
    // group.id only names whose committed offsets to read: this client never subscribes, so it
    // never joins the group.
    let probe: BaseConsumer = match client_config(kafka)
        .set("client.id", "writer-watermarks")
        .set("group.id", &kafka.group)
        .set("enable.auto.commit", "false")
        .create()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "no offset sampler (the lag graphs will be empty)");
            return;
        }
    };
    let probe = Arc::new(probe);
    let topic = kafka.topic.clone();
    tokio::spawn(async move {
        loop {
            let (probe, topic) = (probe.clone(), topic.clone());
            let sampled = tokio::task::spawn_blocking(move || -> KafkaResult<()> {
                let timeout = pipeline_common::kafka::ADMIN_TIMEOUT;
                let md = probe.fetch_metadata(Some(&topic), timeout)?;
                let mut tpl = TopicPartitionList::new();
                for t in md.topics().iter().filter(|t| t.name() == topic) {
                    for p in t.partitions() {
                        let (_low, high) = probe.fetch_watermarks(&topic, p.id(), timeout)?;
                        gauge!(catalog::WRITER_PARTITION_HIGH_WATERMARK, "partition" => p.id().to_string())
                            .set(high as f64);
                        tpl.add_partition(&topic, p.id());
                    }
                }
                for e in probe.committed_offsets(tpl, timeout)?.elements() {
                    if let Offset::Offset(o) = e.offset() {
                        gauge!(catalog::WRITER_PARTITION_COMMITTED_OFFSET, "partition" => e.partition().to_string())
                            .set(o as f64);
                    }
                }
                Ok(())
            })
            .await;
            if let Ok(Err(e)) = sampled {
                tracing::debug!(error = %e, "partition offsets not sampled this time");
            }
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(WATERMARK_EVERY) => {}
            }
        }
    });
}
