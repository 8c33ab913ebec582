//! The Kafka side of the ingest: an idempotent, acks=all, lz4 producer whose delivery reports
//! complete the HTTP requests waiting in `--ack kafka` mode.
//!
//! `ThreadedProducer` runs librdkafka's poll loop on its own thread (it blocks in poll with a
//! timeout) and calls [`DeliveryCtx::delivery`] for every record; the request's [`RequestAck`]
//! travels with each of its records as the delivery opaque, so no map of pending ids is needed.

use crate::config::IngestConfig;
use crate::partitions::Rotation;
use metrics::{counter, histogram};
use pipeline_common::catalog;
use pipeline_common::kafka::producer_config;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::util::Timeout;
use rdkafka::{ClientConfig, ClientContext};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// What became of one record, as far as the ingest can know. The difference between the two
/// failures is the HTTP contract: a 503 promises the message was not and will not be written; a
/// 504 says it may have been (a retry with the same id is safe: every store writes by id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Kafka acknowledged it (acks=all).
    Stored,
    /// It never reached librdkafka (its queue stayed full, or the producer refused it).
    NotSent(String),
    /// librdkafka had it and then reported a failure: it may have reached the broker.
    Uncertain(String),
}

impl Delivery {
    /// How bad an outcome is for the request: one uncertain record makes the request uncertain.
    fn severity(&self) -> u8 {
        match self {
            Delivery::Stored => 0,
            Delivery::NotSent(_) => 1,
            Delivery::Uncertain(_) => 2,
        }
    }
}

/// One request's acknowledgement, shared by all its records: the request waits on one channel
/// for the worst of their outcomes (the first error of that kind), sent when the last record
/// has its report. A batch of 100 used to wait on 100 channels, each a wake-up of its worker.
/// `NotSent` is the answer only when no record was sent: a request whose other records may be
/// stored is `Uncertain`.
///
/// If records are dropped without a report (only when the producer itself goes away), the last
/// drop drops the sender and the request reads that as "report lost", i.e. uncertain.
pub struct RequestAck {
    remaining: AtomicUsize,
    /// Some record entered librdkafka (stored, or reported failed after it may have been sent).
    sent_any: AtomicBool,
    state: Mutex<AckState>,
}

struct AckState {
    worst: Delivery,
    tx: Option<oneshot::Sender<Delivery>>,
}

/// Where a record's [`Delivery`] is reported: its request's acknowledgement.
pub type Ack = Arc<RequestAck>;

impl RequestAck {
    /// An acknowledgement for `records` records, and where the request reads its outcome.
    pub fn new(records: usize) -> (Ack, oneshot::Receiver<Delivery>) {
        let (tx, rx) = oneshot::channel();
        let state = Mutex::new(AckState { worst: Delivery::Stored, tx: Some(tx) });
        let sent_any = AtomicBool::new(false);
        (Arc::new(RequestAck { remaining: AtomicUsize::new(records), sent_any, state }), rx)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, AckState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One record's outcome. Failures are recorded before the count goes down, so the record
    /// that brings it to zero sees every earlier failure.
    pub fn report(&self, outcome: Delivery) {
        if !matches!(outcome, Delivery::NotSent(_)) {
            self.sent_any.store(true, Ordering::Release);
        }
        if outcome.severity() > 0 {
            let mut st = self.state();
            if outcome.severity() > st.worst.severity() {
                st.worst = outcome;
            }
        }
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            let mut st = self.state();
            let worst = match std::mem::replace(&mut st.worst, Delivery::Stored) {
                Delivery::NotSent(e) if self.sent_any.load(Ordering::Acquire) => {
                    Delivery::Uncertain(format!("some records were not sent ({e}), others may be stored"))
                }
                worst => worst,
            };
            if let Some(tx) = st.tx.take() {
                // The request may have given up (deadline) and dropped the receiver: fine.
                let _ = tx.send(worst);
            }
        }
    }
}

/// A record on its way to Kafka.
pub struct Pending {
    pub payload: Vec<u8>,
    /// One per request record it holds (`crate::gather`); none in `--ack ring` mode.
    pub acks: Vec<Ack>,
    /// When its first request record left the ring.
    pub since: Instant,
}

/// What travels with a record through librdkafka until its delivery report.
pub struct Opaque {
    acks: Vec<Ack>,
    since: Instant,
}

