//! The replay's Kafka consumer, which both planning (`range.rs`: offsets for a time, the
//! timestamps at an offset) and reading (`read.rs`) use. Its own file so that neither of those
//! imports the other for it: reading takes the plan, planning takes only this.
//!
//! The consumer is given its partitions with `assign()` (it never subscribes, so it never joins
//! a group and never causes a rebalance) and never commits: its `group.id` is a throwaway name
//! librdkafka wants, not the writers' (`--kafka-group`), and `enable.auto.commit` and
//! `enable.auto.offset.store` are off.

use pipeline_common::config::KafkaArgs;
use pipeline_common::kafka::client_config;
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::KafkaError;

/// The replay's consumer: assign-only, never committing (see the module docs).
pub(crate) fn consumer(kafka: &KafkaArgs) -> Result<BaseConsumer, KafkaError> {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    client_config(kafka)
        .set("group.id", format!("reconcile-replay-{}-{nanos}", std::process::id()))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "true")
        .set("allow.auto.create.topics", "false")
        // A start that retention deleted between planning and reading is an error, never a
        // silent jump to another offset.
        .set("auto.offset.reset", "error")
        .create()
}
