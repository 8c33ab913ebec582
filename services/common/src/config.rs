//! Kafka connection settings shared by ingest, writer, reconcile and the tests (each store's
//! settings live with the store, in the `pipeline-stores` crate).
//!
//! Every address and credential is a flag with an environment variable behind it; the defaults
//! are the native stack's (`scripts/stack`) and `.env.example` documents them all. Services
//! `#[command(flatten)]` the groups they need, so one variable means the same thing everywhere.

use clap::Args;
use std::path::PathBuf;

/// Kafka (tansu here, Apache Kafka under compose).
#[derive(Debug, Clone, Args)]
pub struct KafkaArgs {
    /// Bootstrap brokers, comma separated.
    #[arg(id = "kafka-brokers", long = "kafka-brokers", env = "KAFKA_BROKERS", default_value = "localhost:9092")]
    pub brokers: String,
    /// Topic carrying the messages.
    #[arg(id = "kafka-topic", long = "kafka-topic", env = "KAFKA_TOPIC", default_value = "messages")]
    pub topic: String,
    /// Partitions the topic is created with when missing (4, as in the reference experiment).
    #[arg(id = "kafka-partitions", long = "kafka-partitions", env = "KAFKA_PARTITIONS", default_value_t = 4)]
    pub partitions: i32,
    /// Consumer group of the writers; reconcile reads its lag.
    #[arg(id = "kafka-group", long = "kafka-group", env = "KAFKA_GROUP", default_value = "writers")]
    pub group: String,
    /// librdkafka settings every Kafka client of every binary gets (producers, consumers, admin
    /// clients and probes alike): security and connection settings, `key=value` comma separated,
    /// e.g. `security.protocol=SASL_SSL,sasl.mechanism=SCRAM-SHA-512,sasl.username=app,
    /// ssl.ca.location=/etc/kafka-ca.pem`. Prefer --kafka-options-file for a password.
    #[arg(
        id = "kafka-options",
        long = "kafka-options",
        env = "KAFKA_OPTIONS",
        default_value = "",
        hide_env_values = true,
        value_parser = client_options
    )]
    pub options: KafkaOptions,
    /// A file of more such settings, one `key=value` per line (the Docker and Kubernetes secrets
    /// convention): where `sasl.password` and the like belong.
    #[arg(id = "kafka-options-file", long = "kafka-options-file", env = "KAFKA_OPTIONS_FILE", value_parser = options_file)]
    pub options_file: Option<OptionsFile>,
    /// Connect in plaintext to servers on other machines (Kafka and the stores): refused at start
    /// otherwise, so a missing TLS setting cannot go unnoticed. Servers on loopback are always
    /// allowed; compose sets it for its private network.
    #[arg(id = "allow-plaintext", long = "allow-plaintext", env = "PIPELINE_ALLOW_PLAINTEXT")]
    pub allow_plaintext: bool,
}

/// The settings every client of the pipeline needs as they are: the brokers (`--kafka-brokers`),
/// and what the 202 and the offset tracker rest on.
const FIXED: &[&str] = &[
    "bootstrap.servers",
    "acks",
    "enable.idempotence",
    "compression.type",
    "compression.codec",
    "group.id",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "auto.offset.reset",
    "isolation.level",
];

fn client_options(s: &str) -> Result<KafkaOptions, String> {
    KafkaOptions::parse(s, FIXED)
}

/// `--kafka-options-file`: read and checked when the flags are parsed, so a bad file fails the
/// start with its name.
#[derive(Clone)]
pub struct OptionsFile {
    pub path: PathBuf,
    pub options: KafkaOptions,
}

impl std::fmt::Debug for OptionsFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {:?}", self.path.display(), self.options)
    }
}

fn options_file(s: &str) -> Result<OptionsFile, String> {
    let path = PathBuf::from(s);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {s}: {e}"))?;
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    let options = KafkaOptions::parse(&lines.join(","), FIXED).map_err(|e| format!("{s}: {e}"))?;
    Ok(OptionsFile { path, options })
}

impl KafkaArgs {
    /// Adds the settings of `--kafka-options` and `--kafka-options-file` to a client
    /// configuration (`pipeline_common::kafka::client_config` does, for every client).
    pub fn apply(&self, config: &mut rdkafka::ClientConfig) {
        self.options.apply(config);
        if let Some(f) = &self.options_file {
            f.options.apply(config);
        }
    }
}

impl KafkaArgs {
    /// The defaults, as a service would see them with no flags (environment still applies).
    pub fn from_env() -> Self {
        #[derive(clap::Parser)]
        struct P {
            #[command(flatten)]
            k: KafkaArgs,
        }
        <P as clap::Parser>::parse_from(["env"]).k
    }
}

/// librdkafka settings from a flag (`--kafka-options`, `--producer-options`,
/// `--consumer-options`): `key=value` pairs, comma separated; empty means none (so compose can
/// pass `${VAR:-}`). Printed with the values of secret keys masked.
#[derive(Clone, Default, PartialEq)]
pub struct KafkaOptions(pub Vec<(String, String)>);

impl std::fmt::Debug for KafkaOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown: Vec<String> = self
            .0
            .iter()
            .map(|(k, v)| if crate::secret::is_secret_key(k) { format!("{k}=***") } else { format!("{k}={v}") })
            .collect();
        write!(f, "KafkaOptions({})", shown.join(","))
    }
}

impl KafkaOptions {
    /// Parses `text`, refusing any key in `fixed` (and `bootstrap.servers`): the settings the
    /// pipeline's guarantees rest on.
    pub fn parse(text: &str, fixed: &[&str]) -> Result<KafkaOptions, String> {
        let mut out = Vec::new();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, v) = item.split_once('=').ok_or_else(|| format!("`{item}` is not key=value"))?;
            let k = k.trim();
            if fixed.contains(&k) || k == "bootstrap.servers" {
                return Err(format!("{k} is fixed by the pipeline and cannot be set here"));
            }
            out.push((k.to_string(), v.trim().to_string()));
        }
        Ok(KafkaOptions(out))
    }

    /// Adds every setting to a client configuration.
    pub fn apply(&self, config: &mut rdkafka::ClientConfig) {
        for (k, v) in &self.0 {
            config.set(k, v);
        }
    }
}
