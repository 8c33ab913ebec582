//! Scale: two million ids through the whole in-memory path (id log parsing, tally, four stores,
//! classes), timed. Ignored by default (it wants a release build):
//!
//!     cargo test -p reconcile --release -- --ignored --nocapture two_million

use crate::check::load_expected;
use crate::classify::{classify, Mode};
use crate::dlq::DeadLetters;
use crate::expect::IdSource;
use pipeline_common::message::{shard_of, shard_table};
use pipeline_stores::{StoreKind, StoredId};
use std::io::Write;
use std::time::Instant;

const N: usize = 2_000_000;

/// An id shaped like k6/lib/message.js's.
fn id(i: usize) -> String {
    format!("mx34mler-measured-{}-{}-0-{}", i % 250, i / 250, i)
}

#[test]
#[ignore = "scale measurement: run with --release --ignored"]
fn two_million_ids_reconcile_well_under_a_minute() {
    let path = std::env::temp_dir().join(format!("reconcile-scale-{}.ids", std::process::id()));
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    writeln!(f, "k6ids RUN scale").unwrap();
    for i in 0..N {
        writeln!(f, "k6ids {} {}", if i % 1000 == 0 { "U" } else { "A" }, id(i)).unwrap();
    }
    writeln!(f, "k6ids END scale A={} U={} R=0", N - N.div_ceil(1000), N.div_ceil(1000)).unwrap();
    drop(f);
    // Every store holds every id but one per store; ES holds one extra.
    let stores: Vec<Vec<StoredId>> = StoreKind::ALL
        .iter()
        .enumerate()
        .map(|(s, &kind)| {
            let mut v: Vec<StoredId> = (0..N)
                .filter(|i| *i != 7 + s)
                .map(|i| {
                    let id = id(i);
                    let place = (kind == StoreKind::Mysql).then(|| shard_table(shard_of(&id)));
                    StoredId { id, place }
                })
                .collect();
            if kind == StoreKind::Es {
                v.push(StoredId { id: "stray".into(), place: None });
            }
            v
        })
        .collect();

    let started = Instant::now();
    let src = IdSource::K6Log { path: path.clone(), run: "scale".into(), summary: None };
    let (mut tally, expected) = load_expected(&StoreKind::ALL, &src).unwrap();
    let loaded = started.elapsed();
    for (i, ids) in stores.into_iter().enumerate() {
        tally.add_store(i, ids);
    }
    let stored = started.elapsed();
    let classes = classify(&tally, &DeadLetters::default(), Mode::Expected);
    let total = started.elapsed();
    std::fs::remove_file(&path).ok();
    eprintln!(
        "{N} ids × 4 stores: id log {:.2} s, stores {:.2} s, classes {:.2} s, total {:.2} s",
        loaded.as_secs_f64(),
        (stored - loaded).as_secs_f64(),
        (total - stored).as_secs_f64(),
        total.as_secs_f64()
    );
    assert_eq!(expected.accepted + expected.uncertain, N as u64);
    assert_eq!(classes["extra in es"].total, 1);
    assert_eq!(classes["missing from mysql"].total + classes["missing from mongo"].total, 2);
    assert_eq!(classes["uncertain, stored"].total, N.div_ceil(1000) as u64);
    // Unoptimised builds hash and parse ~10 times slower; the bound is for the release build.
    if !cfg!(debug_assertions) {
        assert!(total.as_secs() < 30, "{total:?}");
    }
}
