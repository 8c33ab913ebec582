//! The ingest's configuration: flags with environment variables; defaults = the reference experiment's front half
//! (ring of 2^17 slots in front of a Kafka producer, topic of 4 partitions).

use clap::{Parser, Subcommand, ValueEnum};
use pipeline_common::config::{KafkaArgs, KafkaOptions};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AckMode {
    /// 202 only after Kafka's delivery report says the record is stored (acks=all).
    Kafka,
    /// 202 as soon as the record is in the ring: the reference experiment's behaviour. Faster, but what is in
    /// the ring or the producer's queue is LOST if the process dies.
    Ring,
}

/// When a gathered record goes to Kafka (`crate::gather`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LingerMode {
    /// As soon as nothing is in flight to the broker, at the latest after --linger-ms: no wait
    /// when idle, records as large as the broker's round trip under load.
    Adaptive,
    /// Always after --linger-ms: every quiet request waits the whole window.
    Fixed,
}

/// Who may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuthMode {
    /// Every API request needs a bearer token whose hash is in --auth-keys.
    Keys,
    /// Anyone who reaches the port may write: a lab without a network to protect (logged loudly
    /// at start).
    None,
}

/// What `ingest` does besides serving.
#[derive(Debug, Clone, Subcommand)]
pub enum Cmd {
    /// API keys for --auth-keys.
    Key {
        #[command(subcommand)]
        cmd: KeyCmd,
    },
}

#[derive(Debug, Clone, Subcommand)]
pub enum KeyCmd {
    /// Makes a random token; prints the keys-file line (`NAME sha256:HEX`) on standard output.
    New {
        /// The key's name: in the metrics and the access log (1-64 of [A-Za-z0-9_.-]).
        name: String,
        /// Writes the token to this new file (mode 0600) instead of standard error.
        #[arg(long)]
        token_out: Option<PathBuf>,
    },
}

