//! The writer's configuration: flags with environment variables, defaults = the reference experiment's topology
//! (3 consumers, batch pull, MySQL written synchronously, the other three asynchronously).

use crate::pool_spec::{Policy, PoolSpec};
use clap::{Parser, ValueEnum};
use pipeline_common::config::{KafkaArgs, KafkaOptions};
use pipeline_stores::StoreArgs;
use pipeline_stores::StoreKind;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PoolMode {
    /// One pool per asynchronous store: a slow store cannot starve the others.
    PerStore,
    /// One pool shared by every asynchronous store, as in the reference experiment.
    Shared,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CommitMode {
    /// Commit an offset only when every record up to it is in every store of `--stores`.
    AfterWrite,
    /// The reference experiment's behaviour: commit once the async writes are submitted. LOSES the queued
    /// writes if the process dies; kept only to measure what the safety costs.
    AfterSubmit,
}

fn store_names() -> Vec<&'static str> {
    StoreKind::ALL.iter().map(|k| k.name()).collect()
}

/// Which stores are written on the consumer task before the others are submitted to pools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncStores(pub Vec<StoreKind>);

impl std::str::FromStr for SyncStores {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => return Ok(SyncStores(vec![])),
            "all" => return Ok(SyncStores(StoreKind::ALL.to_vec())),
            _ => {}
        }
        let mut out = Vec::new();
        for name in s.split(',').map(str::trim) {
            let kind = StoreKind::from_str(name, true)
                .map_err(|_| format!("unknown store `{name}` ({}, none, all)", store_names().join(", ")))?;
            if !out.contains(&kind) {
                out.push(kind);
            }
        }
        Ok(SyncStores(out))
    }
}

/// The per-store pools (`--pool per-store`): a `--pool-<store>` flag (env `WRITER_POOL_<STORE>`)
/// for every store the registry lists, so a new store gets its flag without an edit here.
#[derive(Debug, Clone)]
pub struct StorePools(BTreeMap<StoreKind, PoolSpec>);

/// Every store's pool until its flag says otherwise.
pub const DEFAULT_STORE_POOL: &str = "4/8/64/block";

impl StorePools {
    fn id(kind: StoreKind) -> String {
        format!("pool-{}", kind.name())
    }

    pub fn get(&self, kind: StoreKind) -> PoolSpec {
        // Every kind was filled from its flag (which has a default), so the fallback is unused.
        self.0.get(&kind).copied().unwrap_or(PoolSpec { core: 4, max: 8, queue: 64, policy: Policy::Block })
    }
}

