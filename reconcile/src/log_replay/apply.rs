//! One store's side of a replay: compare a chunk of messages from the log with what the store
//! holds, write those it lacks, and at the end read every replayed id back.
//!
//! Each id is fetched before anything is written, so the replay writes only what a store misses
//! (or holds older, or damaged), a dry run can say exactly what it would write, and a second
//! replay writes nothing.

use crate::findings::{Class, Severity};
use crate::patient;
use pipeline_common::digest::Digest;
use pipeline_common::Message;
use pipeline_stores::{Overwrite, Store, StoreKind};
use std::collections::{BTreeMap, HashMap, HashSet};

/// How one stored copy compares with the message from the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Held {
    /// Not held (or not as a message).
    Missing,
    Older,
    /// This version, with this content.
    Same,
    Newer,
    /// This version with other content: damage, since the ingest gives one content one version.
    Damaged,
    /// Version 0 (written before versions) with other content: two unversioned messages of one
    /// id tie under the version rule and each store keeps the first it got, so this is not damage
    /// and the replay leaves it.
    UnversionedTie,
}

impl Held {
    pub(crate) fn of(stored: Option<&Digest>, want: &Digest) -> Held {
        match stored {
            None => Held::Missing,
            Some(d) if d.version < want.version => Held::Older,
            Some(d) if d.version > want.version => Held::Newer,
            Some(d) if d == want => Held::Same,
            Some(_) if want.version == 0 => Held::UnversionedTie,
            Some(_) => Held::Damaged,
        }
    }

    /// Whether the replay writes the log's message over it.
    pub(crate) fn to_write(self) -> bool {
        matches!(self, Held::Missing | Held::Older | Held::Damaged)
    }
}

/// What one store needed and got, over the whole replay.
pub(crate) struct StoreTally {
    pub store: StoreKind,
    /// Messages the store lacked, by the partition of the record they came from: written (or,
    /// in a dry run, to be written).
    pub to_write: BTreeMap<i32, u64>,
    /// Written and acknowledged.
    pub written: u64,
    /// Already held at the log's version or a newer one.
    pub held: u64,
    /// Refused for good by the store when written (its reason in the examples).
    pub refused: Class,
    /// Ids refused, left out of the read-back (they are reported once, as refused).
    pub refused_ids: HashSet<String>,
    /// Version 0 held with other content: left as it is (see [`Held::UnversionedTie`]).
    pub unversioned: Class,
    /// The read-back, absent in a dry run.
    pub verify: Option<Verify>,
}

impl StoreTally {
    pub(crate) fn new(store: StoreKind) -> StoreTally {
        StoreTally {
            store,
            to_write: BTreeMap::new(),
            written: 0,
            held: 0,
            refused: Class::new(Severity::Failure),
            refused_ids: HashSet::new(),
            unversioned: Class::new(Severity::Info),
            verify: None,
        }
    }

    pub(crate) fn to_write_total(&self) -> u64 {
        self.to_write.values().sum()
    }
}

/// What the read-back found: every replayed id should be held at its version or newer.
pub(crate) struct Verify {
    pub checked: u64,
    pub missing: Class,
    pub older: Class,
    /// The replayed version with other content.
    pub different: Class,
}

impl Verify {
    pub(crate) fn clean(&self) -> bool {
        !(self.missing.fails() || self.older.fails() || self.different.fails())
    }
}

/// Compares one chunk (each id once, with the partition its record came from) with what `store`
/// holds and, unless a dry run, writes what it lacks.
pub(crate) async fn chunk(
    store: &dyn Store,
    msgs: &[(i32, Message)],
    dry_run: bool,
    tally: &mut StoreTally,
) -> anyhow::Result<()> {
    let ids: Vec<String> = msgs.iter().map(|(_, m)| m.id.clone()).collect();
    let held: HashMap<String, Digest> =
        patient::fetch(store, &ids).await?.into_iter().map(|m| (m.id.clone(), Digest::of_message(&m))).collect();
    let mut todo: Vec<Message> = Vec::new();
    for (p, m) in msgs {
        match Held::of(held.get(&m.id), &Digest::of_message(m)) {
            h if h.to_write() => {
                *tally.to_write.entry(*p).or_default() += 1;
                todo.push(m.clone());
            }
            Held::UnversionedTie => tally.unversioned.add(&m.id),
            _ => tally.held += 1,
        }
    }
    if dry_run || todo.is_empty() {
        return Ok(());
    }
    // `OlderOrSame`, as repair writes, not the writer's `Older`: the log's record is the original
    // of its version, so a copy of the same version with other content (damaged) is replaced by
    // it, and a newer version still never is; replay beside a live writer stays safe. A message
    // the store already holds as it is was left out above, so a second replay writes nothing.
    let refused = patient::write(store, &todo, Overwrite::OlderOrSame).await?;
    tally.written += todo.len().saturating_sub(refused.len()) as u64;
    for r in refused {
        tally.refused.add_with(&r.id, || format!("{}: {}", r.id, r.reason));
        tally.refused_ids.insert(r.id);
    }
    Ok(())
}

/// Reads back every replayed id (`want`: the newest version the replay saw of each) and checks
/// that the store holds it at that version or newer, with the log's content at that version.
pub(crate) async fn verify(
    store: &dyn Store,
    ids: &[String],
    want: &HashMap<String, Digest>,
    skip: &HashSet<String>,
    batch: usize,
) -> anyhow::Result<Verify> {
    let c = || Class::new(Severity::Failure);
    let mut v = Verify { checked: 0, missing: c(), older: c(), different: c() };
    let ids: Vec<String> = ids.iter().filter(|id| !skip.contains(*id)).cloned().collect();
    for part in ids.chunks(batch.max(1)) {
        let held: HashMap<String, Digest> =
            patient::fetch(store, part).await?.into_iter().map(|m| (m.id.clone(), Digest::of_message(&m))).collect();
        for id in part {
            let Some(w) = want.get(id) else { continue };
            v.checked += 1;
            match (Held::of(held.get(id), w), held.get(id)) {
                (Held::Missing, _) => v.missing.add(id),
                (Held::Older, Some(d)) => {
                    v.older.add_with(id, || format!("{id}: holds version {}, the log {}", d.version, w.version))
                }
                (Held::Damaged, _) => {
                    let fields = held.get(id).map(|d| w.differences(d)).unwrap_or_default();
                    v.different.add_fields(id, &fields, || format!("{id}: {}", fields.join(", ")))
                }
                _ => {}
            }
        }
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(version: u64, body: u64) -> Digest {
        Digest { version, fields: [1, 2, body, 4], sent: 0 }
    }

    #[test]
    fn the_version_rule_decides_what_is_written() {
        let want = d(5, 7);
        assert_eq!(Held::of(None, &want), Held::Missing);
        assert_eq!(Held::of(Some(&d(4, 7)), &want), Held::Older);
        assert_eq!(Held::of(Some(&d(5, 7)), &want), Held::Same);
        assert_eq!(Held::of(Some(&d(6, 1)), &want), Held::Newer);
        assert_eq!(Held::of(Some(&d(5, 8)), &want), Held::Damaged);
        assert_eq!(Held::of(Some(&d(0, 8)), &d(0, 7)), Held::UnversionedTie);
        let written: Vec<bool> =
            [Held::Missing, Held::Older, Held::Same, Held::Newer, Held::Damaged, Held::UnversionedTie]
                .map(Held::to_write)
                .to_vec();
        assert_eq!(written, [true, true, false, false, true, false], "never over a newer version or a tie");
    }
}
