//! The id-level check: expected ids into the tally, then every store's ids, then the dead
//! letters, then the classes. Store by store, so only one store's id list is in memory at a time
//! next to the tally.

use crate::classify::{classify, Mode};
use crate::dlq;
use crate::expect::IdSource;
use crate::idlog::{InputError, LogCounts};
use crate::report::{Level, Report};
use crate::tally::{Expect, Tally, REFERENCE};
use pipeline_common::config::KafkaArgs;
use pipeline_stores::{Store, StoreKind};
use std::sync::Arc;
use std::time::Instant;

/// A tally holding the expected ids of `src` (before anything is counted, so bad input fails
/// fast), and the distinct ids per class.
pub(crate) fn load_expected(stores: &[StoreKind], src: &IdSource) -> Result<(Tally, LogCounts), InputError> {
    let mut tally = Tally::new(stores);
    tally.reserve(src.size_hint());
    src.load(|id, e, sent| tally.expect(id, e, sent))?;
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
pub(crate) async fn run(
    stores: &[Arc<dyn Store>],
    mut tally: Tally,
    kafka: &KafkaArgs,
    dlq_topic: &str,
    level: Level,
    source: String,
    expected: Option<LogCounts>,
) -> anyhow::Result<Report> {
    let mut timings = Timings::default();
    // The reference store first: every other store's content is compared with it on arrival.
    let mut order: Vec<usize> = (0..stores.len()).collect();
    order.sort_by_key(|&i| stores[i].kind() != REFERENCE);
    for i in order {
        let s = &stores[i];
        let held = timings.time(format!("read {}", s.kind()), crate::patient::audit(s.as_ref(), tally.scope())).await?;
        let started = Instant::now();
        tally.reserve(held.len().saturating_sub(tally.len()));
        tally.add_store(i, held);
        timings.add(format!("tally {}", s.kind()), started);
    }
    let (k, topic, group) = (kafka.clone(), dlq_topic.to_string(), crate::replay::group_of(dlq_topic));
    let read = tokio::task::spawn_blocking(move || {
        let replayed = crate::replay::committed(&k, &group, &topic)?;
        dlq::read_all(&k, &topic, &replayed).map_err(anyhow::Error::from)
    });
    let dead = timings.time("read dead letters".into(), read).await??;
    let mode = if level == Level::Ids { Mode::Expected } else { Mode::StoresOnly };
    let started = Instant::now();
    let mut classes = classify(&tally, &dead, mode);
    timings.add("classify".into(), started);
    let started = Instant::now();
    show_mismatches(stores, &mut classes).await?;
    timings.add("examples".into(), started);
    let mut report = Report::new(level, source, expected, classes, &dead);
    report.sent_checked = tally.sent_checked;
    report.timings = timings.0;
    Ok(report)
}

/// Examples of a mismatch shown with their values: this many per class.
const SHOWN: usize = 3;

/// Replaces the first examples of each `mismatched (store)` class with the values both stores
/// hold, fetched by id (a handful of reads; the check itself compared fingerprints only).
async fn show_mismatches(stores: &[Arc<dyn Store>], classes: &mut crate::classify::Classes) -> anyhow::Result<()> {
    let Some(reference) = stores.iter().find(|s| s.kind() == REFERENCE) else { return Ok(()) };
    for s in stores.iter().filter(|s| s.kind() != REFERENCE) {
        let Some(class) = classes.get_mut(&crate::classify::mismatched(s.kind())) else { continue };
        let ids: Vec<String> = class.example_ids().take(SHOWN).map(str::to_string).collect();
        if ids.is_empty() {
            continue;
        }
        let theirs = crate::patient::fetch(s.as_ref(), &ids).await?;
        let ours = crate::patient::fetch(reference.as_ref(), &ids).await?;
        for id in &ids {
            let (a, b) = (ours.iter().find(|m| &m.id == id), theirs.iter().find(|m| &m.id == id));
            if let (Some(a), Some(b)) = (a, b) {
                class.set_example(id, format!("{id}: {}", crate::content::compare(REFERENCE, a, s.kind(), b)));
            }
        }
    }
    Ok(())
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
