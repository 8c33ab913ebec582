//! The topic's high watermarks and the group's committed offsets, sampled from the broker by one
//! task per process, which startup owns (not a consumer: a consumer's task must only consume):
//! the lag graphs' data, and what the stall watch ([`crate::stall`]) judges the group by.

use crate::stall::Rejoiner;
use metrics::gauge;
use pipeline_common::catalog;
use pipeline_common::config::KafkaArgs;
use pipeline_common::kafka::GroupProbe;
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
/// every offset). Each sample also goes to `rejoiner`, when the stall watch is on.
pub(crate) fn spawn(kafka: &KafkaArgs, stop: CancellationToken, mut rejoiner: Option<Rejoiner>) {
    let probe = match GroupProbe::new(kafka, &kafka.group, &kafka.topic) {
        Ok(p) => Arc::new(p),
        Err(e) => {
            tracing::warn!(error = %e, "no offset sampler (the lag graphs will be empty)");
            return;
        }
    };
    tokio::spawn(async move {
        loop {
            let p = probe.clone();
            match tokio::task::spawn_blocking(move || p.sample()).await {
                Ok(Ok(partitions)) => {
                    if let Some(r) = rejoiner.as_mut() {
                        r.check(&partitions).await;
                    }
                    for p in partitions {
                        let partition = p.partition.to_string();
                        gauge!(catalog::WRITER_PARTITION_HIGH_WATERMARK, "partition" => partition.clone())
                            .set(p.high as f64);
                        // 0: the group never committed on it; the gauge stays absent until it does.
                        if p.committed > 0 {
                            gauge!(catalog::WRITER_PARTITION_COMMITTED_OFFSET, "partition" => partition)
                                .set(p.committed as f64);
                        }
                    }
                }
                Ok(Err(e)) => tracing::debug!(error = %e, "partition offsets not sampled this time"),
                Err(_) => {}
            }
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(WATERMARK_EVERY) => {}
            }
        }
    });
}
