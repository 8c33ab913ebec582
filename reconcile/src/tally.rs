//! The id table behind every id-level check: for each id, what the client was told about it and
//! sent, how many times each store holds it, and whether each store holds the same content.
//!
//! Memory is one map entry per id (the id and a row number) plus one dense row of bytes per id:
//! the expectation, then a hold count per store. The row width follows the number of stores, so
//! a fifth store costs one byte per id instead of overflowing a bitmask, and counts (not bits)
//! see an id a store holds twice whatever the store.
//!
//! Content is checked as the stores stream in, so no store's content is held beside another's:
//! the reference store (MySQL, the system of record, first in registry order) leaves its
//! fingerprint per id (48 bytes); every store after it is compared with that on arrival, and
//! every store with the digest the client logged of what it sent, when it logged one.

use crate::findings::{Class, Severity};
use pipeline_common::digest::Digest;
use pipeline_common::message::{shard_of, shard_table, SHARDS};
use pipeline_stores::{Audited, StoreKind};
use std::collections::HashMap;

/// The store every other is compared with.
pub(crate) const REFERENCE: StoreKind = StoreKind::Mysql;

/// What the client logged of an id's content: nothing, one digest, or several different ones
/// (the id was posted again with other content: which one is the last is the stores' version
/// rule, which the log cannot tell, so such an id is compared between stores only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    Unknown,
    One(u64),
    Several,
}

/// What the client learned about an id. Ordered: when a log names an id twice, the stronger
/// answer wins (accepted over uncertain over refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Expect {
    /// Not in the expected set (only a store holds it).
    Unknown = 0,
    /// 503 or 4xx: never written.
    Refused = 1,
    /// 504, a timeout, a lost connection: may be stored, at most once.
    Uncertain = 2,
    /// 202: must be in every store exactly once.
    Accepted = 3,
}

impl Expect {
    fn from_byte(b: u8) -> Expect {
        match b {
            3 => Expect::Accepted,
            2 => Expect::Uncertain,
            1 => Expect::Refused,
            _ => Expect::Unknown,
        }
    }
}

pub(crate) struct Tally {
    stores: Vec<StoreKind>,
    index: HashMap<Box<str>, u32>,
    /// Row `i` is `rows[i * stride .. (i + 1) * stride]`: expectation, then one count per store.
    rows: Vec<u8>,
    /// Per row: the digest the client logged of what it sent.
    sent: Vec<Sent>,
    /// Per row: the reference store's fingerprint (of the copy in its own shard table).
    reference: Vec<Option<Digest>>,
    /// Per store: rows held in a place other than the id's own (the MySQL shard table).
    misplaced: Vec<Class>,
    /// Per store: ids whose content differs from the reference store's, or cannot be read.
    mismatched: Vec<Class>,
    /// Per store: ids whose content is not what the client sent.
    not_sent: Vec<Class>,
    /// Ids whose content was compared with what the client sent, in at least one store.
    pub sent_checked: u64,
    /// The shard table names, made once rather than once per row.
    tables: Vec<String>,
    /// Judge only ids starting with this (`--only-prefix`): one run's ids in stores that held
    /// others before it. Stores list only these (`Audit::audit`'s prefix); the others are
    /// counted, never held in the table.
    scope: Option<String>,
    /// Per store: ids held in the scope, and all ids held (the drained count).
    in_scope: Vec<u64>,
    counted: Vec<u64>,
}

/// One id's row, borrowed.
pub(crate) struct Row<'a> {
    pub id: &'a str,
    pub expect: Expect,
    /// How many times each store (in [`Tally::stores`] order) holds the id.
    pub holds: &'a [u8],
}