pub struct DeliveryCtx;
impl ClientContext for DeliveryCtx {}
impl ProducerContext for DeliveryCtx {
    type DeliveryOpaque = Box<Opaque>;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: Box<Opaque>) {
        histogram!(catalog::INGEST_KAFKA_DELIVERY_SECONDS).record(opaque.since.elapsed().as_secs_f64());
        let outcome = match result {
            Ok(_) => Delivery::Stored,
            Err((e, _)) => {
                counter!(catalog::INGEST_KAFKA_ERRORS_TOTAL).increment(1);
                tracing::warn!(error = %e, "kafka delivery failed");
                Delivery::Uncertain(e.to_string())
            }
        };
        for ack in opaque.acks {
            ack.report(outcome.clone());
        }
    }
}

/// The ingest's producer configuration: the pipeline's producer settings plus the ingest's
/// tuning and `--producer-options`. Public so the broker benchmark (`examples/broker_batches.rs`)
/// measures tansu with exactly what the ingest sends.
pub fn producer_client_config(cfg: &IngestConfig) -> ClientConfig {
    let mut config = producer_config(&cfg.kafka);
    config
        // While the ring gathers requests into records for `--linger-ms` (`crate::gather`), a
        // record is ready when it reaches librdkafka: lingering again would only add latency.
        .set("linger.ms", if cfg.gathers() { "0".to_string() } else { cfg.linger_ms.to_string() })
        .set("batch.size", cfg.batch_bytes.to_string())
        .set("queue.buffering.max.messages", cfg.producer_queue.to_string())
        // Bytes as well as records: a batch POST is one record of up to --record-max-bytes, so
        // 100,000 records could be gigabytes (librdkafka's default bound is 1 GiB). 64 MiB is
        // tens of seconds of this machine's traffic; past it the ring backs up into 503s.
        .set("queue.buffering.max.kbytes", "65536")
        // Give up on a record well after the HTTP deadline, so a delivery report always comes.
        .set("message.timeout.ms", (cfg.deadline_ms * 6).max(30_000).to_string())
        // Records carry no key (the message id is in the payload, and nothing downstream
        // reads a key), and each linger window's records go to one partition, then the next
        // (`crate::partitions`): one produce request per window instead of one per
        // partition. tansu answers a connection's requests one at a time; with four
        // requests per window, librdkafka's broker thread spun on `poll(0)` while its
        // in-flight window was full (docs/performance.md: ingest CPU −30 % to −50 %).
        // Until the partition count is known, the sticky partitioner does the same at
        // random.
        .set("sticky.partitioning.linger.ms", cfg.linger_ms.to_string())
        // One produce request in flight on the connection, the next one waiting behind it.
        // With idempotence librdkafka allows a partition another request only once its
        // in-flight *messages* (not requests) are below 5, yet still schedules an immediate
        // wake-up for the ready batch: its broker thread spun on `poll(0)` until the broker
        // answered (77,000 polls in 4 s under load; ingest CPU 145 µs per message in
        // batches of 100). With one request in flight the waiting request sits in the
        // output queue, which stops the wake-ups (20 µs per message, +48 % messages/s).
        // tansu answers a connection's requests one at a time anyway.
        .set("max.in.flight.requests.per.connection", "1");
    cfg.producer_options.apply(&mut config);
    config
}

/// Room left in `message.max.bytes` for a record's headers and batch framing.
const RECORD_FRAMING: usize = 4096;

/// Cheap to clone; all clones share one producer.
#[derive(Clone)]
pub struct Publisher {
    producer: Arc<ThreadedProducer<DeliveryCtx>>,
    topic: String,
    /// How long one record may wait for room in librdkafka's queue before it fails.
    queue_full_timeout: Duration,
    /// Set when the process is closing: records still waiting for room give up at this instant.
    closing: Arc<Mutex<Option<Instant>>>,
    /// The partition for each linger window.
    rotation: Rotation,
}

