//! The id-level check (`count`/`diff` with expected ids) and the stores-only one
//! (`diff --stores-only`): every class of findings with its total and examples.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a check compared. "OK" means something different at each level, so readers that need
/// the id-level promise (the experiment's reconcile gate, the chaos verdicts) check it is `ids`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    /// Every store's ids against the expected ids, and content between stores (and as sent).
    Ids,
    /// The stores against each other only: an id missing from every store is invisible.
    StoresOnly,
    /// Counts only: an extra id hides a lost one ([`TotalsReport`](super::TotalsReport)).
    Totals,
}

impl Level {
    /// The name reconcile prints (`ids`, `stores-only`, `totals`).
    pub fn name(self) -> &'static str {
        match self {
            Level::Ids => "ids",
            Level::StoresOnly => "stores-only",
            Level::Totals => "totals",
        }
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The one-word verdict, for readers that grep rather than parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Ok,
    Mismatch,
}

impl Verdict {
    pub fn of(ok: bool) -> Verdict {
        if ok {
            Verdict::Ok
        } else {
            Verdict::Mismatch
        }
    }
}

/// Expected ids per class as read from the id log or files (lines: an id named twice counts
/// twice). `accepted` is the number of 202s the experiment's gate quotes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedIds {
    pub accepted: u64,
    pub uncertain: u64,
    pub refused: u64,
}

/// Whether content was compared, and how much of it against what the client sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Content {
    /// Always true for a reconcile that compares content; the gate refuses a report without it.
    pub compared: bool,
    /// Ids whose stored content was compared with the digest the client logged.
    pub checked_against_sent: u64,
}

/// The dead-letter topic as the check read it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetterSummary {
    pub topic: String,
    /// The topic does not exist (no dead letter was ever written).
    pub absent: bool,
    /// Records read; a chaos scenario fails on any.
    pub records: u64,
    /// Dead letters `reconcile dlq replay` wrote back (not counted in `records`).
    #[serde(default)]
    pub replayed: u64,
}

/// One class of findings ("missing from es", "uncertain, stored", ...).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassSummary {
    pub total: u64,
    /// The smallest ids of the class, each with its detail where it has one.
    pub examples: Vec<String>,
    /// A non-zero total breaks the promise (exit 1); false for classes that only inform.
    pub failure: bool,
    /// Content classes: how many ids differ in each field.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<String, u64>,
}

impl ClassSummary {
    /// Counted and breaking the promise.
    pub fn fails(&self) -> bool {
        self.failure && self.total > 0
    }
}

/// A store's count at the drain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreCount {
    /// The store's name (`mysql`, `redis`, `es`, `mongo`).
    pub store: String,
    pub count: u64,
}

/// `count`/`diff` at id level, or `diff --stores-only`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    pub check: Level,
    /// `--only-prefix`: only ids starting with it were judged (the others are counted in the
    /// `outside --only-prefix` classes).
    #[serde(default)]
    pub only_prefix: Option<String>,
    /// Where the expected ids came from, for people.
    pub source: String,
    /// Expected ids per class (id level); `None` for stores-only.
    pub expected: Option<ExpectedIds>,
    /// Absent in reports of a reconcile older than content checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
    pub dead_letters: DeadLetterSummary,
    /// Every class, zero or not, by [name](super::names).
    pub classes: BTreeMap<String, ClassSummary>,
    /// No failing class is counted (the same as `ok`; both are printed for older readers).
    pub clean: bool,
    pub ok: bool,
    pub verdict: Verdict,
    /// The verdict in a sentence, saying what was and was not checked.
    pub message: String,
    /// Seconds per phase of the check, in the order they ran.
    #[serde(default, with = "super::ordered_pairs")]
    pub seconds: Vec<(String, f64)>,
    /// True when the counts below were taken after the drain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drained: Option<bool>,
    /// Every store's count at the drain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stores: Option<Vec<StoreCount>>,
}

impl CheckReport {
    /// The class named `name` (see [`names`](super::names)).
    pub fn class(&self, name: &str) -> Option<&ClassSummary> {
        self.classes.get(name)
    }

    /// The total of the class named `name`; 0 for a class the report does not have.
    pub fn total(&self, name: &str) -> u64 {
        self.class(name).map_or(0, |c| c.total)
    }

    /// Failing classes with a non-zero total, by name.
    pub fn failing(&self) -> impl Iterator<Item = (&str, &ClassSummary)> {
        self.classes.iter().filter(|(_, c)| c.fails()).map(|(k, c)| (k.as_str(), c))
    }

    /// The store's count at the drain, when the report has counts and the store.
    pub fn count_of(&self, store: &str) -> Option<u64> {
        self.stores.iter().flatten().find(|s| s.store == store).map(|s| s.count)
    }
}
