//! The id-level check: expected ids into the tally, then every store's ids, then the dead
//! letters, then the classes. Store by store, so only one store's id list is in memory at a time
//! next to the tally.

use crate::classify::{classify, Mode};
use crate::dlq;
use crate::expect::IdSource;
use crate::idlog::{InputError, LogCounts};
use crate::report::{Level, Report};
use crate::tally::{Expect, Tally};
use pipeline_common::config::KafkaArgs;
use pipeline_common::stores::{Store, StoreKind};
use std::sync::Arc;

/// A tally holding the expected ids of `src` (before anything is counted, so bad input fails
/// fast), and the distinct ids per class.
pub fn load_expected(stores: &[StoreKind], src: &IdSource) -> Result<(Tally, LogCounts), InputError> {
    let mut tally = Tally::new(stores);
    tally.reserve(src.size_hint());
    src.load(|id, e| tally.expect(id, e))?;
    let mut distinct = LogCounts::default();
    for row in tally.rows() {
        match row.expect {
            Expect::Accepted => distinct.accepted += 1,
            Expect::Uncertain => distinct.uncertain += 1,
            Expect::Refused => distinct.refused += 1,
            Expect::Unknown => {}
        }
    }
    Ok((tally, distinct))
}

/// Adds every store's ids and the dead letters to `tally` and classifies.
pub async fn run(
    stores: &[Arc<dyn Store>],
    mut tally: Tally,
    kafka: &KafkaArgs,
    dlq_topic: &str,
    level: Level,
    source: String,
    expected: Option<LogCounts>,
) -> anyhow::Result<Report> {
    for (i, s) in stores.iter().enumerate() {
        let ids = s.ids().await?;
        tally.reserve(ids.len().saturating_sub(tally.len()));
        tally.add_store(i, ids);
    }
    let (k, topic) = (kafka.clone(), dlq_topic.to_string());
    let dead = tokio::task::spawn_blocking(move || dlq::read_all(&k, &topic)).await??;
    let mode = if level == Level::Ids { Mode::Expected } else { Mode::StoresOnly };
    let classes = classify(&tally, &dead, mode);
    Ok(Report::new(level, source, expected, classes, &dead))
}
