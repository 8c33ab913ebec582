//! What `reconcile --json` prints, as types: reconcile serializes them, and every reader (the
//! experiment's gates and chaos verdicts, the tests) deserializes them, so a field renamed on one
//! side fails to compile on the other instead of reading as `null`.
//!
//! One document per run. Which one depends on the subcommand and on how far the run got:
//! - `count` / `diff` with expected ids, or `diff --stores-only`: [`CheckReport`];
//! - `count` without ids (`--expect N`, a summary without an id log): [`TotalsReport`];
//! - `reset`: [`ResetReport`]; `repair`: [`RepairReport`]; `replay`: [`TopicReplayReport`];
//! - `dlq replay`: [`DlqReplayReport`]; `dlq list`: [`DlqList`]; `ids`: [`IdsReport`];
//! - any of them that waited for a drain that did not come: [`NotDrained`];
//! - any of them given bad input (exit 2): [`ErrorAnswer`].
//!
//! [`Answer`] is the union a reader parses when it does not know in advance which of these it
//! got. `show` prints each id as every store holds it; only people read it, so it has no type.
//!
//! Per-store sections are lists of entries naming their store (`"store": "mysql"`), never a
//! fixed set of fields, so a run over some of the stores is represented as it is.

mod answer;
mod check;
mod dlq;
pub mod names;
mod repair;
mod replay;
mod totals;

pub use answer::{Answer, ReportError};
pub use check::{CheckReport, ClassSummary, Content, DeadLetterSummary, ExpectedIds, Level, StoreCount, Verdict};
pub use dlq::{DlqCount, DlqList, DlqRecord, IdsReport};
pub use repair::{RepairReport, RepairedStore};
pub use replay::{DlqReplayReport, GoneRange, ReadBack, ReplayPartition, ReplayStore, TopicReplayReport, TopicTag};
pub use totals::{
    ErrorAnswer, ErrorKind, LaggingPartition, NotDrained, ResetReport, StoreTotal, TotalsExpected, TotalsReport,
};

use serde::{Deserialize, Serialize};

/// A class of findings where only its size and a few examples are reported (repair's and
/// replay's per-store classes): the total decides, the examples are what a person looks up.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Examples {
    /// How many ids (or records) fall in the class.
    pub total: u64,
    /// The smallest ids of the class with their detail, at most reconcile's example limit.
    pub examples: Vec<String>,
}

/// `Display` as the JSON reconcile prints: readers' messages quote the document they judged.
macro_rules! display_as_json {
    ($($t:ty),* $(,)?) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let text = serde_json::to_string(self).map_err(|_| std::fmt::Error)?;
                f.write_str(&text)
            }
        }
    )*};
}
display_as_json!(
    Answer,
    CheckReport,
    TotalsReport,
    ResetReport,
    RepairReport,
    TopicReplayReport,
    DlqReplayReport,
    DlqList,
    IdsReport,
    NotDrained,
    ErrorAnswer,
);

/// A list of `(name, value)` pairs written as a JSON object in list order (a map would sort it):
/// the check's seconds per phase, in the order the phases ran.
pub(crate) mod ordered_pairs {
    use serde::de::{MapAccess, Visitor};
    use serde::ser::SerializeMap;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::marker::PhantomData;

    pub(crate) fn serialize<S: Serializer, T: Serialize>(pairs: &[(String, T)], s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(pairs.len()))?;
        for (k, v) in pairs {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }

    pub(crate) fn deserialize<'de, D, T>(d: D) -> Result<Vec<(String, T)>, D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de>,
    {
        struct Pairs<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Pairs<T> {
            type Value = Vec<(String, T)>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some(entry) = map.next_entry()? {
                    out.push(entry);
                }
                Ok(out)
            }
        }
        d.deserialize_map(Pairs(PhantomData))
    }
}

#[cfg(test)]
mod tests;
