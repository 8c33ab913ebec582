//! `reconcile dlq replay`: writes each dead letter back into the store that refused it, and only
//! that one, once the cause is fixed (a mapping corrected, a column widened).
//!
//! It reads the dead-letter topic from its own group's committed offsets (`<dlq-topic>.replay`)
//! to the end the topic had when it started, writes each replayable record (a valid message a
//! store refused) with the writers' conditional write, so a newer version already there is
//! never replaced, and commits the group's offsets past what it read, only after every write
//! succeeded: a second replay does not repeat it, an interrupted one repeats it harmlessly. A
//! record the store refuses again is dead-lettered again at the end of the topic with its new
//! error (and `replay_of`, where it was), so it stays visible to reconcile and to the next
//! replay. Undecodable records (store `decode`) are not messages and cannot be replayed: they are
//! counted and left where they are. The writer dead-letters at least once, so one message may be
//! on the topic several times: each (store, id, version) is replayed once per run.

use crate::dlq::{self, Record};
use crate::findings::{Class, Severity};
use pipeline_common::config::KafkaArgs;
use pipeline_common::kafka::{group_lag, producer_config};
use pipeline_common::message::{Limits, Message};
use pipeline_common::reconcile_report::{DlqReplayReport, Examples};
use pipeline_stores::{Overwrite, Store};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// Messages written per store request.
const BATCH: usize = 500;

/// The replay group of a dead-letter topic.
pub(crate) fn group_of(dlq_topic: &str) -> String {
    format!("{dlq_topic}.replay")
}

/// The replay group's committed offsets on `topic` (empty when it never replayed, or the topic
/// does not exist). Blocking.
pub(crate) fn committed(kafka: &KafkaArgs, group: &str, topic: &str) -> anyhow::Result<HashMap<i32, i64>> {
    Ok(group_lag(kafka, group, topic)?.into_iter().map(|p| (p.partition, p.committed)).collect())
}

/// Reads the dead letters from the replay group's offsets; returns them with the offsets that
/// commit having read them. Blocking.
fn pending(kafka: &KafkaArgs, topic: &str) -> anyhow::Result<(Vec<Record>, HashMap<i32, i64>)> {
    let from = committed(kafka, &group_of(topic), topic)?;
    let mut records = Vec::new();
    dlq::scan(kafka, topic, &from, |r| records.push(r))?;
    let mut next: HashMap<i32, i64> = HashMap::new();
    for r in &records {
        let n = next.entry(r.partition).or_insert(0);
        *n = (*n).max(r.offset + 1);
    }
    Ok((records, next))
}

/// What one replay did, per store.
#[derive(Default)]
struct Tally {
    written: BTreeMap<String, u64>,
    refused: BTreeMap<String, Class>,
    not_replayable: Option<Class>,
}

fn class() -> Class {
    Class::new(Severity::Failure)
}

/// Dead-letters `m` again with the store's new error.
async fn dead_letter_again(
    producer: &FutureProducer,
    topic: &str,
    r: &Record,
    m: &Message,
    store: &str,
    reason: &str,
) -> anyhow::Result<()> {
    let error =
        if reason.starts_with(&format!("{store}:")) { reason.to_string() } else { format!("{store}: {reason}") };
    let at = r.at();
    let headers = OwnedHeaders::new()
        .insert(Header { key: "error", value: Some(&error) })
        .insert(Header { key: "store", value: Some(store) })
        .insert(Header { key: "id", value: Some(&m.id) })
        .insert(Header { key: "replay_of", value: Some(&at) });
    let payload = m.to_json();
    let rec = FutureRecord::to(topic).key(&m.id).payload(&payload).headers(headers);
    producer
        .send(rec, Duration::from_secs(30))
        .await
        .map_err(|(e, _)| anyhow::anyhow!("dead-lettering {} again: {e}", m.id))?;
    Ok(())
}

/// Commits the replay group's offsets (a group that never joins: a simple, assign-style commit).
fn commit(kafka: &KafkaArgs, topic: &str, next: &HashMap<i32, i64>) -> anyhow::Result<()> {
    if next.is_empty() {
        return Ok(());
    }
    let consumer: BaseConsumer = pipeline_common::kafka::client_config(kafka)
        .set("group.id", group_of(topic))
        .set("enable.auto.commit", "false")
        .create()?;
    let mut tpl = TopicPartitionList::new();
    for (p, o) in next {
        tpl.add_partition_offset(topic, *p, Offset::Offset(*o))?;
    }
    consumer.commit(&tpl, CommitMode::Sync)?;
    Ok(())
}

