//! Kafka connection settings shared by ingest, writer, reconcile and the tests (each store's
//! settings live with the store, in the `pipeline-stores` crate).
//!
//! Every address and credential is a flag with an environment variable behind it; the defaults
//! are the native stack's (`scripts/stack`) and `.env.example` documents them all. Services
//! `#[command(flatten)]` the groups they need, so one variable means the same thing everywhere.

use clap::Args;

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

/// librdkafka settings from a service's tuning flag (`--producer-options`, `--consumer-options`):
/// `key=value` pairs, comma separated; empty means none (so compose can pass `${VAR:-}`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KafkaOptions(pub Vec<(String, String)>);

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