impl clap::FromArgMatches for StorePools {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut pools = BTreeMap::new();
        for kind in StoreKind::ALL {
            if let Some(spec) = m.get_one::<PoolSpec>(&Self::id(kind)) {
                pools.insert(kind, *spec);
            }
        }
        Ok(StorePools(pools))
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for StorePools {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        StoreKind::ALL.into_iter().fold(cmd, |cmd, kind| {
            cmd.arg(
                clap::Arg::new(Self::id(kind))
                    .long(Self::id(kind))
                    .env(format!("WRITER_POOL_{}", kind.name().to_uppercase()))
                    .value_name("CORE/MAX/QUEUE/POLICY")
                    .value_parser(clap::value_parser!(PoolSpec))
                    .default_value(DEFAULT_STORE_POOL)
                    .help(format!(
                        "{kind}'s pool with `--pool per-store`, as core/max/queue/policy (policy: caller-runs, block \
                         or reject). Used only when {kind} is not in --sync-stores."
                    )),
            )
        })
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

#[derive(Debug, Clone, Parser)]
#[command(name = "writer", about = "Kafka → every store (MySQL synchronously by default), no loss, no duplicates")]
pub struct WriterConfig {
    /// Print the stores this writer writes (`--stores`, one name per line, the registry's order)
    /// and exit: the one list every script and check reads.
    #[arg(long)]
    pub list_stores: bool,
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(flatten)]
    pub stores: StoreArgs,

    /// Consumers in the group (each its own task and Kafka client).
    #[arg(long, env = "WRITER_CONSUMERS", default_value_t = 3)]
    pub consumers: usize,
    /// Messages that close a batch: records are added until the batch holds at least this many,
    /// so a batch may pass it by one record's messages (a record holds up to the ingest's
    /// `--record-max-bytes` of messages, gathered from one or more requests).
    #[arg(long, env = "WRITER_BATCH_MAX", default_value_t = 500)]
    pub batch_max: usize,
    /// Extra librdkafka consumer settings, `key=value`, comma separated (tuning only: the group,
    /// offset commits and the start position are the writer's and cannot be changed here).
    #[arg(long, env = "WRITER_CONSUMER_OPTIONS", default_value = "", value_parser = consumer_options)]
    pub consumer_options: KafkaOptions,
    /// Longest wait for a batch to fill, in milliseconds.
    #[arg(long, env = "WRITER_BATCH_WAIT_MS", default_value_t = 10, alias = "batch-wait")]
    pub batch_wait_ms: u64,

    /// Stores written synchronously: `mysql` (policy C), `es` (policy A), `none` (policy B), `all`
    /// (every store of `--stores`), or a comma list of stores of `--stores`.
    #[arg(long, env = "WRITER_SYNC_STORES", default_value = "mysql")]
    pub sync_stores: SyncStores,
    /// How asynchronous writes are pooled: one pool per store, or one shared pool (the reference experiment's).
    #[arg(long, env = "WRITER_POOL", value_enum, default_value_t = PoolMode::PerStore)]
    pub pool: PoolMode,
    /// The shared pool (`--pool shared`): core/max/queue/policy, policy caller-runs, block or
    /// reject. The reference experiment's shape by default.
    #[arg(long, env = "WRITER_POOL_SHARED", default_value = "12/24/1000/caller-runs")]
    pub pool_shared: PoolSpec,
    /// One `--pool-<store>` flag per store of the registry.
    #[command(flatten)]
    pub pools: StorePools,
    /// Most messages in one pool job; 0 = a job is the whole batch. The reference experiment's
    /// pool took one job per message and store (`1`), while its synchronous write was one batch
    /// call: this is how the experiment gives the pool the reference's job rate without
    /// shrinking the consumer's batches (and its synchronous writes) to one message. Given
    /// twice, the last wins: an experiment policy may set it over a plan-wide value.
    #[arg(long, env = "WRITER_POOL_JOB_MAX", default_value_t = 0, overrides_with = "pool_job_max")]
    pub pool_job_max: usize,
    /// Adaptive concurrency for every pool: the writes a pool runs at once follow the store's
    /// round trips and failures (additive increase, multiplicative decrease), between 1 and
    /// the pool's max workers, starting at its core. Without it a pool keeps its fixed
    /// core/max/queue shape.
    #[arg(
        long,
        env = "WRITER_POOL_ADAPTIVE",
        default_value_t = false,
        num_args = 0..=1,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub pool_adaptive: bool,

    /// When an offset may be committed.
    #[arg(long, env = "WRITER_COMMIT", value_enum, default_value_t = CommitMode::AfterWrite)]
    pub commit: CommitMode,
    /// Dead-letter topic for records that cannot be decoded or that a store refuses for good.
    #[arg(long, env = "WRITER_DLQ_TOPIC", default_value = "messages.dlq")]
    pub dlq_topic: String,
    /// Largest message body accepted, in bytes (larger records are dead-lettered); at most 4 MiB
    /// (4194304), the largest body every store holds.
    #[arg(long, env = "MAX_BODY_BYTES", default_value_t = pipeline_common::message::DEFAULT_MAX_BODY_BYTES, value_parser = pipeline_common::message::parse_max_body_bytes)]
    pub max_body_bytes: usize,
    /// Prometheus `/metrics` and `/healthz`.
    #[arg(long, env = "WRITER_METRICS_ADDR", default_value = "127.0.0.1:9464")]
    pub metrics_addr: SocketAddr,
    /// First backoff after a transient store error, in milliseconds (doubles, with jitter).
    #[arg(long, env = "WRITER_RETRY_MIN_MS", default_value_t = 10)]
    pub retry_min_ms: u64,
    /// Longest backoff between retries of a failing store write, in milliseconds. Transient
    /// errors are retried without limit: the partition waits rather than skipping a record.
    #[arg(long, env = "WRITER_RETRY_MAX_MS", default_value_t = 2000)]
    pub retry_max_ms: u64,
    /// Most bytes of batches waiting in one pool's queue; past it the queue counts as full and
    /// the pool's policy applies. Bounds memory by bytes, not only by job count.
    #[arg(long, env = "WRITER_POOL_QUEUE_MAX_BYTES", default_value_t = 256 << 20)]
    pub pool_queue_max_bytes: usize,
    /// After SIGTERM: longest wait for in-flight writes, in seconds. Then what is stored is
    /// committed and the writer exits 0; the rest is redelivered to the next owner.
    #[arg(long, env = "WRITER_SHUTDOWN_GRACE_SECS", default_value_t = 30)]
    pub shutdown_grace_secs: u64,
    /// Seconds a partition with records waiting may go without its committed offset moving,
    /// while every store answers and no consumer of this process owns it, before one consumer
    /// leaves and rejoins the group to make the broker assign it again (then at most once per
    /// interval, doubling to 10 minutes while the stall lasts). A Kafka broker reassigns a dead
    /// member's partitions by itself; tansu 0.6.0 can leave them unassigned (docs/explanation/architecture.md,
    /// "Known server quirks"). 0 turns the watch off.
    #[arg(long, env = "WRITER_REJOIN_STALLED_SECS", default_value_t = 30)]
    pub rejoin_stalled_secs: u64,
}

/// Commits only after the stores hold a batch: no auto-commit, no auto offset store, and the
/// group and start position are the writer's.
fn consumer_options(s: &str) -> Result<KafkaOptions, String> {
    KafkaOptions::parse(
        s,
        &["group.id", "enable.auto.commit", "enable.auto.offset.store", "auto.offset.reset", "isolation.level"],
    )
}

impl WriterConfig {
    /// Refuses `--sync-stores` naming a store that `--stores` leaves out (`all` means every
    /// selected store): the writer would otherwise quietly never write it.
    pub fn check_selection(&self) -> Result<(), String> {
        if self.sync_stores.0 == StoreKind::ALL {
            return Ok(());
        }
        match self.sync_stores.0.iter().find(|k| !self.stores.selection.contains(**k)) {
            Some(k) => Err(format!(
                "--sync-stores names {k}, which --stores ({}) leaves out: add it to --stores or take it out of \
                 --sync-stores",
                self.stores.selection
            )),
            None => Ok(()),
        }
    }