impl Publisher {
    pub fn new(cfg: &IngestConfig) -> Result<Publisher, KafkaError> {
        let config = producer_client_config(cfg);
        // The partition turns with each window of records: the ring's gathering window, or (when
        // it does not gather) the linger librdkafka really uses (`--producer-options` may set
        // `linger.ms`); turning faster would split a linger window over several partitions.
        let linger = match cfg.gathers() {
            true => cfg.linger_ms as f64,
            false => config.get("linger.ms").and_then(|v| v.parse::<f64>().ok()).unwrap_or(cfg.linger_ms as f64),
        };
        // Every record must fit the producer's limit with room for its framing, or a valid
        // request would fail at librdkafka after validation said 202-worthy, again on every
        // retry. The largest record is a batch's (`--record-max-bytes`) or one message on its
        // own: at most what the single-message route reads (`max_message_request_bytes`, which
        // bounds the JSON the ingest writes for it). The broker's own limit (tansu's, a topic's
        // `max.message.bytes`) is not visible from here: docs/architecture.md says to keep it at
        // least this large.
        let max = config.get("message.max.bytes").and_then(|v| v.parse::<usize>().ok()).unwrap_or(1_000_000);
        let largest = cfg.record_max_bytes.max(cfg.max_message_request_bytes());
        if largest.saturating_add(RECORD_FRAMING) > max {
            return Err(KafkaError::ClientCreation(format!(
                "the largest record ({largest} bytes: --record-max-bytes {}, or one message of MAX_BODY_BYTES {}) does not fit the producer's message.max.bytes {max} (minus {RECORD_FRAMING} bytes of framing); raise message.max.bytes with --producer-options (and the broker's limit), or lower them",
                cfg.record_max_bytes, cfg.max_body_bytes
            )));
        }
        let producer: ThreadedProducer<DeliveryCtx> = config.create_with_context(DeliveryCtx)?;
        Ok(Publisher {
            producer: Arc::new(producer),
            topic: cfg.kafka.topic.clone(),
            // Half the request deadline: a record that cannot enter librdkafka gives up while its
            // request still waits, so the request can truthfully answer 503 (never written)
            // instead of 504 (uncertain).
            queue_full_timeout: cfg.deadline() / 2,
            closing: Arc::new(Mutex::new(None)),
            rotation: Rotation::new(Duration::from_secs_f64(linger.max(0.0) / 1000.0)),
        })
    }

    /// Where the partition count is kept (see `crate::partitions::keep_count`).
    pub fn rotation(&self) -> &Rotation {
        &self.rotation
    }

    /// From now on, a record waiting for room in the producer's queue waits at most `budget`
    /// more (an earlier, shorter budget stays).
    pub fn close(&self, budget: Duration) {
        let mut c = self.closing.lock().unwrap_or_else(|p| p.into_inner());
        let at = Instant::now() + budget;
        if c.is_none_or(|prev| at < prev) {
            *c = Some(at);
        }
    }

