//! Reading the planned ranges of the topic, without touching the writers' consumer group.
//!
//! The consumer (`consumer.rs`) is given its partitions with `assign()` and never commits. Each
//! record is decoded here, on the blocking thread that polls librdkafka, and handed to the async
//! side through a bounded channel, so a topic larger than memory is replayed a chunk at a time.

use super::range::Planned;
use crate::dlq::STALL;
use indicatif::ProgressBar;
use pipeline_common::message::Limits;
use pipeline_common::record::{self, Decoded};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message as _;
use rdkafka::{Offset, TopicPartitionList};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// One record of the topic, decoded: its messages and whatever in it is not one.
pub(crate) struct Read {
    pub partition: i32,
    pub offset: i64,
    pub decoded: Decoded,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("reading topic {topic}: {source}")]
    Kafka { topic: String, source: KafkaError },
    #[error(
        "reading topic {topic}: no progress for {} s; unfinished partitions (partition, next offset, end): {left:?}",
        STALL.as_secs()
    )]
    Stalled { topic: String, left: Vec<(i32, i64, i64)> },
}

/// Reads every planned range in offset order per partition, sending each record through `tx`;
/// stops early when the receiver is gone. Blocking.
pub(crate) fn read(
    consumer: &BaseConsumer,
    topic: &str,
    plan: &[Planned],
    limits: Limits,
    tx: &mpsc::Sender<Read>,
    bar: &ProgressBar,
) -> Result<(), ReadError> {
    let err = |source| ReadError::Kafka { topic: topic.to_string(), source };
    // partition -> (next offset to read, end)
    let mut left: HashMap<i32, (i64, i64)> = HashMap::new();
    let mut tpl = TopicPartitionList::new();
    for p in plan.iter().filter(|p| p.end > p.start) {
        left.insert(p.partition, (p.start, p.end));
        tpl.add_partition_offset(topic, p.partition, Offset::Offset(p.start)).map_err(err)?;
    }
    if left.is_empty() {
        return Ok(());
    }
    consumer.assign(&tpl).map_err(err)?;
    let mut progress = Instant::now();
    while !left.is_empty() {
        if progress.elapsed() > STALL {
            let mut l: Vec<(i32, i64, i64)> = left.iter().map(|(p, (n, e))| (*p, *n, *e)).collect();
            l.sort_unstable();
            return Err(ReadError::Stalled { topic: topic.to_string(), left: l });
        }
        match consumer.poll(Duration::from_millis(500)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(p))) => {
                // The end of what the partition holds: at or past the planned end, which is
                // never past the high watermark taken at the start.
                left.remove(&p);
                progress = Instant::now();
            }
            Some(Err(e)) => return Err(err(e)),
            Some(Ok(m)) => {
                progress = Instant::now();
                let p = m.partition();
                let Some(&(next, end)) = left.get(&p) else { continue };
                if m.offset() < next {
                    // Read already (a fetch from before the assignment): once, in order.
                    continue;
                }
                if m.offset() >= end {
                    left.remove(&p);
                    continue;
                }
                let decoded = record::decode(m.payload().unwrap_or_default(), limits);
                bar.inc(1);
                if tx.blocking_send(Read { partition: p, offset: m.offset(), decoded }).is_err() {
                    return Ok(());
                }
                if m.offset() + 1 >= end {
                    left.remove(&p);
                } else {
                    left.insert(p, (m.offset() + 1, end));
                }
            }
        }
    }
    Ok(())
}
