//! The set logic without servers: stores are in-memory id lists.

use super::*;
use pipeline_common::digest::{Digest, Stored};
use pipeline_common::message::{shard_of, shard_table};
use pipeline_stores::Audited;

const ALL: [StoreKind; 4] = StoreKind::ALL;

/// A store's ids; MySQL ids get their own shard table as place.
fn held(kind: StoreKind, ids: &[&str]) -> Vec<Audited> {
    ids.iter()
        .map(|id| Audited {
            id: id.to_string(),
            place: (kind == StoreKind::Mysql).then(|| shard_of(id)),
            digest: Some(same()),
        })
        .collect()
}

/// The same content for every id (content is tested in `tally`).
fn same() -> Digest {
    let at = time::macros::datetime!(2026-12-01 00:00 UTC);
    Digest::of(Stored { sender: "a", recipient: "b", body: "c", sent_at: at, version: 1 })
}

/// A tally with `expect` loaded and `per_store[i]` held by store i.
fn tally(expect: &[(&str, Expect)], per_store: [Vec<&str>; 4]) -> Tally {
    let mut t = Tally::new(&ALL);
    for (id, e) in expect {
        t.expect(id, *e, None);
    }
    for (i, ids) in per_store.iter().enumerate() {
        t.add_store(i, held(ALL[i], ids));
    }
    t
}

/// Non-zero classes: name → (total, failure, examples).
fn nonzero(c: &Classes) -> Vec<(&str, u64, bool, Vec<&str>)> {
    c.iter()
        .filter(|(_, v)| v.total > 0)
        .map(|(k, v)| (k.as_str(), v.total, v.fails(), v.examples().collect()))
        .collect()
}

