//! `dlq list` and `ids`: what the dead-letter topic and an id log hold.

use super::check::ExpectedIds;
use serde::{Deserialize, Serialize};

/// One dead letter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DlqRecord {
    /// `partition:offset`.
    pub at: String,
    /// When it was dead-lettered (RFC 3339), `-` without a timestamp.
    pub time: String,
    /// The store that refused it (`decode` for a record no store could read).
    pub store: String,
    /// The message's id, when the record names one.
    pub id: Option<String>,
    pub error: String,
    /// It carries a message `dlq replay` can write back.
    pub replayable: bool,
    /// `dlq replay` replayed it already.
    pub replayed: bool,
}

/// Dead letters per store and error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DlqCount {
    pub store: String,
    /// The error's first characters (the grouping key).
    pub error: String,
    pub pending: u64,
    pub replayed: u64,
}

/// `dlq list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DlqList {
    pub topic: String,
    pub exists: bool,
    /// Records on the topic.
    pub records: u64,
    /// The first records, up to `--limit`.
    pub shown: Vec<DlqRecord>,
    pub counts: Vec<DlqCount>,
    pub replay_group: String,
}

/// `ids`: what a k6 run's id log holds, checked complete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdsReport {
    /// The id log, for people.
    pub source: String,
    pub ids: ExpectedIds,
    /// The plain id files written (`--write`).
    pub written: Vec<String>,
}