    pub fn batch_wait(&self) -> Duration {
        Duration::from_millis(self.batch_wait_ms)
    }

    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_secs(self.shutdown_grace_secs)
    }

    pub fn pool_spec(&self, kind: StoreKind) -> PoolSpec {
        self.pools.get(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_limit_no_store_could_hold_is_refused_at_startup() {
        let e = WriterConfig::try_parse_from(["writer", "--max-body-bytes", "4194305"]).expect_err("over the bound");
        assert!(e.to_string().contains("max_allowed_packet"), "{e}");
        assert!(WriterConfig::try_parse_from(["writer", "--max-body-bytes", "4194304"]).is_ok());
    }

    #[test]
    fn defaults_reproduce_the_reference_experiment() {
        let c = WriterConfig::parse_from(["writer"]);
        assert_eq!(c.consumers, 3);
        assert_eq!(c.sync_stores, SyncStores(vec![StoreKind::Mysql]));
        assert_eq!(c.kafka.partitions, 4);
        assert_eq!(c.pool_shared.to_string(), "12/24/1000/caller-runs");
        assert_eq!(c.commit, CommitMode::AfterWrite);
        assert_eq!(c.pool_job_max, 0, "a pool job is the whole batch");
    }

    #[test]
    fn the_last_pool_job_max_wins_so_a_policy_can_set_it_over_a_plan() {
        let c = WriterConfig::parse_from(["writer", "--pool-job-max", "1", "--pool-job-max", "0"]);
        assert_eq!(c.pool_job_max, 0);
        // Other flags still refuse to be given twice.
        assert!(WriterConfig::try_parse_from(["writer", "--consumers", "3", "--consumers", "6"]).is_err());
    }

    #[test]
    fn every_flag_has_help_text() {
        use clap::CommandFactory;
        let bare = pipeline_testkit::flags_without_help(&WriterConfig::command());
        assert!(bare.is_empty(), "flags without help: {bare:?}");
    }

    #[test]
    fn every_store_has_its_pool_flag() {
        let c = WriterConfig::parse_from(["writer", "--pool-es", "1/2/3/reject"]);
        assert_eq!(c.pool_spec(StoreKind::Es).to_string(), "1/2/3/reject");
        for kind in StoreKind::ALL.into_iter().filter(|k| *k != StoreKind::Es) {
            assert_eq!(c.pool_spec(kind).to_string(), DEFAULT_STORE_POOL, "{kind}");
        }
    }

    #[test]
    fn the_stores_flag_selects_and_sync_stores_stays_inside_it() {
        let c = WriterConfig::parse_from(["writer"]);
        assert_eq!(c.stores.selected(), StoreKind::ALL, "every store by default");
        let two = "mysql,redis";
        let c = WriterConfig::parse_from(["writer", "--stores", two, "--sync-stores", "all"]);
        assert_eq!(c.stores.selected(), [StoreKind::Mysql, StoreKind::Redis]);
        assert_eq!(c.check_selection(), Ok(()), "`all` is every selected store");
        let c = WriterConfig::parse_from(["writer", "--stores", two, "--sync-stores", "es"]);
        let e = c.check_selection().unwrap_err();
        assert!(e.contains("--sync-stores names es"), "{e}");
        let e = WriterConfig::try_parse_from(["writer", "--stores", "mysql,postgres"]).unwrap_err().to_string();
        assert!(e.contains("unknown store `postgres`"), "{e}");
        let e = WriterConfig::try_parse_from(["writer", "--stores", "redis"]).unwrap_err().to_string();
        assert!(e.contains("system of record"), "{e}");
    }

    #[test]
    fn sync_store_lists() {
        assert_eq!("none".parse::<SyncStores>().unwrap().0, vec![]);
        assert_eq!("all".parse::<SyncStores>().unwrap().0.len(), 4);
        assert_eq!("es,mysql".parse::<SyncStores>().unwrap().0, vec![StoreKind::Es, StoreKind::Mysql]);
        assert!("postgres".parse::<SyncStores>().is_err());
    }
}
