//! The dead-letter topic: records that cannot be decoded, or that a store refuses for good, go
//! there with the reason in an `error` header, so one poison record never blocks a partition.
//!
//! Delivery to it is at least once: a record dead-lettered in a batch whose offset was not yet
//! committed when its partition moved is dead-lettered again by the next owner. Undecodable
//! records are keyed `partition:offset` of the original, so duplicates are recognisable.

use metrics::counter;
use pipeline_common::config::KafkaArgs;
use pipeline_common::kafka::client_config;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use std::time::Duration;

#[derive(Clone)]
pub struct Dlq {
    producer: FutureProducer,
    topic: String,
}

impl Dlq {
    pub fn new(kafka: &KafkaArgs, topic: &str) -> anyhow::Result<Dlq> {
        let producer = client_config(kafka)
            .set("acks", "all")
            .set("enable.idempotence", "true")
            .set("compression.type", "lz4")
            .create()?;
        Ok(Dlq { producer, topic: topic.to_string() })
    }

    /// Sends one record and waits until the broker has it (retrying while it does not), because
    /// the original's offset is committed right after.
    pub async fn send(&self, key: &[u8], payload: &[u8], error: &str) {
        counter!("writer_dlq_total").increment(1);
        tracing::warn!(error, "dead-lettering a record");
        loop {
            let headers = OwnedHeaders::new().insert(Header { key: "error", value: Some(error) });
            let rec = FutureRecord::to(&self.topic).key(key).payload(payload).headers(headers);
            match self.producer.send(rec, Timeout::After(Duration::from_secs(10))).await {
                Ok(_) => return,
                Err((e, _)) => {
                    counter!("writer_dlq_errors_total").increment(1);
                    tracing::error!(error = %e, "dead-letter produce failed; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }
}
