//! The verdict per id: which class each id of the tally falls in, store by store.
//!
//! With an expected set the rule per store is: accepted ⊆ stored ⊆ accepted ∪ uncertain, no id
//! twice, MySQL rows in their own shard table. On top of that:
//! - an uncertain id held by some stores but not others is a failure: once one store holds it,
//!   the writer consumed it from Kafka, and the writer writes every consumed record to every
//!   store (or dead-letters it for that store);
//! - an id a store refused for good (a dead letter naming that store, or `decode`) is reported
//!   as dead-lettered, not as missing: for an accepted id that is still a broken promise (exit 1),
//!   for an uncertain one it explains why it is not stored.
//!
//! Without an expected set ([`Mode::StoresOnly`]) an id missing from every store is invisible,
//! so only disagreements between stores are reported, under names that say so.
//!
//! Content, in both modes: every store's copy of an id against the reference store's (MySQL)
//! — **mismatched**, with the fields that differ — and, when the client logged a digest of what
//! it sent, every store's copy against that — **not what was sent** (`crate::tally`).

use crate::dlq::{DeadLetter, DeadLetters};
use crate::findings::{Class, Severity};
use crate::tally::{Expect, Tally, REFERENCE};
use pipeline_stores::StoreKind;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Against the expected ids loaded into the tally.
    Expected,
    /// No expected set: the stores against each other only.
    StoresOnly,
}

pub(crate) type Classes = BTreeMap<String, Class>;

// The names are the report's contract with its readers (`pipeline_common::reconcile_report`).
pub(crate) use pipeline_common::reconcile_report::names::{
    absent_elsewhere, duplicated, extra, mismatched, missing, not_sent, outside, refused_in, wrong_shard, DL_ACCEPTED,
    DL_ANY, DL_NO_ID, DL_OTHER, DL_REFUSED, DL_UNCERTAIN, UNCERTAIN_NOT_STORED, UNCERTAIN_PARTLY, UNCERTAIN_STORED,
};

/// Every class, zero or not, so that JSON readers always find them.
fn empty(stores: &[StoreKind], mode: Mode) -> Classes {
    use Severity::*;
    let mut c = Classes::new();
    let mut put = |name: String, sev| {
        c.insert(name, Class::new(sev));
    };
    for &s in stores {
        put(duplicated(s), Failure);
        if s == StoreKind::Mysql {
            put(wrong_shard(s), Failure);
        }
        if s != REFERENCE {
            put(mismatched(s), Failure);
        }
        match mode {
            Mode::Expected => {
                put(not_sent(s), Failure);
                put(missing(s), Failure);
                put(extra(s), Failure);
                put(refused_in(s), Failure);
            }
            Mode::StoresOnly => put(absent_elsewhere(s), Failure),
        }
    }
    if mode == Mode::Expected {
        put(DL_ACCEPTED.into(), Failure);
        put(DL_REFUSED.into(), Failure);
        put(DL_UNCERTAIN.into(), Info);
        put(UNCERTAIN_PARTLY.into(), Failure);
        put(UNCERTAIN_STORED.into(), Info);
        put(UNCERTAIN_NOT_STORED.into(), Info);
    }
    put(if mode == Mode::Expected { DL_OTHER } else { DL_ANY }.into(), Info);
    put(DL_NO_ID.into(), Info);
    c
}

/// Whether a dead letter accounts for the id's absence from `store`.
fn explains(dead: Option<&Vec<DeadLetter>>, store: StoreKind) -> bool {
    dead.is_some_and(|d| d.iter().any(|d| d.store == store.name() || d.store == "decode" || d.store == "unknown"))
}

fn dead_detail(id: &str, dead: &[DeadLetter]) -> String {
    let why: Vec<String> = dead
        .iter()
        .map(|d| {
            if d.reason.starts_with(&format!("{}:", d.store)) {
                d.reason.clone()
            } else {
                format!("{}: {}", d.store, d.reason)
            }
        })
        .collect();
    format!("{id} ({})", why.join("; "))
}

