//! `reconcile repair`: rebuilds every other store from MySQL, the system of
//! record the reference design writes synchronously for this very reason.
//!
//! For each store, every id MySQL holds that the store is missing, or holds with other content
//! or an older version (or in a form that is not a message), is fetched from MySQL and written
//! there with the writers' own conditional write, in its [`Overwrite::OlderOrSame`] form: a copy
//! of the same version is replaced (it is damaged: a version has one content), a newer one never
//! is, so a repair beside a live writer cannot bring an old version back. What a store holds in
//! a newer version than MySQL cannot be repaired from MySQL (MySQL itself is behind: replay the
//! topic, docs/explanation/trust.md) and is reported. Ids a store holds that MySQL does not are reported,
//! and deleted only with `--delete-extra`.
//!
//! Every repaired id is read back and compared again, so the summary says what the stores hold
//! now, not what was sent to them. A second repair finds nothing to do.

use crate::findings::{Class, Severity};
use crate::patient;
use crate::tally::REFERENCE;
use indicatif::{ProgressBar, ProgressStyle};
use pipeline_common::digest::Digest;
use pipeline_common::message::shard_of;
use pipeline_common::reconcile_report::{RepairReport, RepairedStore};
use pipeline_stores::{Overwrite, Store, StoreKind};
use std::collections::{HashMap, HashSet};
use std::io::IsTerminal;
use std::sync::Arc;

/// What to do.
pub(crate) struct Options {
    /// The stores to repair (never the reference store itself).
    pub stores: Vec<StoreKind>,
    pub dry_run: bool,
    pub delete_extra: bool,
    /// Messages fetched from MySQL and written per batch.
    pub batch: usize,
}

/// What repair found and did in one store.
struct Outcome {
    store: StoreKind,
    missing: Class,
    mismatched: Class,
    /// Held in a newer version than MySQL's: MySQL is behind, repair cannot help.
    newer: Class,
    extra: Class,
    repaired: u64,
    deleted: u64,
    /// Refused for good by the store when written (its reason in the examples).
    refused: Class,
    /// Written, yet still not what MySQL holds when read back.
    still_different: Class,
}

impl Outcome {
    fn new(store: StoreKind) -> Outcome {
        let c = || Class::new(Severity::Failure);
        Outcome {
            store,
            missing: c(),
            mismatched: c(),
            newer: c(),
            extra: c(),
            repaired: 0,
            deleted: 0,
            refused: c(),
            still_different: c(),
        }
    }

    /// Whether the store agrees with MySQL now (or would, after this repair in a dry run).
    fn clean(&self, opts: &Options) -> bool {
        let left_extra = self.extra.total > 0 && (opts.dry_run || !opts.delete_extra);
        let to_do = opts.dry_run && (self.missing.total > 0 || self.mismatched.total > 0);
        !(left_extra || to_do || self.newer.total > 0 || self.refused.total > 0 || self.still_different.total > 0)
    }

    fn to_report(&self) -> RepairedStore {
        RepairedStore {
            store: self.store.name().to_string(),
            missing: self.missing.to_examples(),
            mismatched: self.mismatched.to_examples(),
            newer_than_reference: self.newer.to_examples(),
            extra: self.extra.to_examples(),
            repaired: self.repaired,
            deleted: self.deleted,
            refused: self.refused.to_examples(),
            still_different: self.still_different.to_examples(),
        }
    }
}

/// MySQL's fingerprint of every id it holds in its own shard table.
async fn reference(store: &dyn Store) -> anyhow::Result<HashMap<Box<str>, Digest>> {
    let held = patient::audit(store, "").await?;
    let mut out = HashMap::with_capacity(held.len());
    for a in held {
        // A copy in a wrong shard table is not the one MySQL reads by id (reconcile reports it).
        if a.place.is_some_and(|p| p != shard_of(&a.id)) {
            continue;
        }
        if let Some(d) = a.digest {
            out.insert(a.id.into_boxed_str(), d);
        }
    }
    Ok(out)
}

fn progress(len: u64, store: StoreKind) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {per_sec} eta {eta}") {
        bar.set_style(style);
    }
    bar.set_message(format!("repairing {store}"));
    bar
}