impl Tally {
    pub(crate) fn new(stores: &[StoreKind]) -> Tally {
        Tally {
            stores: stores.to_vec(),
            index: HashMap::new(),
            rows: Vec::new(),
            sent: Vec::new(),
            reference: Vec::new(),
            misplaced: stores.iter().map(|_| Class::new(Severity::Failure)).collect(),
            mismatched: stores.iter().map(|_| Class::new(Severity::Failure)).collect(),
            not_sent: stores.iter().map(|_| Class::new(Severity::Failure)).collect(),
            sent_checked: 0,
            tables: (0..SHARDS).map(shard_table).collect(),
            scope: None,
            in_scope: vec![0; stores.len()],
            counted: vec![0; stores.len()],
        }
    }

    /// Judges only ids that start with `prefix` from now on (see `scope`).
    pub(crate) fn only_prefix(&mut self, prefix: &str) {
        self.scope = Some(prefix.to_string());
    }

    /// The prefix ids must start with to be judged ("" when all are).
    pub(crate) fn scope(&self) -> &str {
        self.scope.as_deref().unwrap_or_default()
    }

    /// Store number `store` held `n` messages in all (its drained count).
    pub(crate) fn counted(&mut self, store: usize, n: u64) {
        self.counted[store] = n;
    }

    /// Messages store number `store` holds outside the scope (none without one).
    pub(crate) fn outside(&self, store: usize) -> u64 {
        if self.scope.is_none() {
            return 0;
        }
        self.counted[store].saturating_sub(self.in_scope[store])
    }

    pub(crate) fn stores(&self) -> &[StoreKind] {
        &self.stores
    }

    fn stride(&self) -> usize {
        1 + self.stores.len()
    }

    /// Room for `n` more ids without rehashing.
    pub(crate) fn reserve(&mut self, n: usize) {
        self.index.reserve(n);
        self.rows.reserve(n * self.stride());
        self.sent.reserve(n);
        self.reference.reserve(n);
    }

    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    fn row_of(&mut self, id: &str) -> usize {
        if let Some(&i) = self.index.get(id) {
            return i as usize;
        }
        let i = self.index.len();
        self.index.insert(id.into(), i as u32);
        self.rows.resize(self.rows.len() + self.stride(), 0);
        self.sent.push(Sent::Unknown);
        self.reference.push(None);
        i
    }

    /// Records what the client was told about `id`, and the digest of what it sent if logged.
    pub(crate) fn expect(&mut self, id: &str, e: Expect, sent: Option<u64>) {
        let row = self.row_of(id);
        let at = row * self.stride();
        self.rows[at] = self.rows[at].max(e as u8);
        // Only what a store may hold counts: a refused request's content was never written.
        if let (Some(d), Expect::Accepted | Expect::Uncertain) = (sent, e) {
            self.sent[row] = match self.sent[row] {
                Sent::Unknown => Sent::One(d),
                Sent::One(prev) if prev == d => Sent::One(d),
                _ => Sent::Several,
            };
        }
    }

    /// Records every message store number `store` holds: where, and its content against the
    /// reference store's (which must have been added first) and against what was sent.
    pub(crate) fn add_store(&mut self, store: usize, held: Vec<Audited>) {
        let stride = self.stride();
        let kind = self.stores[store];
        let is_reference = kind == REFERENCE;
        for a in held {
            if !a.id.starts_with(self.scope()) {
                // A store that listed more than asked: not judged here, counted as outside.
                continue;
            }
            self.in_scope[store] += 1;
            if let Some(place) = a.place {
                if place != shard_of(&a.id) {
                    let table = self.tables.get(place as usize).cloned().unwrap_or_else(|| place.to_string());
                    self.misplaced[store].add_with(&a.id, || format!("{} in {table}", a.id));
                }
            }
            let row = self.row_of(&a.id);
            let at = row * stride + 1 + store;
            self.rows[at] = self.rows[at].saturating_add(1);
            let Some(digest) = a.digest else {
                self.mismatched[store].add_fields(&a.id, &["unreadable"], || format!("{}: not a message", a.id));
                continue;
            };
            if is_reference {
                // The copy in its own shard table is the one MySQL reads by id; a misplaced copy
                // is reported as such.
                if a.place.is_none_or(|p| p == shard_of(&a.id)) {
                    self.reference[row] = Some(digest);
                }
            } else if let Some(reference) = self.reference[row] {
                let fields = reference.differences(&digest);
                if !fields.is_empty() {
                    self.mismatched[store].add_fields(&a.id, &fields, || {
                        format!(
                            "{}: {} differ (mysql version {}, {kind} version {})",
                            a.id,
                            fields.join(", "),
                            reference.version,
                            digest.version
                        )
                    });
                }
            }
            if let Sent::One(sent) = self.sent[row] {
                if is_reference {
                    self.sent_checked += 1;
                }
                if sent != digest.sent {
                    self.not_sent[store].add_with(&a.id, || {
                        format!(
                            "{}: holds {}, the client sent {}",
                            a.id,
                            pipeline_common::digest::hex(digest.sent),
                            pipeline_common::digest::hex(sent)
                        )
                    });
                }
            }
        }
    }

