//! Kafka plumbing shared by ingest (producer), writer (consumers) and reconcile (lag).
//!
//! Written for the tansu broker as much as for Apache Kafka: topics are created explicitly
//! (tansu does not auto-create), compression is lz4 (tansu cannot read Snappy back), and
//! nothing here ever deletes a topic (on tansu's SQLite engine that deletes all of them).

use crate::config::KafkaArgs;
use backon::{ExponentialBuilder, Retryable};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use std::time::Duration;

/// Timeout of one metadata or offsets request.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The base configuration of every Kafka client any binary creates (admin clients, probes,
/// producers, consumers, reconcile's readers): the brokers and `--kafka-options` /
/// `--kafka-options-file`, so one security configuration reaches them all, the way Kafka
/// Connect applies its worker's settings to every client.
pub fn client_config(args: &KafkaArgs) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &args.brokers);
    args.apply(&mut c);
    c
}

/// The one producer configuration every producer of the pipeline uses (ingest, the writer's
/// dead-letter producer, the test kit): `acks=all` and idempotence, so an acknowledged record is
/// on the broker once; lz4, because tansu cannot read Snappy back. Callers add only tuning.
pub fn producer_config(args: &KafkaArgs) -> ClientConfig {
    let mut c = client_config(args);
    c.set("acks", "all").set("enable.idempotence", "true").set("compression.type", "lz4");
    c
}

/// The brokers reached in plaintext on other machines (no `security.protocol` of SSL or
/// SASL_SSL among the client settings).
pub fn plaintext_brokers(args: &KafkaArgs) -> Vec<String> {
    let config = client_config(args);
    let protocol = config.get("security.protocol").unwrap_or("plaintext").to_ascii_lowercase();
    if protocol == "ssl" || protocol == "sasl_ssl" {
        return Vec::new();
    }
    args.brokers
        .split(',')
        .filter_map(|b| {
            let b = b.trim();
            let host = b.rsplit_once(':').map_or(b, |(h, _)| h);
            (!crate::secret::is_loopback(host)).then(|| format!("kafka at {b}"))
        })
        .collect()
}

/// How long [`ensure_topic`] keeps asking a broker that does not answer before giving up.
pub const ENSURE_TOPIC_PATIENCE: Duration = Duration::from_secs(90);

/// Creates the topic with the configured partition count if it does not exist.
///
/// A broker that is still starting, or too busy to answer one admin request in time, is asked
/// again (capped backoff, for [`ENSURE_TOPIC_PATIENCE`]): a service must not fail its start
/// because the broker was slow once. A refusal (invalid partition count, not authorised) fails
/// at once.
pub async fn ensure_topic(args: &KafkaArgs, topic: &str, partitions: i32) -> Result<(), KafkaError> {
    let policy = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(500))
        .with_max_delay(Duration::from_secs(5))
        .with_total_delay(Some(ENSURE_TOPIC_PATIENCE))
        .without_max_times();
    (|| create_topic_once(args, topic, partitions))
        .retry(policy)
        .sleep(tokio::time::sleep)
        .when(|e| !refused(e))
        .notify(|e, wait| tracing::warn!(topic, error = %e, retry_in_ms = wait.as_millis() as u64, "creating the topic failed; asking again"))
        .await
}

/// Errors that asking again cannot change.
fn refused(e: &KafkaError) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        e,
        KafkaError::AdminOp(
            C::InvalidPartitions
                | C::InvalidReplicationFactor
                | C::InvalidTopic
                | C::InvalidConfig
                | C::PolicyViolation
                | C::TopicAuthorizationFailed
                | C::ClusterAuthorizationFailed
        ) | KafkaError::ClientCreation(_)
    )
}

async fn create_topic_once(args: &KafkaArgs, topic: &str, partitions: i32) -> Result<(), KafkaError> {
    let admin: AdminClient<DefaultClientContext> = client_config(args).create()?;
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let results = admin
        .create_topics(
            [&new],
            &AdminOptions::new().operation_timeout(Some(ADMIN_TIMEOUT)).request_timeout(Some(ADMIN_TIMEOUT)),
        )
        .await?;
    for r in results {
        match r {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((_, code)) => return Err(KafkaError::AdminOp(code)),
        }
    }
    Ok(())
}

/// Partition count of a topic, or `None` if the broker does not know it.
pub fn partition_count(args: &KafkaArgs, topic: &str) -> Result<Option<usize>, KafkaError> {
    let consumer: BaseConsumer = client_config(args).create()?;
    let md = consumer.fetch_metadata(Some(topic), ADMIN_TIMEOUT)?;
    Ok(md.topics().iter().find(|t| t.name() == topic && t.error().is_none()).map(|t| t.partitions().len()))
}

/// Lag of one partition for the writers' group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PartitionLag {
    pub partition: i32,
    /// Next offset the group will read (0 when it never committed).
    pub committed: i64,
    /// High watermark: offset of the next record to be produced.
    pub high: i64,
}

impl PartitionLag {
    pub fn lag(&self) -> i64 {
        (self.high - self.committed).max(0)
    }
}

/// A client that reads a group's committed offsets and a topic's high watermarks, kept for
/// repeated samples (one librdkafka client, not one per sample). It never subscribes, so it
/// never joins the group: `group.id` only names whose offsets to read.
pub struct GroupProbe {
    consumer: BaseConsumer,
    topic: String,
}

impl GroupProbe {
    pub fn new(args: &KafkaArgs, group: &str, topic: &str) -> Result<GroupProbe, KafkaError> {
        let consumer = client_config(args)
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("client.id", "pipeline-offsets")
            .create()?;
        Ok(GroupProbe { consumer, topic: topic.to_string() })
    }

    /// Committed offset and high watermark of every partition, in partition order. Blocking
    /// (librdkafka calls); run it on a blocking thread from async code.
    pub fn sample(&self) -> Result<Vec<PartitionLag>, KafkaError> {
        let topic = self.topic.as_str();
        let md = self.consumer.fetch_metadata(Some(topic), ADMIN_TIMEOUT)?;
        let mut partitions: Vec<i32> = md
            .topics()
            .iter()
            .filter(|t| t.name() == topic)
            .flat_map(|t| t.partitions().iter().map(|p| p.id()))
            .collect();
        partitions.sort_unstable();
        let mut tpl = TopicPartitionList::new();
        for p in &partitions {
            tpl.add_partition(topic, *p);
        }
        let committed = self.consumer.committed_offsets(tpl, ADMIN_TIMEOUT)?;
        let mut out = Vec::with_capacity(partitions.len());
        for p in partitions {
            let (_low, high) = self.consumer.fetch_watermarks(topic, p, ADMIN_TIMEOUT)?;
            let committed = match committed.find_partition(topic, p).map(|e| e.offset()) {
                Some(Offset::Offset(o)) => o,
                _ => 0,
            };
            out.push(PartitionLag { partition: p, committed, high });
        }
        Ok(out)
    }
}

/// Committed offsets and high watermarks of every partition of `topic` for `group`, once.
/// Blocking (librdkafka calls); run it on a blocking thread from async code.
pub fn group_lag(args: &KafkaArgs, group: &str, topic: &str) -> Result<Vec<PartitionLag>, KafkaError> {
    GroupProbe::new(args, group, topic)?.sample()
}