#[derive(Debug, Clone, Parser)]
#[command(name = "ingest", about = "HTTP → disruptor ring → Kafka, with honest acknowledgements")]
pub struct IngestConfig {
    #[command(subcommand)]
    pub cmd: Option<Cmd>,
    /// Who may write: `keys` (each API request's bearer token must be in --auth-keys) or `none`
    /// (anyone who reaches the port; for a lab, logged loudly at start). docs/explanation/security.md.
    #[arg(long, env = "INGEST_AUTH", value_enum, default_value_t = AuthMode::Keys)]
    pub auth: AuthMode,
    /// The API keys file: one `NAME sha256:HEX` per line (`ingest key new NAME` makes a key).
    /// Read again on SIGHUP and when it changes.
    #[arg(long, env = "INGEST_AUTH_KEYS")]
    pub auth_keys: Option<PathBuf>,
    /// Messages per second one key may write (0: no limit); past it, 429 with Retry-After. A
    /// keys-file line can set its own (`rate=N`).
    #[arg(long, env = "INGEST_KEY_RATE", default_value_t = 0)]
    pub key_rate: u32,
    /// Bytes per second one key may write (0: no limit); past it, 429. Per key: `bytes=N`.
    #[arg(long, env = "INGEST_KEY_BYTES_RATE", default_value_t = 0)]
    pub key_bytes_rate: u32,
    /// The share of --ring-max-bytes one key's requests may hold between acceptance and their
    /// answer (0 to 1); past it, 503 `key_busy` for that key alone. Per key: `share=F`.
    #[arg(long, env = "INGEST_KEY_RING_SHARE", default_value_t = 0.5, value_parser = share)]
    pub key_ring_share: f64,
    /// The access log (tracing target `access`, one line per request: key, client, route,
    /// status, messages, bytes, latency) logs one request in every N: 1 logs all, 0 none.
    #[arg(long, env = "INGEST_ACCESS_LOG_EVERY", default_value_t = 1)]
    pub access_log_every: u64,
    /// Address the HTTP API listens on.
    #[arg(long, env = "INGEST_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Address of the admin listener (/healthz, /readyz, /metrics), kept off the API's port,
    /// e.g. on a network only the operators' tools reach. Unset: they are served beside the API.
    #[arg(long, env = "INGEST_ADMIN_LISTEN")]
    pub admin_listen: Option<SocketAddr>,
    /// The API listener's TLS certificate, PEM (the server's first, then any intermediates). With
    /// --tls-key-file (both or neither) the API port speaks HTTPS only, TLS 1.2 and 1.3, the
    /// handshake within --head-timeout-ms. Both files are read again when they change (checked
    /// every 2 s) and on SIGHUP, for new connections. An unreadable file, an expired or not yet
    /// valid certificate, or a key that is not the certificate's stops the ingest at start, and
    /// later leaves the pair in force. --admin-listen stays plain HTTP. Unset: plain HTTP.
    #[arg(long, env = "INGEST_TLS_CERT_FILE", requires = "tls_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// The private key of --tls-cert-file's certificate, PEM (PKCS#8, or PKCS#1 RSA, or SEC1 EC;
    /// unencrypted: protect the file instead, mode 0600 or a secret volume).
    #[arg(long, env = "INGEST_TLS_KEY_FILE", requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// When to answer 202.
    #[arg(long, env = "INGEST_ACK", value_enum, default_value_t = AckMode::Kafka)]
    pub ack: AckMode,
    /// Ring slots; a power of two, at least 64 (2^17 by default, the reference experiment's size).
    #[arg(long, env = "INGEST_RING_SIZE", default_value_t = 1 << 17, value_parser = power_of_two)]
    pub ring_size: usize,
    /// Longest sleep of the ring consumer while the ring is empty, in microseconds (never past a
    /// gathered record's due time; it never spins). A put wakes it, so this adds nothing to a
    /// quiet request: it bounds the looks of an idle ingest.
    #[arg(long, env = "INGEST_RING_IDLE_SLEEP_US", default_value_t = 250_000)]
    pub ring_idle_sleep_us: u64,
    /// Longest a request may wait for its acknowledgement before a 503, in milliseconds.
    #[arg(long, env = "INGEST_DEADLINE_MS", default_value_t = 5000)]
    pub deadline_ms: u64,
    /// Retry-After seconds sent with a 503.
    #[arg(long, env = "INGEST_RETRY_AFTER_SECS", default_value_t = 1, alias = "retry-after")]
    pub retry_after_secs: u64,
    /// Most messages in one batch POST.
    #[arg(long, env = "INGEST_MAX_BATCH", default_value_t = 1000)]
    pub max_batch: usize,
    /// Largest message body, in bytes: at most 4 MiB (4194304), the largest body every store
    /// holds, so a 202 is never followed by a store refusing the message for its size.
    #[arg(long, env = "MAX_BODY_BYTES", default_value_t = pipeline_common::message::DEFAULT_MAX_BODY_BYTES, value_parser = pipeline_common::message::parse_max_body_bytes)]
    pub max_body_bytes: usize,
    /// Largest batch request, in bytes (a batch of 1,000 small messages fits easily). The
    /// single-message route reads at most what one valid message can take (see
    /// `max_message_request_bytes`), not this.
    #[arg(long, env = "INGEST_MAX_REQUEST_BYTES", default_value_t = 8 << 20)]
    pub max_request_bytes: usize,
    /// Most bytes of messages held in the ring; past it requests get 503 `ring_full`, like a
    /// ring without free slots. Bounds the ring's memory by bytes, not only by slots.
    #[arg(long, env = "INGEST_RING_MAX_BYTES", default_value_t = 512 << 20)]
    pub ring_max_bytes: u64,
    /// How long the ingest gathers requests into one Kafka record, in milliseconds: the ring
    /// consumer joins every request of the window into one record (up to --record-max-bytes),
    /// because the broker's and librdkafka's work is per record. With --record-max-bytes 0 it is
    /// librdkafka's linger instead (records into one produce request). Longer means fewer, larger
    /// records, at the price of up to that long added to a 202 when traffic is light
    /// (docs/results/performance-log.md).
    #[arg(long, env = "INGEST_LINGER_MS", default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub linger_ms: u64,
    /// adaptive: a gathered record goes as soon as no record is in flight to the broker (and at
    /// the latest after --linger-ms), so a 202 waits for the window only while the broker is
    /// busy with the record before; records are spaced 1 ms per request the one before held, at
    /// most 10 ms and half of --linger-ms (a shorter window trades CPU for a lower median under
    /// load); fixed: it always waits the whole window (docs/explanation/architecture.md, "Why the
    /// window adapts").
    #[arg(long, env = "INGEST_LINGER_MODE", value_enum, default_value_t = LingerMode::Adaptive)]
    pub linger_mode: LingerMode,
    /// Kafka producer batch size, in bytes.
    #[arg(long, env = "INGEST_BATCH_BYTES", default_value_t = 1 << 20)]
    pub batch_bytes: usize,
    /// Largest Kafka record, in bytes. Messages travel as JSON arrays: a batch POST is cut into
    /// records of at most this size, and the requests of one --linger-ms window are joined into
    /// records of at most this size (a message larger than it gets a record of its own):
    /// librdkafka's and the broker's work is per record (docs/results/performance-log.md). Must stay below
    /// the producer's `message.max.bytes`. 0: one record per message and nothing joined, the
    /// format before batch records, for an ingest that runs before its writers are upgraded
    /// (writers read both formats; older writers only this one).
    #[arg(long, env = "INGEST_RECORD_MAX_BYTES", default_value_t = 256 << 10)]
    pub record_max_bytes: usize,
    /// Records the Kafka producer may hold before it pushes back on the ring.
    #[arg(long, env = "INGEST_PRODUCER_QUEUE", default_value_t = 100_000)]
    pub producer_queue: usize,
    /// Extra librdkafka producer settings, `key=value`, comma separated (tuning only: `acks`,
    /// `enable.idempotence` and `compression.type` are the pipeline's and cannot be changed here).
    #[arg(long, env = "INGEST_PRODUCER_OPTIONS", default_value = "", value_parser = producer_options)]
    pub producer_options: KafkaOptions,
    /// This ingest's number in the versions it stamps on messages (0-255; random when unset).
    /// Several ingests writing one topic need distinct numbers for two versions of an id never to
    /// tie (`pipeline_common::version`, docs/explanation/trust.md "A re-used id").
    #[arg(long, env = "INGEST_ID", value_parser = clap::value_parser!(u16).range(0..=i64::from(pipeline_common::version::MAX_INSTANCE)))]
    pub ingest_id: Option<u16>,
    /// Longest a request's body may take to arrive after its head, in milliseconds: past it,
    /// 408 and the connection closed (a client trickling a body cannot hold a connection and its
    /// buffer).
    #[arg(long, env = "INGEST_READ_TIMEOUT_MS", default_value_t = 10_000)]
    pub read_timeout_ms: u64,
    /// Longest a request's head (method, path, headers) may take to arrive, in milliseconds.
    #[arg(long, env = "INGEST_HEAD_TIMEOUT_MS", default_value_t = 5_000)]
    pub head_timeout_ms: u64,
    /// Most bytes of request bodies being read or parsed at once, over all connections: a
    /// request that would pass it gets 503 `busy` at once.
    #[arg(long, env = "INGEST_BODY_BUDGET_BYTES", default_value_t = 64 << 20)]
    pub body_budget_bytes: usize,
    /// Most open client connections (over all HTTP workers); more wait in the kernel's backlog.
    #[arg(long, env = "INGEST_MAX_CONNECTIONS", default_value_t = 4096)]
    pub max_connections: usize,
    /// How long an idle keep-alive connection stays open, in seconds.
    #[arg(long, env = "INGEST_KEEP_ALIVE_SECS", default_value_t = 5)]
    pub keep_alive_secs: u64,
    /// HTTP worker threads (0 = one per core).
    #[arg(long, env = "INGEST_WORKERS", default_value_t = 0)]
    pub workers: usize,
}

