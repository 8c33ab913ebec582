//! `reconcile replay`: restores the stores from the messages topic itself, for what `repair`
//! cannot do: MySQL, the store every other one is repaired from, losing rows.
//!
//! It reads a range of the topic ([`range`]) with a consumer of its own that never joins or
//! commits to the writers' group ([`read`]), decodes each record as the writer does
//! (`pipeline_common::record`: one message or a batch request's array; what does not decode is
//! reported, never written), and writes each message into the chosen stores under the version
//! rule ([`apply`]): only what a store lacks, never over a newer version, so a second replay
//! writes nothing and a replay beside live writers is safe. At the end every replayed id is read
//! back from every chosen store and must be there at its version or newer ([`summary`] says so).
//!
//! What it cannot do: a record past the topic's retention is gone; asking for it is reported as
//! a gap and the exit code says the range was not all there.
//!
//! Unlike the checks, it does not wait for the pipeline to drain: it does not judge a store's
//! whole content, only the messages it read, and the version rule makes it safe beside writers.

mod apply;
mod consumer;
mod range;
mod read;
mod summary;

use apply::StoreTally;
use indicatif::{ProgressBar, ProgressStyle};
use pipeline_common::config::KafkaArgs;
use pipeline_common::digest::Digest;
use pipeline_common::message::Limits;
use pipeline_common::Message;
use pipeline_stores::{Store, StoreArgs, StoreKind};
use range::ResolveError;
pub(crate) use range::{parse_from_offset, parse_time, parse_to_offset, Begin, PerPartition, Spec, Start, Until};
use std::collections::{BTreeMap, HashMap};
use std::io::IsTerminal;
use std::sync::Arc;
use summary::PartitionRead;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// Records in flight between the reading thread and the writes (each may hold a batch request).
const CHANNEL: usize = 64;

/// What to do.
pub(crate) struct Options {
    pub spec: Spec,
    /// The stores to restore, each once.
    pub stores: Vec<StoreKind>,
    pub dry_run: bool,
    /// Messages compared and written per store request.
    pub batch: usize,
    /// The writer's validation limits (`MAX_BODY_BYTES`): a message the writer would refuse is
    /// reported as undecodable here too, not written.
    pub limits: Limits,
}

fn progress(total: u64, topic: &str, as_json: bool) -> ProgressBar {
    if as_json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} records {per_sec} eta {eta}") {
        bar.set_style(style);
    }
    bar.set_message(format!("replaying {topic}"));
    bar
}

/// Each id once, at the newest version in `msgs` (of two equal versions, the first read: what
/// the writer's `Older` write keeps), with the partition of its record; in the order read.
fn newest_per_id(msgs: Vec<(i32, Message)>) -> Vec<(i32, Message)> {
    let mut at: HashMap<String, usize> = HashMap::with_capacity(msgs.len());
    let mut out: Vec<(i32, Message)> = Vec::with_capacity(msgs.len());
    for (p, m) in msgs {
        match at.get(&m.id) {
            Some(&i) if out[i].1.version < m.version => out[i] = (p, m),
            Some(_) => {}
            None => {
                at.insert(m.id.clone(), out.len());
                out.push((p, m));
            }
        }
    }
    out
}

/// Runs `f` for every store at once, each with its own tally; returns the tallies in store order.
async fn each_store<F, Fut>(
    stores: &[Arc<dyn Store>],
    tallies: Vec<StoreTally>,
    f: F,
) -> anyhow::Result<Vec<StoreTally>>
where
    F: Fn(Arc<dyn Store>, StoreTally) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<StoreTally>> + Send + 'static,
{
    let mut set = JoinSet::new();
    for (s, t) in stores.iter().zip(tallies) {
        set.spawn(f(s.clone(), t));
    }
    let mut back = Vec::with_capacity(stores.len());
    while let Some(done) = set.join_next().await {
        back.push(done??);
    }
    back.sort_by_key(|t| t.store);
    Ok(back)
}

/// Writes one chunk into every store; notes each id's newest version in `want`.
async fn flush(
    stores: &[Arc<dyn Store>],
    tallies: Vec<StoreTally>,
    pending: Vec<(i32, Message)>,
    want: &mut HashMap<String, Digest>,
    dry_run: bool,
) -> anyhow::Result<Vec<StoreTally>> {
    if pending.is_empty() {
        return Ok(tallies);
    }
    let chunk = newest_per_id(pending);
    for (_, m) in &chunk {
        let d = Digest::of_message(m);
        match want.get_mut(&m.id) {
            Some(w) if w.version < d.version => *w = d,
            Some(_) => {}
            None => {
                want.insert(m.id.clone(), d);
            }
        }
    }
    let chunk = Arc::new(chunk);
    each_store(stores, tallies, |s, mut t| {
        let chunk = chunk.clone();
        async move {
            apply::chunk(s.as_ref(), &chunk, dry_run, &mut t).await?;
            Ok(t)
        }
    })
    .await
}