pub(crate) async fn run(
    kafka: &KafkaArgs,
    topic: &str,
    stores: &[Arc<dyn Store>],
    dry_run: bool,
    as_json: bool,
) -> anyhow::Result<u8> {
    let (k, t) = (kafka.clone(), topic.to_string());
    let (records, mut next) = tokio::task::spawn_blocking(move || pending(&k, &t)).await??;
    let mut tally = Tally::default();
    // Per store, its messages in topic order with the record each came from.
    let mut by_store: BTreeMap<String, Vec<(Record, Message)>> = BTreeMap::new();
    let limits = Limits { max_body_bytes: usize::MAX };
    // Dead letters are at least once: the same message refused by the same store is replayed once.
    let mut seen: std::collections::HashSet<(String, String, u64)> = std::collections::HashSet::new();
    // Dead letters of a store outside --stores (refused before it was left out) are neither
    // written nor committed past: each partition's commit stops at the first of them, so a
    // replay that has the store still finds them (what is replayed again is written
    // idempotently).
    let mut left: BTreeMap<String, u64> = BTreeMap::new();
    for r in records {
        let store = r.store();
        if r.replayable() && !stores.iter().any(|s| s.kind().name() == store) {
            *left.entry(store).or_default() += 1;
            next.entry(r.partition).and_modify(|n| *n = (*n).min(r.offset));
            continue;
        }
        let msg = r.payload.as_deref().filter(|_| r.replayable()).map(|p| Message::decode(p, limits));
        match msg {
            Some(Ok(m)) if !seen.insert((store.clone(), m.id.clone(), m.version)) => {}
            Some(Ok(m)) => by_store.entry(store).or_default().push((r, m)),
            _ => {
                let why = format!("{} ({store}: {})", r.at(), r.reason());
                tally.not_replayable.get_or_insert_with(class).add_example(&r.at(), why);
            }
        }
    }
    for (store, n) in &left {
        eprintln!(
            "reconcile: {n} dead letters of {store}, not in --stores, left on the topic for a replay that has it"
        );
    }
    let producer: Option<FutureProducer> = if dry_run { None } else { Some(producer_config(kafka).create()?) };
    for (name, items) in &by_store {
        let Some(store) = stores.iter().find(|s| s.kind().name() == name) else { continue };
        if dry_run {
            tally.written.insert(name.clone(), items.len() as u64);
            continue;
        }
        for chunk in items.chunks(BATCH) {
            let msgs: Vec<Message> = chunk.iter().map(|(_, m)| m.clone()).collect();
            let refused = crate::patient::write(store.as_ref(), &msgs, Overwrite::Older).await?;
            *tally.written.entry(name.clone()).or_default() += msgs.len().saturating_sub(refused.len()) as u64;
            for rej in refused {
                let Some((r, m)) = chunk.iter().find(|(_, m)| m.id == rej.id) else { continue };
                if let Some(p) = &producer {
                    dead_letter_again(p, topic, r, m, name, &rej.reason).await?;
                }
                tally
                    .refused
                    .entry(name.clone())
                    .or_insert_with(class)
                    .add_with(&m.id, || format!("{}: {}", m.id, rej.reason));
            }
        }
    }
    if !dry_run {
        let (k, t) = (kafka.clone(), topic.to_string());
        tokio::task::spawn_blocking(move || commit(&k, &t, &next)).await??;
    }
    let refused: u64 = tally.refused.values().map(|c| c.total).sum();
    print(&tally, topic, dry_run, as_json);
    Ok(if refused == 0 { 0 } else { crate::exit::MISMATCH })
}

fn print(t: &Tally, topic: &str, dry_run: bool, as_json: bool) {
    let written: u64 = t.written.values().sum();
    let refused: u64 = t.refused.values().map(|c| c.total).sum();
    let not_replayable = t.not_replayable.as_ref().map_or(0, |c| c.total);
    let message = match (dry_run, refused) {
        (true, _) => format!("DRY RUN: {written} dead letters would be written back; nothing was changed"),
        (false, 0) => format!("REPLAYED: {written} dead letters written back into the stores that refused them"),
        (false, n) => format!("REPLAYED {written}; {n} REFUSED AGAIN (dead-lettered again with the new error)"),
    };
    if as_json {
        let refused_again: BTreeMap<String, Examples> =
            t.refused.iter().map(|(k, c)| (k.clone(), c.to_examples())).collect();
        let nr = t.not_replayable.as_ref().map(|c| c.examples().map(str::to_string).collect()).unwrap_or_default();
        crate::report::print_json(&DlqReplayReport {
            replay: true,
            topic: topic.to_string(),
            group: group_of(topic),
            dry_run,
            written: t.written.clone(),
            ok: refused_again.is_empty(),
            refused_again,
            not_replayable: Examples { total: not_replayable, examples: nr },
            message,
        });
        return;
    }
    println!("dead-letter topic {topic}, replay group {}{}", group_of(topic), if dry_run { ", dry run" } else { "" });
    for (store, n) in &t.written {
        println!("{store}: {} {n}", if dry_run { "would write" } else { "written" });
    }
    for (store, c) in &t.refused {
        println!("{store}: refused again {}", c.total);
        c.examples().take(5).for_each(|e| println!("  {e}"));
    }
    if let Some(c) = &t.not_replayable {
        println!("not replayable (not a valid message): {}", c.total);
        c.examples().take(5).for_each(|e| println!("  {e}"));
    }
    println!("{message}");
}
