//! Scale: two million ids through the whole in-memory path (id log parsing with digests, tally,
//! four stores' fingerprints compared, classes), timed. Ignored by default (it wants a release
//! build):
//!
//!     cargo test -p reconcile --release -- --ignored --nocapture two_million

use crate::check::load_expected;
use crate::classify::{classify, Mode};
use crate::dlq::DeadLetters;
use crate::expect::IdSource;
use pipeline_common::digest::{hex, Digest, Stored};
use pipeline_common::message::shard_of;
use pipeline_stores::{Audited, StoreKind};
use std::io::Write;
use std::time::Instant;

const N: usize = 2_000_000;

/// An id shaped like k6/lib/message.js's.
fn id(i: usize) -> String {
    format!("mx34mler-measured-{}-{}-0-{}", i % 250, i / 250, i)
}

/// The content of message `i`, fingerprinted as a store would (a 256-byte body, as k6 sends).
fn digest(i: usize, body: &str) -> Digest {
    let sender = format!("user-{}", i % 1000);
    let at = time::macros::datetime!(2026-12-01 00:00 UTC) + time::Duration::milliseconds(i as i64);
    Digest::of(Stored { sender: &sender, recipient: "user-7", body, sent_at: at, version: 1 + i as u64 })
}

#[test]
#[ignore = "scale measurement: run with --release --ignored"]
fn two_million_ids_reconcile_well_under_a_minute() {
    let path = std::env::temp_dir().join(format!("reconcile-scale-{}.ids", std::process::id()));
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    writeln!(f, "k6ids RUN scale").unwrap();
    let body = "order shipped invoice ".repeat(12);
    for i in 0..N {
        writeln!(f, "k6ids {} {}:{}", if i % 1000 == 0 { "U" } else { "A" }, id(i), hex(digest(i, &body).sent))
            .unwrap();
    }
    writeln!(f, "k6ids END scale A={} U={} R=0", N - N.div_ceil(1000), N.div_ceil(1000)).unwrap();
    drop(f);
    // Every store holds every id but one per store; ES holds one extra; Redis holds ten bodies
    // that differ. Fingerprints are made here, outside the timing: in a real run they are made
    // while each store is read.
    let stores: Vec<Vec<Audited>> = StoreKind::ALL
        .iter()
        .enumerate()
        .map(|(s, &kind)| {
            let mut v: Vec<Audited> = (0..N)
                .filter(|i| *i != 7 + s)
                .map(|i| {
                    let id = id(i);
                    let changed = kind == StoreKind::Redis && i % 200_000 == 1;
                    let d = digest(i, if changed { "changed" } else { &body });
                    let place = (kind == StoreKind::Mysql).then(|| shard_of(&id));
                    Audited { id, place, digest: Some(d) }
                })
                .collect();
            if kind == StoreKind::Es {
                v.push(Audited { id: "stray".into(), place: None, digest: Some(digest(0, &body)) });
            }
            v
        })
        .collect();

    let started = Instant::now();
    let src = IdSource::K6Log { path: path.clone(), run: "scale".into(), summary: None };
    let (mut tally, expected) = load_expected(&StoreKind::ALL, &src).unwrap();
    let loaded = started.elapsed();
    for (i, held) in stores.into_iter().enumerate() {
        tally.add_store(i, held);
    }
    let stored = started.elapsed();
    let classes = classify(&tally, &DeadLetters::default(), Mode::Expected);
    let total = started.elapsed();
    std::fs::remove_file(&path).ok();
    eprintln!(
        "{N} ids × 4 stores, with content: id log {:.2} s, stores {:.2} s, classes {:.2} s, total {:.2} s",
        loaded.as_secs_f64(),
        (stored - loaded).as_secs_f64(),
        (total - stored).as_secs_f64(),
        total.as_secs_f64()
    );
    assert_eq!(expected.accepted + expected.uncertain, N as u64);
    assert_eq!(classes["extra in es"].total, 1);
    assert_eq!(classes["missing from mysql"].total + classes["missing from mongo"].total, 2);
    assert_eq!(classes["uncertain, stored"].total, N.div_ceil(1000) as u64);
    assert_eq!(classes["mismatched (redis)"].total, 10);
    assert_eq!(classes["not what was sent (redis)"].total, 10);
    assert_eq!(classes["mismatched (es)"].total + classes["mismatched (mongo)"].total, 0);
    assert_eq!(tally.sent_checked, N as u64 - 1, "every id MySQL holds was checked against what was sent");
    // Unoptimised builds hash and parse ~10 times slower; the bound is for the release build.
    if !cfg!(debug_assertions) {
        assert!(total.as_secs() < 30, "{total:?}");
    }
}
