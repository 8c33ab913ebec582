//! The totals-only check, `reset`, and the two answers any subcommand may give instead of its
//! report: not drained, and bad input.

use super::check::{Level, StoreCount, Verdict};
use serde::{Deserialize, Serialize};

/// What the totals were compared with: `accepted` 202s plus up to `uncertain` more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TotalsExpected {
    pub accepted: u64,
    pub uncertain: u64,
}

/// A store's count against the expectation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreTotal {
    /// The store's name (`mysql`, `redis`, `es`, `mongo`).
    pub store: String,
    pub count: u64,
    /// The accepted count expected, when one was given.
    pub expected: Option<u64>,
    /// `count - expected`, saturated at the ends of `i64`.
    pub difference: Option<i64>,
}

/// `count` without ids (`--expect N`, a summary without an id log, nothing expected): the weak
/// check, said so in `check` and `message` every time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TotalsReport {
    /// Always [`Level::Totals`].
    pub check: Level,
    /// Where the expectation came from, for people.
    pub source: String,
    pub drained: bool,
    pub expected: Option<TotalsExpected>,
    /// Every store within the expectation (or, without one, all equal).
    pub ok: bool,
    pub verdict: Verdict,
    pub message: String,
    /// Every store's count; the prefill reads them to know what the stores hold.
    pub stores: Vec<StoreTotal>,
}

impl TotalsReport {
    /// The store's entry, when the report has it.
    pub fn store(&self, name: &str) -> Option<&StoreTotal> {
        self.stores.iter().find(|s| s.store == name)
    }
}

/// `reset`: every store emptied, counted twice two seconds apart to see that nothing still
/// writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResetReport {
    /// Both counts are zero in every store.
    pub ok: bool,
    pub first: Vec<StoreTotal>,
    pub second: Vec<StoreTotal>,
}

/// A partition the writers' group had not committed to its end when the drain wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaggingPartition {
    pub partition: i32,
    /// Next offset the group will read.
    pub committed: i64,
    /// High watermark.
    pub high: i64,
}

impl std::fmt::Display for LaggingPartition {
    /// `p3 120/200`: how readers quote a lagging partition.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "p{} {}/{}", self.partition, self.committed, self.high)
    }
}

/// The pipeline did not drain within `--drain-timeout` (exit 3): nothing was checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotDrained {
    /// Always false; the field that tells this answer from a report.
    pub drained: bool,
    pub lagging: Vec<LaggingPartition>,
    /// Every store's count when the wait ended.
    pub counts: Vec<StoreCount>,
}

/// Why reconcile refused to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Flags or files that cannot be used (exit 2), found before anything is contacted.
    BadInput,
}

impl std::fmt::Display for ErrorKind {
    /// The name reconcile prints (`bad_input`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ErrorKind::BadInput => "bad_input",
        })
    }
}

/// Bad input, answered as JSON in `--json` mode (exit 2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorAnswer {
    pub error: ErrorKind,
    /// What is wrong, for people.
    pub detail: String,
}
