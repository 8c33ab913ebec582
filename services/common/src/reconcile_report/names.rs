//! The names of a [`CheckReport`](super::CheckReport)'s classes, the keys of its `classes`.
//!
//! reconcile names its classes with these, and readers look classes up with them: a reader that
//! counts "missing from es" asks for `missing("es")`, not for a string it spelled itself. The
//! per-store names take the store's name (`mysql`, or anything that displays as it).

use std::fmt::Display;

/// Accepted ids dead-lettered by a store: a broken promise, reported apart from "missing".
pub const DL_ACCEPTED: &str = "dead-lettered (accepted)";
/// Refused ids that were dead-lettered all the same.
pub const DL_REFUSED: &str = "dead-lettered (refused)";
/// Uncertain ids dead-lettered: explains why they are not stored (information).
pub const DL_UNCERTAIN: &str = "dead-lettered (uncertain)";
/// Dead letters of ids nobody expected (information).
pub const DL_OTHER: &str = "dead-lettered (other ids)";
/// Every dead letter, when no ids were expected (`--stores-only`).
pub const DL_ANY: &str = "dead-lettered";
/// Dead letters whose record names no id (information).
pub const DL_NO_ID: &str = "dead letters without id";
/// Uncertain ids some stores hold and others do not: a failure.
pub const UNCERTAIN_PARTLY: &str = "uncertain, in some stores only";
/// Uncertain ids every store holds (information: the 202 was lost, the message was not).
pub const UNCERTAIN_STORED: &str = "uncertain, stored";
/// Uncertain ids no store holds (information).
pub const UNCERTAIN_NOT_STORED: &str = "uncertain, not stored";

/// Accepted ids the store lacks: lost messages.
pub fn missing(store: impl Display) -> String {
    format!("missing from {store}")
}
/// Ids outside `--only-prefix` the store holds: counted, not judged.
pub fn outside(store: impl Display) -> String {
    format!("outside --only-prefix, in {store} (not judged)")
}
/// Ids the store holds that nobody sent.
pub fn extra(store: impl Display) -> String {
    format!("extra in {store}")
}
/// Refused ids the store holds all the same.
pub fn refused_in(store: impl Display) -> String {
    format!("refused but in {store}")
}
/// Ids the store holds more than once.
pub fn duplicated(store: impl Display) -> String {
    format!("duplicated ({store})")
}
/// MySQL rows outside their own shard table.
pub fn wrong_shard(store: impl Display) -> String {
    format!("wrong shard ({store})")
}
/// Stores-only: ids another store holds and this one does not.
pub fn absent_elsewhere(store: impl Display) -> String {
    format!("absent from {store}, held by another store")
}
/// Ids whose content in the store differs from the reference store's.
pub fn mismatched(store: impl Display) -> String {
    format!("mismatched ({store})")
}
/// Ids whose content in the store differs from the digest the client logged of what it sent.
pub fn not_sent(store: impl Display) -> String {
    format!("not what was sent ({store})")
}