/// Resolves the range, replays it into the chosen stores, verifies and prints; returns the exit
/// code ([`summary::Summary::code`]).
pub(crate) async fn run(
    kafka: &KafkaArgs,
    store_args: &StoreArgs,
    opts: &Options,
    as_json: bool,
) -> anyhow::Result<u8> {
    let (k, topic, spec) = (kafka.clone(), kafka.topic.clone(), opts.spec.clone());
    let planned = tokio::task::spawn_blocking(move || {
        let plan = range::resolve(&k, &k.topic, &spec)?;
        let consumer = consumer::consumer(&k)
            .map_err(|source| ResolveError::Kafka { what: "creating a consumer".into(), source })?;
        Ok::<_, ResolveError>((consumer, plan))
    })
    .await?;
    let (consumer, plan) = match planned {
        Ok(p) => p,
        Err(e) if e.is_bad_input() => return Ok(crate::exit::bad_input(&e.into(), as_json)),
        Err(e) => return Err(e.into()),
    };
    let stores = pipeline_stores::connect(store_args, &opts.stores).await?;
    for s in &stores {
        s.prepare().await?;
    }

    let total: i64 = plan.iter().map(|p| p.end - p.start).sum();
    let bar = progress(u64::try_from(total).unwrap_or(0), &topic, as_json);
    let (tx, mut rx) = mpsc::channel::<read::Read>(CHANNEL);
    let reader = {
        let (plan, topic, bar, limits) = (plan.clone(), topic.clone(), bar.clone(), opts.limits);
        tokio::task::spawn_blocking(move || read::read(&consumer, &topic, &plan, limits, &tx, &bar))
    };

    let mut tallies: Vec<StoreTally> = stores.iter().map(|s| StoreTally::new(s.kind())).collect();
    let mut parts: BTreeMap<i32, PartitionRead> = BTreeMap::new();
    let mut undecodable = crate::findings::Class::new(crate::findings::Severity::Info);
    let mut want: HashMap<String, Digest> = HashMap::new();
    let mut pending: Vec<(i32, Message)> = Vec::with_capacity(opts.batch);
    let batch = opts.batch.max(1);
    while let Some(r) = rx.recv().await {
        let part = parts.entry(r.partition).or_default();
        part.records += 1;
        part.messages += r.decoded.messages.len() as u64;
        part.undecodable += r.decoded.bad.len() as u64;
        for bad in &r.decoded.bad {
            // Keyed as the writer keys its dead letter: partition:offset, and :index in an array.
            let at = match bad.index {
                Some(i) => format!("{}:{}:{i}", r.partition, r.offset),
                None => format!("{}:{}", r.partition, r.offset),
            };
            let id = bad.id.as_deref().map(|id| format!(" (id {id})")).unwrap_or_default();
            undecodable.add_example(&at, format!("{at}{id}: {}", bad.error));
        }
        pending.extend(r.decoded.messages.into_iter().map(|m| (r.partition, m)));
        if pending.len() >= batch {
            tallies = flush(&stores, tallies, std::mem::take(&mut pending), &mut want, opts.dry_run).await?;
        }
    }
    let read = reader.await;
    bar.finish_and_clear();
    read??;
    tallies = flush(&stores, tallies, pending, &mut want, opts.dry_run).await?;

    if !opts.dry_run {
        let mut ids: Vec<String> = want.keys().cloned().collect();
        ids.sort_unstable();
        let (ids, want) = (Arc::new(ids), Arc::new(want));
        tallies = each_store(&stores, tallies, |s, mut t| {
            let (ids, want, batch) = (ids.clone(), want.clone(), batch);
            async move {
                t.verify = Some(apply::verify(s.as_ref(), &ids, &want, &t.refused_ids, batch).await?);
                Ok(t)
            }
        })
        .await?;
    }

    let summary = summary::Summary {
        topic,
        range: opts.spec.describe(),
        dry_run: opts.dry_run,
        plan,
        parts,
        undecodable,
        stores: tallies,
    };
    summary.print(as_json);
    Ok(summary.code())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(id: &str, version: u64, body: &str) -> Message {
        let mut m = pipeline_testkit::messages(1, "x").remove(0);
        m.id = id.into();
        m.version = version;
        m.body = body.into();
        m
    }

    #[test]
    fn a_chunk_keeps_each_id_once_at_its_newest_version() {
        let msgs = vec![
            (0, m("a", 2, "a2")),
            (1, m("b", 0, "b-first")),
            (3, m("a", 5, "a5")),
            (0, m("a", 4, "a4")),
            (2, m("b", 0, "b-second")),
        ];
        let got: Vec<(i32, String)> = newest_per_id(msgs).into_iter().map(|(p, m)| (p, m.body)).collect();
        assert_eq!(got, [(3, "a5".to_string()), (1, "b-first".to_string())]);
    }
}
