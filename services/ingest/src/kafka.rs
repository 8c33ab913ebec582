//! The Kafka side of the ingest: an idempotent, acks=all, lz4 producer whose delivery reports
//! complete the HTTP requests waiting in `--ack kafka` mode.
//!
//! A thread of ours (`kafka-reports`) waits on librdkafka's queue and calls
//! [`DeliveryCtx::delivery`] for every record; the request's [`RequestAck`] travels with each of
//! its records as the delivery opaque, so no map of pending ids is needed. Not rdkafka's
//! `ThreadedProducer`: see [`REPORTS_POLL`].

use crate::ack::{Ack, Delivery};
use crate::gather::{Pending, Publish};
use crate::partitions::Rotation;
use metrics::{counter, histogram};
use pipeline_common::catalog;
use pipeline_common::config::{KafkaArgs, KafkaOptions};
use pipeline_common::kafka::producer_config;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::util::Timeout;
use rdkafka::{ClientConfig, ClientContext};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long one `poll` of librdkafka's queue lasts on the report thread. rust-rdkafka's `poll`
/// hands librdkafka whole milliseconds, rounded down, and loops until its deadline: through the
/// last fraction of a millisecond it polls with a 0 ms timeout, a busy loop of up to 1 ms per
/// call. `ThreadedProducer` calls it for 100 ms at a time, so its thread spun up to 1 % of a
/// core, idle or not (the writer's dead-letter producer met the same, `writer::dlq`); a second
/// per call makes that at most 0.1 %. A report does not wait for the call to end: the wait
/// inside it ends when a report comes. Shutdown does not wait for it either (the thread is
/// told to stop and ends on its own within the call).
const REPORTS_POLL: Duration = Duration::from_secs(1);

/// Tells the report thread to stop when the last [`Publisher`] clone goes. Not joined: the
/// thread holds the producer until its current poll ends, then drops it.
struct ReportThread {
    stop: Arc<AtomicBool>,
}

impl ReportThread {
    fn start(producer: Arc<BaseProducer<DeliveryCtx>>) -> std::io::Result<ReportThread> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::Builder::new().name("kafka-reports".into()).spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                producer.poll(REPORTS_POLL);
            }
        })?;
        Ok(ReportThread { stop })
    }
}

impl Drop for ReportThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// What travels with a record through librdkafka until its delivery report.
pub struct Opaque {
    acks: Vec<Ack>,
    since: Instant,
}