    /// Ids whose content in store number `store` differs from the reference store's.
    pub(crate) fn mismatched(&self, store: usize) -> &Class {
        &self.mismatched[store]
    }

    /// Ids whose content in store number `store` is not what the client sent.
    pub(crate) fn not_sent(&self, store: usize) -> &Class {
        &self.not_sent[store]
    }

    /// The expectation recorded for `id` (`None` if neither the client nor a store named it).
    pub(crate) fn expect_of(&self, id: &str) -> Option<Expect> {
        self.index.get(id).map(|&i| Expect::from_byte(self.rows[i as usize * self.stride()]))
    }

    /// Rows placed in the wrong table, per store.
    pub(crate) fn misplaced(&self, store: usize) -> &Class {
        &self.misplaced[store]
    }

    /// Every id with its row, in no particular order.
    pub(crate) fn rows(&self) -> impl Iterator<Item = Row<'_>> {
        let stride = self.stride();
        self.index.iter().map(move |(id, &i)| {
            let row = &self.rows[i as usize * stride..(i as usize + 1) * stride];
            Row { id, expect: Expect::from_byte(row[0]), holds: &row[1..] }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sid(id: &str, place: Option<u32>) -> Audited {
        Audited { id: id.into(), place, digest: Some(fp("body", 1)) }
    }

    fn fp(body: &str, version: u64) -> Digest {
        let stored = pipeline_common::digest::Stored {
            sender: "a",
            recipient: "b",
            body,
            sent_at: time::macros::datetime!(2026-12-01 00:00 UTC),
            version,
        };
        Digest::of(stored)
    }

    #[test]
    fn content_is_compared_with_the_reference_and_with_what_was_sent() {
        let mut t = Tally::new(&StoreKind::ALL);
        let sent = fp("body", 1).sent;
        t.expect("same", Expect::Accepted, Some(sent));
        t.expect("changed", Expect::Accepted, Some(sent));
        t.expect("twice", Expect::Accepted, Some(sent));
        t.expect("twice", Expect::Accepted, Some(fp("other", 2).sent));
        t.expect("refused", Expect::Refused, Some(fp("never", 1).sent));
        let all = |body: &str, v: u64| {
            ["same", "changed", "twice", "refused"]
                .iter()
                .map(|id| Audited { id: id.to_string(), place: None, digest: Some(fp(body, v)) })
                .collect::<Vec<_>>()
        };
        t.add_store(0, all("body", 1));
        let mut redis = all("body", 1);
        redis[1].digest = Some(fp("bodY", 2));
        redis[2].digest = None;
        t.add_store(1, redis);
        t.add_store(2, all("body", 1));
        assert_eq!(t.mismatched(0).total + t.mismatched(2).total, 0);
        assert_eq!(t.mismatched(1).total, 2, "changed and unreadable");
        assert_eq!(t.mismatched(1).fields.get("body"), Some(&1));
        assert_eq!(t.mismatched(1).fields.get("version"), Some(&1));
        assert_eq!(t.mismatched(1).fields.get("unreadable"), Some(&1));
        assert_eq!(t.not_sent(1).total, 1, "changed: not what was sent");
        assert_eq!(
            t.not_sent(0).total,
            0,
            "twice has two digests: compared between stores only; refused: never stored content"
        );
        assert_eq!(t.sent_checked, 2, "same and changed");
    }

    #[test]
    fn counts_holds_per_store_and_keeps_the_strongest_expectation() {
        let mut t = Tally::new(&StoreKind::ALL);
        t.expect("a", Expect::Uncertain, None);
        t.expect("a", Expect::Accepted, None);
        t.expect("a", Expect::Refused, None);
        let a = shard_of("a");
        let wrong = shard_table((shard_of("a") + 1) % 16);
        t.add_store(0, vec![sid("a", Some(a)), sid("a", Some((a + 1) % 16))]);
        t.add_store(2, vec![sid("b", None)]);
        assert_eq!(t.expect_of("a"), Some(Expect::Accepted));
        assert_eq!(t.expect_of("b"), Some(Expect::Unknown));
        assert_eq!(t.expect_of("c"), None);
        let rows: HashMap<&str, Vec<u8>> = t.rows().map(|r| (r.id, r.holds.to_vec())).collect();
        assert_eq!(rows["a"], [2, 0, 0, 0]);
        assert_eq!(rows["b"], [0, 0, 1, 0]);
        assert_eq!(t.misplaced(0).total, 1);
        assert_eq!(t.misplaced(0).examples().next(), Some(format!("a in {wrong}").as_str()));
    }

    #[test]
    fn a_prefix_judges_one_runs_ids_and_only_counts_the_rest() {
        // A store pre-filled with `fill-*` before the run `r1-*`: the fill is counted, not
        // judged; the run's ids are judged as ever (r1-b missing from the second store).
        let mut t = Tally::new(&StoreKind::ALL);
        t.only_prefix("r1-");
        t.expect("r1-a", Expect::Accepted, None);
        t.expect("r1-b", Expect::Accepted, None);
        let fill: Vec<Audited> =
            (0..5).map(|i| sid(&format!("fill-{i}"), Some(shard_of(&format!("fill-{i}"))))).collect();
        let run = |ids: &[&str]| ids.iter().map(|id| sid(id, Some(shard_of(id)))).collect::<Vec<_>>();
        t.add_store(0, [fill.clone(), run(&["r1-a", "r1-b"])].concat());
        t.add_store(1, [fill, run(&["r1-a"])].concat());
        for (store, n) in [(0, 7), (1, 6), (2, 0)] {
            t.counted(store, n);
        }
        assert_eq!(t.len(), 2, "only the run's ids are rows");
        assert_eq!((t.outside(0), t.outside(1), t.outside(2)), (5, 5, 0));
        let rows: HashMap<&str, Vec<u8>> = t.rows().map(|r| (r.id, r.holds.to_vec())).collect();
        assert_eq!(rows["r1-b"], [1, 0, 0, 0]);
        let classes =
            crate::classify::classify(&t, &crate::dlq::DeadLetters::default(), crate::classify::Mode::Expected);
        let outside = &classes[&crate::classify::outside(StoreKind::ALL[0])];
        assert_eq!((outside.total, outside.fails()), (5, false));
        assert!(!classes.contains_key(&crate::classify::outside(StoreKind::ALL[2])), "nothing outside");
        assert_eq!(classes[&crate::classify::missing(StoreKind::ALL[1])].total, 1, "r1-b");
        assert_eq!(classes[&crate::classify::missing(StoreKind::ALL[2])].total, 2, "r1-a and r1-b");
    }

    #[test]
    fn rows_grow_with_the_number_of_stores() {
        let kinds = [StoreKind::Mysql; 9];
        let mut t = Tally::new(&kinds);
        for s in 0..9 {
            t.add_store(s, vec![sid("x", None)]);
        }
        let rows: Vec<Vec<u8>> = t.rows().map(|r| r.holds.to_vec()).collect();
        assert_eq!(rows, [vec![1; 9]], "nine stores, no bitmask overflow");
    }
}
