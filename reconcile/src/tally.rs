//! The id table behind every id-level check: for each id, what the client was told about it and
//! how many times each store holds it.
//!
//! Memory is one map entry per id (the id and a row number) plus one dense row of bytes per id:
//! the expectation, then a hold count per store. The row width follows the number of stores, so
//! a fifth store costs one byte per id instead of overflowing a bitmask, and counts (not bits)
//! see an id a store holds twice whatever the store.

use crate::class::{Class, Severity};
use pipeline_common::message::{shard_of, shard_table, SHARDS};
use pipeline_stores::{StoreKind, StoredId};
use std::collections::HashMap;

/// What the client learned about an id. Ordered: when a log names an id twice, the stronger
/// answer wins (accepted over uncertain over refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Expect {
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

pub struct Tally {
    stores: Vec<StoreKind>,
    index: HashMap<Box<str>, u32>,
    /// Row `i` is `rows[i * stride .. (i + 1) * stride]`: expectation, then one count per store.
    rows: Vec<u8>,
    /// Per store: rows held in a place other than the id's own (the MySQL shard table).
    misplaced: Vec<Class>,
    /// The shard table names, made once rather than once per row.
    tables: Vec<String>,
}

/// One id's row, borrowed.
pub struct Row<'a> {
    pub id: &'a str,
    pub expect: Expect,
    /// How many times each store (in [`Tally::stores`] order) holds the id.
    pub holds: &'a [u8],
}

impl Tally {
    pub fn new(stores: &[StoreKind]) -> Tally {
        Tally {
            stores: stores.to_vec(),
            index: HashMap::new(),
            rows: Vec::new(),
            misplaced: stores.iter().map(|_| Class::new(Severity::Failure)).collect(),
            tables: (0..SHARDS).map(shard_table).collect(),
        }
    }

    pub fn stores(&self) -> &[StoreKind] {
        &self.stores
    }

    fn stride(&self) -> usize {
        1 + self.stores.len()
    }

    /// Room for `n` more ids without rehashing.
    pub fn reserve(&mut self, n: usize) {
        self.index.reserve(n);
        self.rows.reserve(n * self.stride());
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    fn row_of(&mut self, id: &str) -> usize {
        if let Some(&i) = self.index.get(id) {
            return i as usize;
        }
        let i = self.index.len();
        self.index.insert(id.into(), i as u32);
        self.rows.resize(self.rows.len() + self.stride(), 0);
        i
    }

    /// Records what the client was told about `id`.
    pub fn expect(&mut self, id: &str, e: Expect) {
        let at = self.row_of(id) * self.stride();
        self.rows[at] = self.rows[at].max(e as u8);
    }

    /// Records every id store number `store` holds, and where.
    pub fn add_store(&mut self, store: usize, ids: Vec<StoredId>) {
        let stride = self.stride();
        for sid in ids {
            if let Some(place) = &sid.place {
                let own = &self.tables[shard_of(&sid.id) as usize];
                if place != own {
                    self.misplaced[store].add_with(&sid.id, || format!("{} in {place}", sid.id));
                }
            }
            let at = self.row_of(&sid.id) * stride + 1 + store;
            self.rows[at] = self.rows[at].saturating_add(1);
        }
    }

    /// The expectation recorded for `id` (`None` if neither the client nor a store named it).
    pub fn expect_of(&self, id: &str) -> Option<Expect> {
        self.index.get(id).map(|&i| Expect::from_byte(self.rows[i as usize * self.stride()]))
    }

    /// Rows placed in the wrong table, per store.
    pub fn misplaced(&self, store: usize) -> &Class {
        &self.misplaced[store]
    }

    /// Every id with its row, in no particular order.
    pub fn rows(&self) -> impl Iterator<Item = Row<'_>> {
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

    fn sid(id: &str, place: Option<&str>) -> StoredId {
        StoredId { id: id.into(), place: place.map(String::from) }
    }

    #[test]
    fn counts_holds_per_store_and_keeps_the_strongest_expectation() {
        let mut t = Tally::new(&StoreKind::ALL);
        t.expect("a", Expect::Uncertain);
        t.expect("a", Expect::Accepted);
        t.expect("a", Expect::Refused);
        let a = shard_table(shard_of("a"));
        let wrong = shard_table((shard_of("a") + 1) % 16);
        t.add_store(0, vec![sid("a", Some(&a)), sid("a", Some(&wrong))]);
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