/// Reports deliveries to the requests, and counts the records still in flight (the adaptive
/// gathering window sends when none is, `crate::gather`).
pub struct DeliveryCtx {
    in_flight: Arc<AtomicUsize>,
    /// The ring consumer's wake-up (`crate::wake`), once the ring has started.
    wake: Arc<std::sync::OnceLock<Arc<crate::wake::Wake>>>,
    /// `ingest_kafka_delivery_seconds`, looked up once (a report comes per record).
    delivered: metrics::Histogram,
}
impl ClientContext for DeliveryCtx {}
impl ProducerContext for DeliveryCtx {
    type DeliveryOpaque = Box<Opaque>;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: Box<Opaque>) {
        if self.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            if let Some(w) = self.wake.get() {
                w.link_idle();
            }
        }
        self.delivered.record(opaque.since.elapsed().as_secs_f64());
        let outcome = match result {
            Ok(_) => Delivery::Acknowledged,
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

/// What the producer needs of the ingest's flags, and nothing else: the ring, the routes and
/// the HTTP edge have their own parts of `IngestConfig` (`IngestConfig::producer` builds it).
#[derive(Debug, Clone)]
pub struct ProducerSettings {
    pub kafka: KafkaArgs,
    /// The gathering window (`--linger-ms`): the ring's when it gathers, else librdkafka's linger.
    pub linger_ms: u64,
    /// Whether the ring gathers requests into records (then librdkafka must not linger again).
    pub gathers: bool,
    /// librdkafka's `batch.size`.
    pub batch_bytes: usize,
    /// librdkafka's `queue.buffering.max.messages`.
    pub queue_records: usize,
    /// The request deadline: a record waits at most half of it for room in librdkafka's queue.
    pub deadline: Duration,
    /// The largest record the ingest may hand over, and which flags make it so (for the error).
    pub largest_record: (usize, String),
    /// `--producer-options`.
    pub options: KafkaOptions,
}

/// The ingest's producer configuration: the pipeline's producer settings plus the ingest's
/// tuning and `--producer-options`. Public so the broker benchmark (`examples/broker_batches.rs`)
/// measures tansu with exactly what the ingest sends.
pub fn producer_client_config(cfg: &ProducerSettings) -> ClientConfig {
    let mut config = producer_config(&cfg.kafka);
    config
        // While the ring gathers requests into records for `--linger-ms` (`crate::gather`), a
        // record is ready when it reaches librdkafka: lingering again would only add latency.
        .set("linger.ms", if cfg.gathers { "0".to_string() } else { cfg.linger_ms.to_string() })
        .set("batch.size", cfg.batch_bytes.to_string())
        .set("queue.buffering.max.messages", cfg.queue_records.to_string())
        // Bytes as well as records: a batch POST is one record of up to --record-max-bytes, so
        // 100,000 records could be gigabytes (librdkafka's default bound is 1 GiB). 64 MiB is
        // tens of seconds of this machine's traffic; past it the ring backs up into 503s.
        .set("queue.buffering.max.kbytes", "65536")
        // Give up on a record well after the HTTP deadline, so a delivery report always comes.
        .set("message.timeout.ms", (cfg.deadline.as_millis() * 6).max(30_000).to_string())
        // Records carry no key (the message id is in the payload, and nothing downstream
        // reads a key), and each linger window's records go to one partition, then the next
        // (`crate::partitions`): produce requests to one partition at a time instead of one per
        // partition (an adaptive window may send a few records within one window). tansu answers a connection's requests one at a time; with four
        // requests per window, librdkafka's broker thread spun on `poll(0)` while its
        // in-flight window was full (the figures are in docs/results/performance-log.md).
        // Until the partition count is known, the sticky partitioner does the same at
        // random.
        .set("sticky.partitioning.linger.ms", cfg.linger_ms.to_string())
        // One produce request in flight on the connection, the next one waiting behind it.
        // With idempotence librdkafka allows a partition another request only once its
        // in-flight *messages* (not requests) are below 5, yet still schedules an immediate
        // wake-up for the ready batch: its broker thread spun on `poll(0)` until the broker
        // answered. With one request in flight the waiting request sits in the output queue,
        // which stops the wake-ups (docs/results/performance-log.md, "Ingest: the broker
        // thread"). tansu answers a connection's requests one at a time anyway.
        .set("max.in.flight.requests.per.connection", "1");
    cfg.options.apply(&mut config);
    config
}

/// Room left in `message.max.bytes` for a record's headers and batch framing.
const RECORD_FRAMING: usize = 4096;

/// Cheap to clone; all clones share one producer.
#[derive(Clone)]
pub struct Publisher {
    producer: Arc<BaseProducer<DeliveryCtx>>,
    _reports: Arc<ReportThread>,
    topic: String,
    /// How long one record may wait for room in librdkafka's queue before it fails.
    queue_full_timeout: Duration,
    /// Set when the process is closing: records still waiting for room give up at this instant.
    closing: Arc<Mutex<Option<Instant>>>,
    /// The partition for each linger window.
    rotation: Rotation,
    /// Records in librdkafka without a delivery report yet (shared with `DeliveryCtx`).
    in_flight: Arc<AtomicUsize>,
    /// `ingest_gather_seconds`, looked up once.
    gathered: metrics::Histogram,
    /// Shared with `DeliveryCtx`: who to wake when nothing is in flight.
    wake: Arc<std::sync::OnceLock<Arc<crate::wake::Wake>>>,
}

impl Publisher {
    pub fn new(cfg: &ProducerSettings) -> Result<Publisher, KafkaError> {
        let config = producer_client_config(cfg);
        // The partition turns with each window of records: the ring's gathering window, or (when
        // it does not gather) the linger librdkafka really uses (`--producer-options` may set
        // `linger.ms`); turning faster would split a linger window over several partitions.
        let linger = match cfg.gathers {
            true => cfg.linger_ms as f64,
            false => config.get("linger.ms").and_then(|v| v.parse::<f64>().ok()).unwrap_or(cfg.linger_ms as f64),
        };
        // Every record must fit the producer's limit with room for its framing, or a valid
        // request would fail at librdkafka after validation said 202-worthy, again on every
        // retry (`ProducerSettings::largest_record`). The broker's own limit (tansu's, a topic's
        // `max.message.bytes`) is not visible from here: docs/explanation/architecture.md says to keep it at
        // least this large.
        let max = config.get("message.max.bytes").and_then(|v| v.parse::<usize>().ok()).unwrap_or(1_000_000);
        let (largest, why) = &cfg.largest_record;
        if largest.saturating_add(RECORD_FRAMING) > max {
            return Err(KafkaError::ClientCreation(format!(
                "the largest record ({largest} bytes: {why}) does not fit the producer's message.max.bytes {max} (minus {RECORD_FRAMING} bytes of framing); raise message.max.bytes with --producer-options (and the broker's limit), or lower them"
            )));
        }
        let in_flight = Arc::new(AtomicUsize::new(0));
        let wake = Arc::new(std::sync::OnceLock::new());
        let producer: Arc<BaseProducer<DeliveryCtx>> = Arc::new(config.create_with_context(DeliveryCtx {
            in_flight: in_flight.clone(),
            wake: wake.clone(),
            delivered: histogram!(catalog::INGEST_KAFKA_DELIVERY_SECONDS),
        })?);
        let reports = ReportThread::start(producer.clone())
            .map_err(|e| KafkaError::ClientCreation(format!("starting the delivery-report thread: {e}")))?;
        Ok(Publisher {
            producer,
            _reports: Arc::new(reports),
            topic: cfg.kafka.topic.clone(),
            // Half the request deadline: a record that cannot enter librdkafka gives up while its
            // request still waits, so the request can truthfully answer 503 (never written)
            // instead of 504 (uncertain).
            queue_full_timeout: cfg.deadline / 2,
            closing: Arc::new(Mutex::new(None)),
            rotation: Rotation::new(Duration::from_secs_f64(linger.max(0.0) / 1000.0)),
            in_flight,
            gathered: histogram!(catalog::INGEST_GATHER_SECONDS),
            wake,
        })
    }

    /// Where the partition count is kept (`crate::ready` keeps it current).
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

impl Publish for Publisher {
    fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    fn wake_when_link_idle(&self, wake: Arc<crate::wake::Wake>) {
        let _ = self.wake.set(wake);
    }

    /// Hands records to librdkafka. When its queue is full the ring consumer waits here, which
    /// backs up the ring, which turns into 503s at the HTTP edge: backpressure end to end. A
    /// record waits at most the request deadline (Kafka is not taking anything: its request has
    /// had its 503 by then), so the ring keeps draining and shutdown cannot hang.
    fn send_all(&self, records: impl Iterator<Item = Pending>) {
        let partition = self.rotation.now();
        for p in records {
            // The wait for room counts from when the record left the ring, gathering included,
            // so a record that cannot enter librdkafka still gives up while its requests wait.
            let waiting_since = p.since;
            let handed = Instant::now();
            self.gathered.record(handed.saturating_duration_since(p.since).as_secs_f64());
            let mut opaque = Box::new(Opaque { acks: p.acks, since: handed });
            let payload = p.payload;
            // Counted before the send: its delivery report may come before `send` returns.
            self.in_flight.fetch_add(1, Ordering::SeqCst);
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
                        self.in_flight.fetch_sub(1, Ordering::AcqRel);
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::IngestConfig;

    #[test]
    fn the_partition_turns_with_each_window_of_records() {
        use clap::Parser;
        let window = |args: &[&str]| {
            let cfg = IngestConfig::try_parse_from([&["ingest"], args].concat()).expect("flags parse");
            Publisher::new(&cfg.producer()).expect("a producer").rotation().window()
        };
        assert_eq!(window(&["--linger-ms", "7"]), Duration::from_millis(7));
        // The ring gathers for --linger-ms: records come once per window, whatever librdkafka's.
        assert_eq!(window(&["--linger-ms", "7", "--producer-options", "linger.ms=20"]), Duration::from_millis(7));
        let old = ["--record-max-bytes", "0", "--linger-ms", "7"];
        assert_eq!(window(&old), Duration::from_millis(7));
        assert_eq!(window(&[&old[..], &["--producer-options", "linger.ms=20"]].concat()), Duration::from_millis(20));
    }

    /// rust-rdkafka's `ThreadedProducer` polled for 100 ms at a time and spun through the last
    /// fraction of a millisecond of each poll (`REPORTS_POLL`): about 45 ms of CPU in 5 idle
    /// seconds. The threads a producer starts must stay about idle while nothing is sent.
    #[test]
    fn an_idle_producer_does_not_spin() {
        use clap::Parser;
        use pipeline_common::procstat::thread_cpu_seconds;
        let threads = || thread_cpu_seconds(None).expect("this process's threads");
        let before: std::collections::HashSet<i32> = threads().into_iter().map(|(t, _)| t).collect();
        let cfg = IngestConfig::try_parse_from(["ingest"]).expect("flags parse");
        let publisher = Publisher::new(&cfg.producer()).expect("a producer");
        let ours = || threads().into_iter().filter(|(t, _)| !before.contains(t)).map(|(_, cpu)| cpu).sum::<f64>();
        std::thread::sleep(Duration::from_secs(1));
        let start = ours();
        std::thread::sleep(Duration::from_secs(5));
        let used = ours() - start;
        drop(publisher);
        // The kernel counts in ticks of 10 ms; a producer whose threads only wake to wait again
        // uses none or one. Under 25 ms is at most two ticks.
        assert!(used < 0.025, "the producer's threads used {used:.3} s of CPU in 5 idle seconds");
    }

    #[test]
    fn a_batch_record_must_fit_the_producer() {
        use clap::Parser;
        let publisher = |args: &[&str]| {
            let cfg = IngestConfig::try_parse_from([&["ingest"], args].concat()).expect("flags parse");
            Publisher::new(&cfg.producer()).map(|_| ())
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
}