    /// True when a record that started waiting at `since` must give up.
    fn give_up(&self, since: Instant) -> bool {
        match *self.closing.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(at) => Instant::now() >= at,
            None => since.elapsed() >= self.queue_full_timeout,
        }
    }

    /// Hands records to librdkafka. When its queue is full the ring consumer waits here, which
    /// backs up the ring, which turns into 503s at the HTTP edge: backpressure end to end. A
    /// record waits at most the request deadline (Kafka is not taking anything: its request has
    /// had its 503 by then), so the ring keeps draining and shutdown cannot hang.
    pub fn send_all(&self, records: impl Iterator<Item = Pending>) {
        let partition = self.rotation.now();
        for p in records {
            // The wait for room counts from when the record left the ring, gathering included,
            // so a record that cannot enter librdkafka still gives up while its requests wait.
            let waiting_since = p.since;
            let mut opaque = Box::new(Opaque { acks: p.acks, since: p.since });
            let payload = p.payload;
            loop {
                // No key: see `producer_client_config`.
                let mut rec = BaseRecord::<(), _, _>::with_opaque_to(&self.topic, opaque).payload(&payload);
                if let Some(p) = partition {
                    rec = rec.partition(p);
                }
                match self.producer.send(rec) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), rec))
                        if !self.give_up(waiting_since) =>
                    {
                        opaque = rec.delivery_opaque;
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err((e, rec)) => {
                        counter!(catalog::INGEST_KAFKA_ERRORS_TOTAL).increment(1);
                        for ack in rec.delivery_opaque.acks {
                            ack.report(Delivery::NotSent(e.to_string()));
                        }
                        break;
                    }
                }
            }
        }
    }

    /// Topic metadata through the producer's own connection (for `/readyz`: no new client, no
    /// new connection per probe). Blocking.
    pub fn partition_count(&self) -> Result<Option<usize>, KafkaError> {
        let md = self.producer.client().fetch_metadata(Some(&self.topic), Duration::from_secs(5))?;
        Ok(md.topics().iter().find(|t| t.name() == self.topic && t.error().is_none()).map(|t| t.partitions().len()))
    }

    /// Waits until every queued record has a delivery report (shutdown).
    pub fn flush(&self, timeout: Duration) -> Result<(), KafkaError> {
        self.producer.flush(Timeout::After(timeout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome_of(reports: Vec<Delivery>) -> Result<Delivery, oneshot::error::TryRecvError> {
        let (ack, mut rx) = RequestAck::new(reports.len());
        let n = reports.len();
        for (i, d) in reports.into_iter().enumerate() {
            assert!(rx.try_recv().is_err(), "no answer before report {} of {n}", i + 1);
            ack.report(d);
        }
        rx.try_recv()
    }

    #[test]
    fn the_partition_turns_with_each_window_of_records() {
        use clap::Parser;
        let window = |args: &[&str]| {
            let cfg = IngestConfig::try_parse_from([&["ingest"], args].concat()).expect("flags parse");
            Publisher::new(&cfg).expect("a producer").rotation().window()
        };
        assert_eq!(window(&["--linger-ms", "7"]), Duration::from_millis(7));
        // The ring gathers for --linger-ms: records come once per window, whatever librdkafka's.
        assert_eq!(window(&["--linger-ms", "7", "--producer-options", "linger.ms=20"]), Duration::from_millis(7));
        let old = ["--record-max-bytes", "0", "--linger-ms", "7"];
        assert_eq!(window(&old), Duration::from_millis(7));
        assert_eq!(window(&[&old[..], &["--producer-options", "linger.ms=20"]].concat()), Duration::from_millis(20));
    }

    #[test]
    fn a_batch_record_must_fit_the_producer() {
        use clap::Parser;
        let publisher = |args: &[&str]| {
            let cfg = IngestConfig::try_parse_from([&["ingest"], args].concat()).expect("flags parse");
            Publisher::new(&cfg).map(|_| ())
        };
        assert!(publisher(&[]).is_ok(), "the defaults fit");
        let e = publisher(&["--record-max-bytes", "999000"]).expect_err("over message.max.bytes");
        assert!(e.to_string().contains("message.max.bytes 1000000"), "{e}");
        assert!(publisher(&["--record-max-bytes", "999000", "--producer-options", "message.max.bytes=2000000"]).is_ok());
        // One message alone can be the largest record: a body limit of 200,000 bytes allows a
        // message of ~1.2 MB of JSON (every byte escaped six-fold), whatever the batch budget.
        let e =
            publisher(&["--record-max-bytes", "0", "--max-body-bytes", "200000"]).expect_err("one message too large");
        assert!(e.to_string().contains("MAX_BODY_BYTES 200000"), "{e}");
    }

    #[test]
    fn the_request_hears_once_every_record_is_reported() {
        let (ack, mut rx) = RequestAck::new(3);
        ack.report(Delivery::Stored);
        ack.report(Delivery::Stored);
        assert!(rx.try_recv().is_err(), "one record still unreported");
        ack.report(Delivery::Stored);
        assert_eq!(rx.try_recv(), Ok(Delivery::Stored));
    }

    #[test]
    fn the_worst_outcome_wins_and_keeps_its_first_error() {
        let got = outcome_of(vec![
            Delivery::NotSent("full".into()),
            Delivery::Uncertain("timed out".into()),
            Delivery::Uncertain("later".into()),
            Delivery::Stored,
        ]);
        assert_eq!(got, Ok(Delivery::Uncertain("timed out".into())));
        // Not sent, but another record may be stored: uncertain. None sent: nothing written.
        assert!(matches!(
            outcome_of(vec![Delivery::Stored, Delivery::NotSent("full".into())]),
            Ok(Delivery::Uncertain(e)) if e.contains("full")
        ));
        assert_eq!(
            outcome_of(vec![Delivery::NotSent("full".into()), Delivery::NotSent("later".into())]),
            Ok(Delivery::NotSent("full".into()))
        );
    }

    #[test]
    fn records_dropped_without_a_report_close_the_channel() {
        let (ack, mut rx) = RequestAck::new(2);
        let other = ack.clone();
        ack.report(Delivery::Stored);
        drop(ack);
        drop(other);
        assert_eq!(rx.try_recv(), Err(oneshot::error::TryRecvError::Closed));
    }
}
