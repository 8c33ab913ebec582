//! The dead-letter topic: records that cannot be decoded, or that a store refuses for good, go
//! there with the reason in an `error` header, so one poison record never blocks a partition.
//!
//! Delivery to it is at least once: a record dead-lettered in a batch whose offset was not yet
//! committed when its partition moved is dead-lettered again by the next owner. Undecodable
//! records are keyed `partition:offset` of the original (`partition:offset:index` for one item of
//! a batch record, `pipeline_common::record`), so duplicates are recognisable.
//!
//! Headers: `error` (why), `store` (the store that refused it, or `decode`), and `id` (the
//! message id, when the record was decodable): reconcile reads them to report dead-lettered ids
//! as their own class instead of "missing".
//!
//! A dead letter means a 202 was not kept: the ingest refuses with a 4xx everything a store is
//! known to refuse, so this topic should stay empty; `writer_dlq_records_total` says if it does not.
//!
//! Because it should stay empty, the producer is created at the first dead letter, not at
//! startup. An idle `FutureProducer` is not free: its polling thread wakes every 100 ms and
//! busy-waits through the sub-millisecond rest of each wait (rust-rdkafka hands librdkafka a
//! 0 ms timeout for it), which was 11 % of the writer's CPU samples under batch load
//! (docs/results/performance-log.md). Its settings are checked at startup all the same.

use crate::driver::DeadLetters;
use metrics::counter;
use pipeline_common::catalog;
use pipeline_common::config::KafkaArgs;
use pipeline_common::kafka::producer_config;
use pipeline_common::record::BadItem;
use pipeline_common::Message;
use rdkafka::config::{ClientConfig, NativeClientConfig};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OnceCell;

#[derive(Clone)]
pub(crate) struct Dlq {
    config: ClientConfig,
    /// Created by the first dead letter (see the module docs).
    producer: Arc<OnceCell<FutureProducer>>,
    topic: String,
}

impl Dlq {
    /// Checks the producer settings with librdkafka (a typo fails the start, not the first dead
    /// letter) without starting a producer.
    pub(crate) fn new(kafka: &KafkaArgs, topic: &str) -> anyhow::Result<Dlq> {
        let config = producer_config(kafka);
        let _checked: NativeClientConfig = config.create_native_config()?;
        Ok(Dlq { config, producer: Arc::new(OnceCell::new()), topic: topic.to_string() })
    }

    /// The producer, started on first use; a failure to start is retried by the caller's loop.
    async fn producer(&self) -> rdkafka::error::KafkaResult<&FutureProducer> {
        self.producer.get_or_try_init(|| async { self.config.create() }).await
    }

    /// A record, or one item of a batch record, that is not a valid message (keyed by where it
    /// was; with its id header when it parsed as a message but failed validation).
    pub(crate) async fn send_undecodable(&self, partition: i32, offset: i64, item: &BadItem) {
        let key = match item.index {
            None => format!("{partition}:{offset}"),
            Some(i) => format!("{partition}:{offset}:{i}"),
        };
        let error = format!("decode: {}", item.error);
        self.send(key.as_bytes(), &item.payload, "decode", item.id.as_deref(), &error).await
    }

    /// Sends one record and waits until the broker has it (retrying while it does not), because
    /// the original's offset is committed right after.
    async fn send(&self, key: &[u8], payload: &[u8], store: &str, id: Option<&str>, error: &str) {
        counter!(catalog::WRITER_DLQ_RECORDS_TOTAL, "store" => store.to_string()).increment(1);
        tracing::warn!(store, id, error, "dead-lettering a record");
        loop {
            let mut headers = OwnedHeaders::new()
                .insert(Header { key: "error", value: Some(error) })
                .insert(Header { key: "store", value: Some(store) });
            if let Some(id) = id {
                headers = headers.insert(Header { key: "id", value: Some(id) });
            }
            let rec = FutureRecord::to(&self.topic).key(key).payload(payload).headers(headers);
            let sent = match self.producer().await {
                Ok(p) => p.send(rec, Timeout::After(Duration::from_secs(10))).await.map_err(|(e, _)| e),
                Err(e) => Err(e),
            };
            match sent {
                Ok(_) => return,
                Err(e) => {
                    counter!(catalog::WRITER_DLQ_ERRORS_TOTAL).increment(1);
                    tracing::error!(error = %e, "dead-letter produce failed; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }
}

/// A message a store refuses for good, keyed by its id.
#[async_trait::async_trait]
impl DeadLetters for Dlq {
    async fn refused(&self, store: &'static str, msg: &Message, reason: &str) {
        self.send(msg.id.as_bytes(), msg.to_json().as_bytes(), store, Some(&msg.id), reason).await
    }
}