/// acks=all, idempotence and lz4 are what a 202 and tansu rely on.
fn producer_options(s: &str) -> Result<KafkaOptions, String> {
    KafkaOptions::parse(s, &["acks", "enable.idempotence", "compression.type", "compression.codec"])
}

fn share(s: &str) -> Result<f64, String> {
    s.parse::<f64>().ok().filter(|f| (0.0..=1.0).contains(f)).ok_or_else(|| format!("`{s}` is not a share from 0 to 1"))
}

fn power_of_two(s: &str) -> Result<usize, String> {
    let n: usize = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if n.is_power_of_two() && n >= 64 {
        Ok(n)
    } else {
        Err(format!("{n} is not a power of two of at least 64"))
    }
}

/// The HTTP worker threads `--workers N` asks for: N, or one per core for 0. Public so the
/// null-202 reference (`examples/null_202.rs`) runs the same count from the same variable.
pub fn http_workers(flag: usize) -> usize {
    if flag == 0 {
        std::thread::available_parallelism().map_or(2, |n| n.get())
    } else {
        flag
    }
}

impl IngestConfig {
    pub fn deadline(&self) -> Duration {
        Duration::from_millis(self.deadline_ms)
    }

    pub fn read_timeout(&self) -> Duration {
        Duration::from_millis(self.read_timeout_ms)
    }