/// Finds what `target` lacks or holds wrongly, and (unless a dry run) writes MySQL's version.
async fn repair_one(
    mysql: &dyn Store,
    target: &dyn Store,
    refs: &HashMap<Box<str>, Digest>,
    opts: &Options,
) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new(target.kind());
    let held = patient::audit(target, "").await?;
    let mut seen: HashSet<&str> = HashSet::with_capacity(held.len());
    let mut todo: Vec<String> = Vec::new();
    let mut extra: Vec<String> = Vec::new();
    for a in &held {
        let Some((id, want)) = refs.get_key_value(a.id.as_str()) else {
            out.extra.add(&a.id);
            extra.push(a.id.clone());
            continue;
        };
        seen.insert(id);
        match a.digest {
            Some(d) if d == *want => {}
            Some(d) if d.version > want.version => out.newer.add_with(&a.id, || {
                format!("{}: {} holds version {}, mysql {}", a.id, target.kind(), d.version, want.version)
            }),
            Some(d) => {
                let fields = want.differences(&d);
                out.mismatched.add_fields(&a.id, &fields, || format!("{}: {}", a.id, fields.join(", ")));
                todo.push(a.id.clone());
            }
            None => {
                out.mismatched.add_fields(&a.id, &["unreadable"], || format!("{}: not a message", a.id));
                todo.push(a.id.clone());
            }
        }
    }
    for id in refs.keys().filter(|id| !seen.contains(&***id)) {
        out.missing.add(id);
        todo.push(id.to_string());
    }
    drop(held);
    if opts.dry_run {
        return Ok(out);
    }
    todo.sort_unstable();
    let bar = progress(todo.len() as u64, target.kind());
    for chunk in todo.chunks(opts.batch.max(1)) {
        let msgs = patient::fetch(mysql, chunk).await?;
        let refused = patient::write(target, &msgs, Overwrite::OlderOrSame).await?;
        for r in &refused {
            out.refused.add_with(&r.id, || format!("{}: {}", r.id, r.reason));
        }
        out.repaired += msgs.len().saturating_sub(refused.len()) as u64;
        // Read back: what the store holds now, compared again.
        for m in patient::fetch(target, chunk).await? {
            let (now, want) = (Digest::of_message(&m), refs.get(m.id.as_str()));
            if want.is_some_and(|w| *w != now && now.version <= w.version) {
                out.still_different.add(&m.id);
            }
        }
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    if opts.delete_extra && !extra.is_empty() {
        target.delete(&extra).await?;
        out.deleted = extra.len() as u64;
    }
    Ok(out)
}

/// Runs the repair and prints its summary; the exit code is 0 when every store agrees with
/// MySQL afterwards (in a dry run: when there is nothing to do).
pub(crate) async fn run(stores: &[Arc<dyn Store>], opts: &Options, as_json: bool) -> anyhow::Result<u8> {
    let Some(mysql) = stores.iter().find(|s| s.kind() == REFERENCE) else {
        anyhow::bail!("repair needs the reference store, {REFERENCE}");
    };
    let refs = reference(mysql.as_ref()).await?;
    let mut outcomes = Vec::new();
    for s in stores.iter().filter(|s| opts.stores.contains(&s.kind()) && s.kind() != REFERENCE) {
        outcomes.push(repair_one(mysql.as_ref(), s.as_ref(), &refs, opts).await?);
    }
    let ok = outcomes.iter().all(|o| o.clean(opts));
    print(&outcomes, refs.len(), opts, ok, as_json);
    Ok(if ok { 0 } else { crate::exit::MISMATCH })
}

fn message(outcomes: &[Outcome], opts: &Options, ok: bool) -> String {
    let to_do: u64 = outcomes.iter().map(|o| o.missing.total + o.mismatched.total).sum();
    match (opts.dry_run, ok) {
        (true, true) => "NOTHING TO DO: every store holds what MySQL holds".into(),
        (true, false) => format!("DRY RUN: {to_do} messages would be written; nothing was changed"),
        (false, true) if to_do == 0 => "NOTHING TO DO: every store holds what MySQL holds".into(),
        (false, true) => {
            format!("REPAIRED: {to_do} messages written from MySQL; every store now holds what MySQL holds")
        }
        (false, false) => "NOT REPAIRED: some ids cannot be repaired from MySQL (see above)".into(),
    }
}

fn print(outcomes: &[Outcome], reference_ids: usize, opts: &Options, ok: bool, as_json: bool) {
    let msg = message(outcomes, opts, ok);
    if as_json {
        crate::report::print_json(&RepairReport {
            repair: true,
            dry_run: opts.dry_run,
            reference: REFERENCE.name().to_string(),
            reference_ids: u64::try_from(reference_ids).unwrap_or(u64::MAX),
            stores: outcomes.iter().map(Outcome::to_report).collect(),
            ok,
            message: msg,
        });
        return;
    }
    println!("repair from {REFERENCE} ({reference_ids} ids){}", if opts.dry_run { ", dry run" } else { "" });
    for o in outcomes {
        println!(
            "{}: missing {}, mismatched {}, repaired {}, newer than mysql {}, extra {}{}, refused {}, still different {}",
            o.store,
            o.missing.total,
            o.mismatched.total,
            o.repaired,
            o.newer.total,
            o.extra.total,
            if o.deleted > 0 { format!(" (deleted {})", o.deleted) } else { String::new() },
            o.refused.total,
            o.still_different.total
        );
        let classes = [
            ("missing", &o.missing),
            ("mismatched", &o.mismatched),
            ("newer than mysql", &o.newer),
            ("extra", &o.extra),
            ("refused", &o.refused),
            ("still different", &o.still_different),
        ];
        for (name, c) in classes {
            for ex in c.examples().take(5) {
                println!("  {name}: {ex}");
            }
        }
    }
    println!("{msg}");
}
