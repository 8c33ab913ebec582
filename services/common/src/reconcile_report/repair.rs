//! `repair`: every chosen store rebuilt from the reference store (MySQL).

use super::Examples;
use serde::{Deserialize, Serialize};

/// What a repair found and did in one store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairedStore {
    /// The store's name (`redis`, `es`, `mongo`).
    pub store: String,
    /// Ids the reference holds and the store lacks.
    pub missing: Examples,
    /// Ids whose content differs from the reference's.
    pub mismatched: Examples,
    /// Ids the store holds at a newer version than the reference: never overwritten.
    pub newer_than_reference: Examples,
    /// Ids the reference does not hold: deleted only with `--delete-extra`.
    pub extra: Examples,
    /// Messages written from the reference.
    pub repaired: u64,
    /// Extra ids deleted.
    pub deleted: u64,
    /// Writes the store refused.
    pub refused: Examples,
    /// Ids that still differ after the repair.
    pub still_different: Examples,
}

/// `repair`, as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairReport {
    /// Always true; the field that tells this report from the others.
    pub repair: bool,
    pub dry_run: bool,
    /// The reference store's name (`mysql`).
    pub reference: String,
    /// Ids the reference holds.
    pub reference_ids: u64,
    pub stores: Vec<RepairedStore>,
    /// Every store agrees with the reference afterwards (a dry run: nothing to do).
    pub ok: bool,
    /// The outcome in a sentence (`NOTHING TO DO`, `REPAIRED`, ...).
    pub message: String,
}

impl RepairReport {
    /// The store's entry, when the repair covered it.
    pub fn store(&self, name: &str) -> Option<&RepairedStore> {
        self.stores.iter().find(|s| s.store == name)
    }
}
