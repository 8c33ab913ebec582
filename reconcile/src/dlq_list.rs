//! `reconcile dlq list`: what the dead-letter topic holds, record by record (where, when, the
//! store that refused it, the id, the error) and counted per store and error, with whether
//! `reconcile dlq replay` has replayed it already.

use crate::dlq::{self, Record};
use crate::replay;
use pipeline_common::config::KafkaArgs;
use pipeline_common::reconcile_report::{DlqCount, DlqList, DlqRecord};
use std::collections::{BTreeMap, HashMap};

/// Characters of an error that group records in the counts.
const ERROR_KEY_CHARS: usize = 80;

fn when(r: &Record) -> String {
    let at =
        r.timestamp.and_then(|ms| time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok());
    at.map_or_else(|| "-".into(), pipeline_common::digest::sent_at_text)
}

fn ids_of(r: &Record) -> String {
    r.header("id").unwrap_or_else(|| "-".into())
}

pub(crate) fn run(kafka: &KafkaArgs, topic: &str, limit: usize, as_json: bool) -> anyhow::Result<u8> {
    let replayed = replay::committed(kafka, &replay::group_of(topic), topic)?;
    let mut records = Vec::new();
    let exists = dlq::scan(kafka, topic, &HashMap::new(), |r| records.push(r))?;
    let done = |r: &Record| r.replayable() && replayed.get(&r.partition).is_some_and(|&c| r.offset < c);
    let mut counts: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for r in &records {
        let key: String = r.reason().chars().take(ERROR_KEY_CHARS).collect();
        let e = counts.entry((r.store(), key)).or_default();
        if done(r) {
            e.1 += 1;
        } else {
            e.0 += 1;
        }
    }
    if as_json {
        let shown = records
            .iter()
            .take(limit)
            .map(|r| DlqRecord {
                at: r.at(),
                time: when(r),
                store: r.store(),
                id: r.header("id"),
                error: r.reason(),
                replayable: r.replayable(),
                replayed: done(r),
            })
            .collect();
        let counts = counts
            .iter()
            .map(|((store, error), (pending, done))| DlqCount {
                store: store.clone(),
                error: error.clone(),
                pending: *pending,
                replayed: *done,
            })
            .collect();
        crate::report::print_json(&DlqList {
            topic: topic.to_string(),
            exists,
            records: u64::try_from(records.len()).unwrap_or(u64::MAX),
            shown,
            counts,
            replay_group: replay::group_of(topic),
        });
        return Ok(0);
    }
    if !exists {
        println!("dead-letter topic {topic}: absent (no dead letters)");
        return Ok(0);
    }
    println!("dead-letter topic {topic}: {} records (replay group {})", records.len(), replay::group_of(topic));
    for r in records.iter().take(limit) {
        let state = match (r.replayable(), done(r)) {
            (_, true) => "replayed",
            (true, false) => "pending",
            (false, false) => "not replayable",
        };
        println!("{:<10} {} {:<7} {:<40} {state}: {}", r.at(), when(r), r.store(), ids_of(r), r.reason());
    }
    if records.len() > limit {
        println!("... {} more (--limit)", records.len() - limit);
    }
    println!("per store and error (pending / replayed):");
    for ((store, error), (pending, done)) in &counts {
        println!("  {store:<7} {pending:>8} / {done:<8} {error}");
    }
    Ok(0)
}