fn class<'a>(c: &'a mut Classes, name: &str) -> &'a mut Class {
    // Every name is created by `empty`; an unknown one is a programming error, kept visible.
    c.entry(name.to_string()).or_insert_with(|| Class::new(Severity::Failure))
}

/// Sorts every id of the tally (and every dead letter) into classes.
pub(crate) fn classify(tally: &Tally, dead: &DeadLetters, mode: Mode) -> Classes {
    let stores = tally.stores();
    let mut c = empty(stores, mode);
    for (i, &s) in stores.iter().enumerate() {
        if tally.misplaced(i).total > 0 {
            *class(&mut c, &wrong_shard(s)) = tally.misplaced(i).clone();
        }
        if tally.mismatched(i).total > 0 {
            *class(&mut c, &mismatched(s)) = tally.mismatched(i).clone();
        }
        if mode == Mode::Expected && tally.not_sent(i).total > 0 {
            *class(&mut c, &not_sent(s)) = tally.not_sent(i).clone();
        }
        if tally.outside(i) > 0 {
            let mut held = Class::new(Severity::Info);
            held.total = tally.outside(i);
            c.insert(outside(s), held);
        }
    }
    for row in tally.rows() {
        let held = row.holds.iter().filter(|&&h| h > 0).count();
        let dl = dead.by_id.get(row.id);
        for (&s, _) in stores.iter().zip(row.holds).filter(|(_, &h)| h > 1) {
            class(&mut c, &duplicated(s)).add(row.id);
        }
        let absent = || stores.iter().zip(row.holds).filter(|(_, &h)| h == 0).map(|(&s, _)| s);
        match (mode, row.expect) {
            (Mode::StoresOnly, _) => {
                if held > 0 && held < stores.len() {
                    for s in absent().filter(|&s| !explains(dl, s)) {
                        class(&mut c, &absent_elsewhere(s)).add(row.id);
                    }
                }
            }
            (Mode::Expected, Expect::Accepted) => {
                for s in absent().filter(|&s| !explains(dl, s)) {
                    class(&mut c, &missing(s)).add(row.id);
                }
            }
            (Mode::Expected, Expect::Uncertain) => {
                let unexplained: Vec<StoreKind> = absent().filter(|&s| !explains(dl, s)).collect();
                if held == stores.len() {
                    class(&mut c, UNCERTAIN_STORED).add(row.id);
                } else if held == 0 && dl.is_none() {
                    class(&mut c, UNCERTAIN_NOT_STORED).add(row.id);
                } else if held > 0 && !unexplained.is_empty() {
                    class(&mut c, UNCERTAIN_PARTLY).add_with(row.id, || {
                        let names: Vec<&str> = unexplained.iter().map(|s| s.name()).collect();
                        format!("{} (not in {})", row.id, names.join(", "))
                    });
                }
            }
            (Mode::Expected, Expect::Refused) => {
                for (&s, _) in stores.iter().zip(row.holds).filter(|(_, &h)| h > 0) {
                    class(&mut c, &refused_in(s)).add(row.id);
                }
            }
            (Mode::Expected, Expect::Unknown) => {
                for (&s, _) in stores.iter().zip(row.holds).filter(|(_, &h)| h > 0) {
                    class(&mut c, &extra(s)).add(row.id);
                }
            }
        }
    }
    for (id, dl) in &dead.by_id {
        let name = match (mode, tally.expect_of(id)) {
            (Mode::Expected, Some(Expect::Accepted)) => DL_ACCEPTED,
            (Mode::Expected, Some(Expect::Uncertain)) => DL_UNCERTAIN,
            (Mode::Expected, Some(Expect::Refused)) => DL_REFUSED,
            (Mode::Expected, _) => DL_OTHER,
            (Mode::StoresOnly, _) => DL_ANY,
        };
        class(&mut c, name).add_with(id, || dead_detail(id, dl));
    }
    let no_id = class(&mut c, DL_NO_ID);
    for (key, reason) in &dead.without_id {
        no_id.add_example(key, format!("{key} ({reason})"));
    }
    c
}

#[cfg(test)]
#[path = "classify_tests.rs"]
mod tests;