fn dead(id: &str, store: &str) -> DeadLetters {
    let mut d = DeadLetters::default();
    let header = format!("{store}: refused for good");
    d.add(
        Some(id.as_bytes()),
        Some(format!(r#"{{"id":"{id}"}}"#).as_bytes()),
        &[("error", Some(header.as_bytes()))],
        "0:0",
    );
    d
}

#[test]
fn equal_totals_hide_nothing_at_id_level() {
    // "lost" is in no store, "stray" is in redis only: every store holds 2 ids, 2 were accepted.
    let t = tally(
        &[("a", Expect::Accepted), ("lost", Expect::Accepted)],
        [vec!["a", "stray"], vec!["a", "stray"], vec!["a", "stray"], vec!["a", "stray"]],
    );
    let c = classify(&t, &DeadLetters::default(), Mode::Expected);
    let found = nonzero(&c);
    assert_eq!(found.len(), 8, "{found:?}");
    assert!(found.contains(&("missing from es", 1, true, vec!["lost"])));
    assert!(found.contains(&("extra in redis", 1, true, vec!["stray"])));
}

#[test]
fn uncertain_ids_may_be_stored_or_not_but_not_partly() {
    let t = tally(
        &[
            ("a", Expect::Accepted),
            ("u-in", Expect::Uncertain),
            ("u-out", Expect::Uncertain),
            ("u-half", Expect::Uncertain),
        ],
        [vec!["a", "u-in", "u-half"], vec!["a", "u-in", "u-half"], vec!["a", "u-in"], vec!["a", "u-in"]],
    );
    let c = classify(&t, &DeadLetters::default(), Mode::Expected);
    assert_eq!(
        nonzero(&c),
        [
            (UNCERTAIN_PARTLY, 1, true, vec!["u-half (not in es, mongo)"]),
            (UNCERTAIN_NOT_STORED, 1, false, vec!["u-out"]),
            (UNCERTAIN_STORED, 1, false, vec!["u-in"]),
        ]
    );
}

#[test]
fn refused_ids_must_not_be_stored() {
    let t = tally(&[("r", Expect::Refused), ("r2", Expect::Refused)], [vec!["r"], vec![], vec![], vec![]]);
    let c = classify(&t, &DeadLetters::default(), Mode::Expected);
    assert_eq!(nonzero(&c), [("refused but in mysql", 1, true, vec!["r"])]);
}

#[test]
fn twice_in_mysql_is_duplicated_and_misplaced() {
    let mut t = tally(&[("d", Expect::Accepted)], [vec![], vec!["d"], vec!["d"], vec!["d"]]);
    let other = shard_table((shard_of("d") + 1) % 16);
    t.add_store(0, vec![Audited { id: "d".into(), place: Some(shard_of("d")), digest: Some(same()) }]);
    t.add_store(0, vec![Audited { id: "d".into(), place: Some((shard_of("d") + 1) % 16), digest: Some(same()) }]);
    let c = classify(&t, &DeadLetters::default(), Mode::Expected);
    let in_other = format!("d in {other}");
    assert_eq!(
        nonzero(&c),
        [("duplicated (mysql)", 1, true, vec!["d"]), ("wrong shard (mysql)", 1, true, vec![in_other.as_str()])]
    );
}

#[test]
fn a_dead_lettered_accepted_id_is_reported_as_such_not_as_missing() {
    let t = tally(&[("p", Expect::Accepted)], [vec!["p"], vec!["p"], vec![], vec!["p"]]);
    let c = classify(&t, &dead("p", "es"), Mode::Expected);
    assert_eq!(nonzero(&c), [(DL_ACCEPTED, 1, true, vec!["p (es: refused for good)"])]);
    // A decode failure explains every store; an uncertain id dead-lettered is only information.
    let t = tally(&[("q", Expect::Uncertain)], [vec![], vec![], vec![], vec![]]);
    let c = classify(&t, &dead("q", "decode"), Mode::Expected);
    assert_eq!(nonzero(&c), [(DL_UNCERTAIN, 1, false, vec!["q (decode: refused for good)"])]);
    // Dead-lettered by es does not explain an absence from redis.
    let t = tally(&[("p", Expect::Accepted)], [vec!["p"], vec![], vec![], vec!["p"]]);
    let c = classify(&t, &dead("p", "es"), Mode::Expected);
    let found = nonzero(&c);
    assert_eq!(found.len(), 2);
    assert!(found.contains(&("missing from redis", 1, true, vec!["p"])));
}

#[test]
fn dead_letters_of_other_runs_and_without_id_only_inform() {
    let t = tally(&[("a", Expect::Accepted)], [vec!["a"], vec!["a"], vec!["a"], vec!["a"]]);
    let mut d = dead("old-run", "mongo");
    d.add(Some(b"1:5"), Some(b"garbage"), &[("error", Some(b"decode: not a message"))], "1:5");
    let c = classify(&t, &d, Mode::Expected);
    let found = nonzero(&c);
    assert_eq!(
        found,
        [
            (DL_NO_ID, 1, false, vec!["1:5 (decode: not a message)"]),
            (DL_OTHER, 1, false, vec!["old-run (mongo: refused for good)"])
        ]
    );
}

#[test]
fn stores_only_reports_disagreements_and_cannot_see_ids_missing_everywhere() {
    let t = tally(&[], [vec!["a", "b"], vec!["a"], vec!["a", "b"], vec!["a", "b"]]);
    let c = classify(&t, &DeadLetters::default(), Mode::StoresOnly);
    assert_eq!(nonzero(&c), [("absent from redis, held by another store", 1, true, vec!["b"])]);
    assert!(!c.contains_key("missing from redis"), "no class pretends to know what was expected");
}

#[test]
fn nine_stores_are_no_problem() {
    let kinds = [StoreKind::Redis; 9];
    let mut t = Tally::new(&kinds);
    t.expect("x", Expect::Accepted, None);
    for s in 0..8 {
        t.add_store(s, held(StoreKind::Redis, &["x"]));
    }
    let c = classify(&t, &DeadLetters::default(), Mode::Expected);
    assert_eq!(c["missing from redis"].total, 1, "the ninth store lacks it");
}
