//! The Kafka side of the ingest: an idempotent, acks=all, lz4 producer whose delivery reports
//! complete the HTTP requests waiting in `--ack kafka` mode.
//!
//! `ThreadedProducer` runs librdkafka's poll loop on its own thread (it blocks in poll with a
//! timeout, it does not spin) and calls [`DeliveryCtx::delivery`] for every record; the record's
//! acknowledgement channel travels with it as the delivery opaque, so no map of pending ids is
//! needed.

use crate::config::IngestConfig;
use metrics::{counter, histogram};
use pipeline_common::kafka::client_config;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::util::Timeout;
use rdkafka::ClientContext;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// A record on its way to Kafka.
pub struct Pending {
    pub key: String,
    pub payload: Vec<u8>,
    pub ack: Option<oneshot::Sender<Result<(), String>>>,
    pub since: Instant,
}

/// What travels with a record through librdkafka until its delivery report.
pub struct Opaque {
    ack: Option<oneshot::Sender<Result<(), String>>>,
    since: Instant,
}

pub struct DeliveryCtx;
impl ClientContext for DeliveryCtx {}
impl ProducerContext for DeliveryCtx {
    type DeliveryOpaque = Box<Opaque>;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: Box<Opaque>) {
        histogram!("ingest_kafka_delivery_seconds").record(opaque.since.elapsed().as_secs_f64());
        let outcome = match result {
            Ok(_) => Ok(()),
            Err((e, _)) => {
                counter!("ingest_kafka_errors_total").increment(1);
                tracing::warn!(error = %e, "kafka delivery failed");
                Err(e.to_string())
            }
        };
        if let Some(ack) = opaque.ack {
            // The request may have given up (deadline) and dropped the receiver: fine.
            let _ = ack.send(outcome);
        }
    }
}

/// Cheap to clone; all clones share one producer.
#[derive(Clone)]
pub struct Publisher {
    producer: Arc<ThreadedProducer<DeliveryCtx>>,
    topic: String,
    /// How long one record may wait for room in librdkafka's queue before it fails.
    queue_full_timeout: Duration,
    /// Set when the process is closing: records still waiting for room give up at this instant.
    closing: Arc<Mutex<Option<Instant>>>,
}

impl Publisher {
    pub fn new(cfg: &IngestConfig) -> Result<Publisher, KafkaError> {
        let producer: ThreadedProducer<DeliveryCtx> = client_config(&cfg.kafka)
            .set("acks", "all")
            .set("enable.idempotence", "true")
            .set("compression.type", "lz4")
            .set("linger.ms", cfg.linger_ms.to_string())
            .set("batch.size", cfg.batch_bytes.to_string())
            .set("queue.buffering.max.messages", cfg.producer_queue.to_string())
            // Give up on a record well after the HTTP deadline, so a delivery report always comes.
            .set("message.timeout.ms", (cfg.deadline_ms * 6).max(30_000).to_string())
            .create_with_context(DeliveryCtx)?;
        Ok(Publisher {
            producer: Arc::new(producer),
            topic: cfg.kafka.topic.clone(),
            queue_full_timeout: cfg.deadline(),
            closing: Arc::new(Mutex::new(None)),
        })
    }

    /// From now on, a record waiting for room in the producer's queue waits at most `budget`
    /// more (an earlier, shorter budget stays).
    pub fn close(&self, budget: Duration) {
        let mut c = self.closing.lock().expect("closing lock");
        let at = Instant::now() + budget;
        if c.is_none_or(|prev| at < prev) {
            *c = Some(at);
        }
    }

    /// True when a record that started waiting at `since` must give up.
    fn give_up(&self, since: Instant) -> bool {
        match *self.closing.lock().expect("closing lock") {
            Some(at) => Instant::now() >= at,
            None => since.elapsed() >= self.queue_full_timeout,
        }
    }

    /// Hands records to librdkafka. When its queue is full the ring consumer waits here, which
    /// backs up the ring, which turns into 503s at the HTTP edge: backpressure end to end. A
    /// record waits at most the request deadline (Kafka is not taking anything: its request has
    /// had its 503 by then), so the ring keeps draining and shutdown cannot hang.
    pub fn send_all(&self, records: impl Iterator<Item = Pending>) {
        for p in records {
            let mut opaque = Box::new(Opaque { ack: p.ack, since: p.since });
            let payload = p.payload;
            let waiting_since = Instant::now();
            loop {
                let rec = BaseRecord::with_opaque_to(&self.topic, opaque).key(p.key.as_bytes()).payload(&payload);
                match self.producer.send(rec) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), rec))
                        if !self.give_up(waiting_since) =>
                    {
                        opaque = rec.delivery_opaque;
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err((e, rec)) => {
                        counter!("ingest_kafka_errors_total").increment(1);
                        if let Some(ack) = rec.delivery_opaque.ack {
                            let _ = ack.send(Err(e.to_string()));
                        }
                        break;
                    }
                }
            }
        }
    }

    /// Waits until every queued record has a delivery report (shutdown).
    pub fn flush(&self, timeout: Duration) -> Result<(), KafkaError> {
        self.producer.flush(Timeout::After(timeout))
    }
}