    /// Settings that are each valid but wrong together.
    pub fn check(&self) -> Result<(), String> {
        // A request's records gather for up to --linger-ms before librdkafka has them, and a
        // record that cannot enter librdkafka gives up half a deadline after leaving the ring:
        // a window of half the deadline or more would answer quiet requests 503 or 504.
        if self.gathers() && self.linger_ms.saturating_mul(2) >= self.deadline_ms {
            return Err(format!(
                "--linger-ms {} must be less than half of --deadline-ms {}",
                self.linger_ms, self.deadline_ms
            ));
        }
        Ok(())
    }

    /// The producer's part of the flags (`crate::kafka`).
    pub fn producer(&self) -> crate::kafka::ProducerSettings {
        crate::kafka::ProducerSettings {
            kafka: self.kafka.clone(),
            linger_ms: self.linger_ms,
            gathers: self.gathers(),
            batch_bytes: self.batch_bytes,
            queue_records: self.producer_queue,
            deadline: self.deadline(),
            // A batch's record (`--record-max-bytes`) or one message on its own: at most what
            // the single-message route reads, which bounds the JSON the ingest writes for it.
            largest_record: (
                self.record_max_bytes.max(self.max_message_request_bytes()),
                format!(
                    "--record-max-bytes {}, or one message of MAX_BODY_BYTES {}",
                    self.record_max_bytes, self.max_body_bytes
                ),
            ),
            options: self.producer_options.clone(),
        }
    }

    /// Whether the ring consumer gathers requests into records (`crate::gather`): always, except
    /// in the one-record-per-message format (`--record-max-bytes 0`).
    pub fn gathers(&self) -> bool {
        self.record_max_bytes > 0
    }

