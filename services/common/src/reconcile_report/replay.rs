//! `replay` (from the pipeline's topic) and `dlq replay` (from the dead-letter topic).

use super::Examples;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The `replay` field of a topic replay: the value that tells it from a dead-letter replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TopicTag {
    Topic,
}

/// Offsets asked for but past the topic's retention: `[from, to)` can no longer be replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoneRange {
    pub from: i64,
    pub to: i64,
}

/// One partition of the range: its offsets and what was read from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayPartition {
    pub partition: i32,
    /// The oldest offset the topic still held, and the next one to be written, at the start.
    pub low: i64,
    pub high: i64,
    /// The records read: `[start, end)`.
    pub start: i64,
    pub end: i64,
    pub gone: Option<GoneRange>,
    pub records: u64,
    pub messages: u64,
    pub undecodable: u64,
}

/// The read-back after the writes (absent in a dry run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadBack {
    /// Ids read back.
    pub checked: u64,
    pub missing: Examples,
    /// Held at an older version than the log's.
    pub older: Examples,
    /// The replayed version with other content.
    pub different: Examples,
}

/// One store of a topic replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayStore {
    /// The store's name (`mysql`, `redis`, `es`, `mongo`).
    pub store: String,
    /// Messages the store lacked, by partition of their record: written (dry run: to write).
    pub to_write: BTreeMap<i32, u64>,
    pub to_write_total: u64,
    /// Written and acknowledged.
    pub written: u64,
    /// Already held at the log's version or newer.
    pub held: u64,
    /// Refused for good by the store.
    pub refused: Examples,
    /// Version 0 held with other content: left as it is.
    pub unversioned_other_content: Examples,
    pub verify: Option<ReadBack>,
}

/// `replay`: a range of the pipeline's topic written again into the chosen stores.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicReplayReport {
    pub replay: TopicTag,
    pub topic: String,
    /// The range as the flags gave it.
    pub range: String,
    pub dry_run: bool,
    pub partitions: Vec<ReplayPartition>,
    /// Records and messages read over all partitions.
    pub records: u64,
    pub messages: u64,
    /// Items that are not valid messages: reported, never written.
    pub undecodable: Examples,
    pub stores: Vec<ReplayStore>,
    /// Every message of the range is in every chosen store (dry run: nothing to write).
    pub ok: bool,
    /// The outcome in a sentence (`NOTHING TO DO`, `REPLAYED`, ...).
    pub message: String,
}

impl TopicReplayReport {
    /// The store's entry, when the replay chose it.
    pub fn store(&self, name: &str) -> Option<&ReplayStore> {
        self.stores.iter().find(|s| s.store == name)
    }
}

/// `dlq replay`: dead letters written back into the stores that refused them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DlqReplayReport {
    /// Always true; the field that tells this report from a topic replay's.
    pub replay: bool,
    /// The dead-letter topic.
    pub topic: String,
    /// The replay's consumer group (what was replayed is committed there).
    pub group: String,
    pub dry_run: bool,
    /// Messages written back (dry run: to write), by store name.
    pub written: BTreeMap<String, u64>,
    /// Refused again (and dead-lettered again), by store name.
    pub refused_again: BTreeMap<String, Examples>,
    /// Dead letters without a message to replay.
    pub not_replayable: Examples,
    pub ok: bool,
    pub message: String,
}

impl DlqReplayReport {
    /// Messages written back into `store`; 0 when none.
    pub fn written_to(&self, store: &str) -> u64 {
        self.written.get(store).copied().unwrap_or(0)
    }

    /// Messages `store` refused again; 0 when none.
    pub fn refused_again_by(&self, store: &str) -> u64 {
        self.refused_again.get(store).map_or(0, |c| c.total)
    }
}
