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
use pipeline_stores::{Store, StoreKind};
use std::sync::Arc;
use std::time::Instant;

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
    let mut timings = Timings::default();
    for (i, s) in stores.iter().enumerate() {
        let ids = timings.time(format!("read {}", s.kind()), crate::patient::ids(s.as_ref())).await?;
        let started = Instant::now();
        tally.reserve(ids.len().saturating_sub(tally.len()));
        tally.add_store(i, ids);
        timings.add(format!("tally {}", s.kind()), started);
    }
    let (k, topic) = (kafka.clone(), dlq_topic.to_string());
    let read = tokio::task::spawn_blocking(move || dlq::read_all(&k, &topic));
    let dead = timings.time("read dead letters".into(), read).await??;
    let mode = if level == Level::Ids { Mode::Expected } else { Mode::StoresOnly };
    let started = Instant::now();
    let classes = classify(&tally, &dead, mode);
    timings.add("classify".into(), started);
    let mut report = Report::new(level, source, expected, classes, &dead);
    report.timings = timings.0;
    Ok(report)
}

/// Seconds per phase, for the report: with millions of ids, where the time goes is news.
#[derive(Default)]
struct Timings(Vec<(String, f64)>);

impl Timings {
    fn add(&mut self, phase: String, started: Instant) {
        self.0.push((phase, started.elapsed().as_secs_f64()));
    }

    async fn time<T>(&mut self, phase: String, f: impl std::future::Future<Output = T>) -> T {
        let started = Instant::now();
        let out = f.await;
        self.add(phase, started);
        out
    }
}