    /// Largest body of the single-message route: the biggest valid message as JSON. Every body
    /// byte can be escaped to at most 6 (`\u0001`), each of the three short fields holds at most
    /// 64 characters of up to 12 escaped bytes (a surrogate pair), plus room for the field names,
    /// `sent_at` and whitespace.
    pub fn max_message_request_bytes(&self) -> usize {
        self.max_body_bytes * 6 + 3 * pipeline_common::message::MAX_NAME_CHARS * 12 + 4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_has_help_text() {
        use clap::CommandFactory;
        let bare = pipeline_testkit::flags_without_help(&IngestConfig::command());
        assert!(bare.is_empty(), "flags without help: {bare:?}");
    }

    #[test]
    fn a_body_limit_no_store_could_hold_is_refused_at_startup() {
        use clap::Parser;
        let parse = |v: &str| IngestConfig::try_parse_from(["ingest", "--max-body-bytes", v]).map(|c| c.max_body_bytes);
        assert_eq!(parse("4194304").ok(), Some(4 << 20));
        let e = parse("4194305").expect_err("over what MySQL takes in one packet");
        assert!(e.to_string().contains("max_allowed_packet"), "{e}");
    }

    #[test]
    fn a_gathering_window_must_be_well_inside_the_deadline() {
        use clap::Parser;
        let check = |args: &[&str]| IngestConfig::try_parse_from([&["ingest"], args].concat()).map(|c| c.check());
        assert_eq!(check(&[]).ok(), Some(Ok(())), "the defaults");
        let e = check(&["--linger-ms", "2500"]).expect("parses").expect_err("half the deadline");
        assert!(e.contains("--deadline-ms 5000"), "{e}");
        assert_eq!(check(&["--linger-ms", "2500", "--deadline-ms", "6000"]).ok(), Some(Ok(())));
        // Without gathering, the linger is librdkafka's alone.
        assert_eq!(check(&["--linger-ms", "2500", "--record-max-bytes", "0"]).ok(), Some(Ok(())));
        assert!(check(&["--linger-ms", "60001"]).is_err(), "bounded, so a window fits the clock");
    }

    #[test]
    fn the_tls_files_go_together() {
        use clap::Parser;
        let parse = |args: &[&str]| IngestConfig::try_parse_from([&["ingest"], args].concat());
        let both = parse(&["--tls-cert-file", "c.pem", "--tls-key-file", "k.pem"]).expect("both");
        assert_eq!(
            (both.tls_cert_file.as_deref(), both.tls_key_file.as_deref()),
            (Some(std::path::Path::new("c.pem")), Some(std::path::Path::new("k.pem")))
        );
        let neither = parse(&[]).expect("neither: plain HTTP");
        assert!(neither.tls_cert_file.is_none() && neither.tls_key_file.is_none());
        for (alone, missing) in [("--tls-cert-file", "--tls-key-file"), ("--tls-key-file", "--tls-cert-file")] {
            let e = parse(&[alone, "x.pem"]).expect_err(alone);
            assert_eq!(e.kind(), clap::error::ErrorKind::MissingRequiredArgument, "{alone}: {e}");
            assert!(e.to_string().contains(missing), "{alone} alone names {missing}: {e}");
        }
    }

    #[test]
    fn producer_options_are_tuning_only() {
        use clap::Parser;
        let cfg =
            IngestConfig::try_parse_from(["ingest", "--producer-options", "socket.nagle.disable=true, linger.ms=20"])
                .expect("tuning options parse");
        assert_eq!(
            cfg.producer_options.0,
            [("socket.nagle.disable".into(), "true".into()), ("linger.ms".into(), "20".into())]
        );
        let none = IngestConfig::try_parse_from(["ingest", "--producer-options", ""]).expect("empty means none");
        assert!(none.producer_options.0.is_empty());
        for fixed in ["acks=1", "enable.idempotence=false", "compression.type=snappy"] {
            let e = IngestConfig::try_parse_from(["ingest", "--producer-options", fixed]).err().map(|e| e.to_string());
            assert!(e.as_deref().is_some_and(|e| e.contains("fixed by the pipeline")), "{fixed}: {e:?}");
        }
        assert!(IngestConfig::try_parse_from(["ingest", "--producer-options", "linger.ms"]).is_err());
    }
}
