//! Reading the dead-letter topic, so that records the writer could never store are reported as
//! dead-lettered (with the store that refused them and why), never as silently missing.
//!
//! The whole topic is read with assigned partitions (no group, nothing committed) from the low to
//! the high watermark taken at the start: the end is known, so the read stops when it is reached
//! instead of waiting for a quiet period. Only a read that makes no progress for [`STALL`] fails.
//!
//! A dead letter's id is its `id` header, else the `id` field of its payload (the message JSON),
//! else it has none (an undecodable record, counted apart). Its store is the `store` header, else
//! the prefix of the `error` header (`es: ...`, `decode: ...`), else `unknown`.
//!
//! `reconcile dlq replay` (`crate::replay`) writes dead letters back into the store that refused
//! them and commits its own group's offsets on this topic: a record of a store below that
//! group's committed offset has been replayed (stored, or dead-lettered again further on with
//! its new error) and no longer counts as a dead letter. Undecodable records never can be.

use pipeline_common::config::KafkaArgs;
use pipeline_common::kafka::{client_config, ADMIN_TIMEOUT};
use pipeline_stores::StoreKind;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Longest time without a record or an end-of-partition before the read counts as failed.
pub(crate) const STALL: Duration = Duration::from_secs(30);

/// Distinct stores kept per dead-lettered id (at-least-once delivery repeats dead letters).
const STORES_PER_ID: usize = 4;

#[derive(Debug, thiserror::Error)]
pub(crate) enum DlqError {
    #[error("reading dead-letter topic {topic}: {source}")]
    Kafka { topic: String, source: KafkaError },
    #[error("reading dead-letter topic {topic}: no progress for {} s; unfinished partitions (partition, next offset, end): {left:?}", STALL.as_secs())]
    Stalled { topic: String, left: Vec<(i32, i64, i64)> },
}

/// Why one id was dead-lettered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeadLetter {
    /// A store's name (`StoreKind::name`), `decode` or `unknown`.
    pub store: String,
    pub reason: String,
}

/// What the dead-letter topic holds.
#[derive(Debug, Default)]
pub(crate) struct DeadLetters {
    pub topic: String,
    /// The topic does not exist (no writer ever started with it): no dead letters.
    pub absent: bool,
    /// Records read (dead letters are at least once: an id may come back).
    pub records: u64,
    pub by_id: HashMap<String, Vec<DeadLetter>>,
    /// Dead letters without an id: (key or partition:offset, reason), all of them counted here.
    pub without_id: Vec<(String, String)>,
    /// Records replayed by `reconcile dlq replay` (below its group's committed offset).
    pub replayed: u64,
}

/// One record of the dead-letter topic, as read.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub partition: i32,
    pub offset: i64,
    /// Milliseconds since the epoch, when the broker gave one.
    pub timestamp: Option<i64>,
    pub key: Option<Vec<u8>>,
    pub payload: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl Record {
    pub(crate) fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.as_deref())
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    /// The store that refused it (see the module docs).
    pub(crate) fn store(&self) -> String {
        self.header("store").unwrap_or_else(|| store_of_reason(&self.reason()))
    }

    pub(crate) fn reason(&self) -> String {
        self.header("error").unwrap_or_else(|| "no error header".into())
    }

    /// Whether `reconcile dlq replay` can write it back: a store refused a valid message.
    pub(crate) fn replayable(&self) -> bool {
        let store = self.store();
        StoreKind::ALL.iter().any(|k| k.name() == store)
    }

    pub(crate) fn at(&self) -> String {
        format!("{}:{}", self.partition, self.offset)
    }
}

impl DeadLetters {
    /// Files one record.
    pub(crate) fn add(
        &mut self,
        key: Option<&[u8]>,
        payload: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
        at: &str,
    ) {
        self.records += 1;
        let header = |name: &str| {
            headers.iter().find(|(k, _)| *k == name).and_then(|(_, v)| *v).map(|v| String::from_utf8_lossy(v))
        };
        let reason = header("error").map(|e| e.into_owned()).unwrap_or_else(|| "no error header".into());
        let store = header("store").map(|s| s.into_owned()).unwrap_or_else(|| store_of_reason(&reason));
        let ids = match header("id").map(|s| s.into_owned()).filter(|s| !s.is_empty()) {
            Some(id) => vec![id],
            None => payload.map(payload_ids).unwrap_or_default(),
        };
        if ids.is_empty() {
            let key = key.map(|k| String::from_utf8_lossy(k).into_owned()).unwrap_or_else(|| at.to_string());
            self.without_id.push((key, reason));
            return;
        }
        for id in ids {
            let list = self.by_id.entry(id).or_default();
            if list.len() < STORES_PER_ID && !list.iter().any(|d| d.store == store) {
                list.push(DeadLetter { store: store.clone(), reason: reason.clone() });
            }
        }
    }
}

/// `es` from `es: mapping error`, `decode` from `decode: ...`; `unknown` otherwise.
fn store_of_reason(reason: &str) -> String {
    match reason.split_once(':').map(|(s, _)| s.trim()) {
        Some(s) if s == "decode" || StoreKind::ALL.iter().any(|k| k.name() == s) => s.to_string(),
        _ => "unknown".to_string(),
    }
}

/// The ids a dead-lettered payload names: the `id` field of an object, or of each object in an
/// array (a batch record the writer refused whole, `pipeline_common::record`). Items without a
/// string id are skipped.
fn payload_ids(payload: &[u8]) -> Vec<String> {
    let id_of = |v: &serde_json::Value| match v.get("id") {
        Some(serde_json::Value::String(s)) if !s.is_empty() => Some(s.clone()),
        _ => None,
    };
    match serde_json::from_slice::<serde_json::Value>(payload) {
        Ok(serde_json::Value::Array(items)) => items.iter().filter_map(id_of).collect(),
        Ok(v) => id_of(&v).into_iter().collect(),
        Err(_) => Vec::new(),
    }
}

/// Reads `topic` from its beginning to its current end, filing every record; a replayable one
/// below `replayed[partition]` (the replay group's committed offsets) counts as replayed.
/// Blocking (librdkafka calls): run it on a blocking thread from async code.
pub(crate) fn read_all(kafka: &KafkaArgs, topic: &str, replayed: &HashMap<i32, i64>) -> Result<DeadLetters, DlqError> {
    let mut out = DeadLetters { topic: topic.to_string(), ..DeadLetters::default() };
    out.absent = !scan(kafka, topic, &HashMap::new(), |r| {
        if r.replayable() && replayed.get(&r.partition).is_some_and(|&c| r.offset < c) {
            out.replayed += 1;
            return;
        }
        let headers: Vec<(&str, Option<&[u8]>)> = r.headers.iter().map(|(k, v)| (k.as_str(), v.as_deref())).collect();
        out.add(r.key.as_deref(), r.payload.as_deref(), &headers, &r.at());
    })?;
    Ok(out)
}

/// Calls `each` with every record of `topic` from `from[partition]` (the low watermark when
/// absent or lower) to the high watermark taken at the start, in offset order per partition.
/// Returns false when the topic does not exist. Blocking.
pub(crate) fn scan(
    kafka: &KafkaArgs,
    topic: &str,
    from: &HashMap<i32, i64>,
    mut each: impl FnMut(Record),
) -> Result<bool, DlqError> {
    let err = |source| DlqError::Kafka { topic: topic.to_string(), source };
    let consumer: BaseConsumer = client_config(kafka)
        .set("group.id", format!("reconcile-dlq-{}", uuid_ish()))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("allow.auto.create.topics", "false")
        .create()
        .map_err(err)?;
    let md = consumer.fetch_metadata(Some(topic), ADMIN_TIMEOUT).map_err(err)?;
    let Some(t) = md.topics().iter().find(|t| t.name() == topic && t.error().is_none()) else {
        return Ok(false);
    };
    // partition -> (next offset to read, end)
    let mut left: HashMap<i32, (i64, i64)> = HashMap::new();
    let mut tpl = TopicPartitionList::new();
    for p in t.partitions() {
        let (low, high) = consumer.fetch_watermarks(topic, p.id(), ADMIN_TIMEOUT).map_err(err)?;
        let start = from.get(&p.id()).copied().unwrap_or(low).max(low);
        if high > start {
            left.insert(p.id(), (start, high));
            tpl.add_partition_offset(topic, p.id(), Offset::Offset(start)).map_err(err)?;
        }
    }
    if left.is_empty() {
        return Ok(true);
    }
    consumer.assign(&tpl).map_err(err)?;
    let mut progress = Instant::now();
    while !left.is_empty() {
        if progress.elapsed() > STALL {
            let mut l: Vec<(i32, i64, i64)> = left.iter().map(|(p, (n, h))| (*p, *n, *h)).collect();
            l.sort();
            return Err(DlqError::Stalled { topic: topic.to_string(), left: l });
        }
        match consumer.poll(Duration::from_millis(500)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(p))) => {
                left.remove(&p);
                progress = Instant::now();
            }
            Some(Err(e)) => return Err(err(e)),
            Some(Ok(m)) => {
                progress = Instant::now();
                let p = m.partition();
                let Some(&(_, high)) = left.get(&p) else { continue };
                if m.offset() < high {
                    let headers = m
                        .headers()
                        .map(|h| h.iter().map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec))).collect())
                        .unwrap_or_default();
                    each(Record {
                        partition: p,
                        offset: m.offset(),
                        timestamp: m.timestamp().to_millis(),
                        key: m.key().map(<[u8]>::to_vec),
                        payload: m.payload().map(<[u8]>::to_vec),
                        headers,
                    });
                }
                if m.offset() + 1 >= high {
                    left.remove(&p);
                } else {
                    left.insert(p, (m.offset() + 1, high));
                }
            }
        }
    }
    Ok(true)
}

/// A group id no one else uses (the group never commits; librdkafka wants one anyway).
fn uuid_ish() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{}-{nanos}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_from_header_then_payload_then_none() {
        let mut d = DeadLetters::default();
        let payload = br#"{"id":"from-payload","sender":"a"}"#;
        d.add(Some(b"k"), Some(payload), &[("error", Some(b"es: mapping")), ("id", Some(b"from-header"))], "0:1");
        d.add(Some(b"from-payload"), Some(payload), &[("error", Some(b"mongo: too big"))], "0:2");
        d.add(Some(b"0:7"), Some(b"\xff not json"), &[("error", Some(b"decode: not a message"))], "0:3");
        d.add(None, Some(b"[1,2]"), &[], "0:4");
        // A batch record refused whole: each of its messages is dead-lettered, not missing.
        let batch = br#"[{"id":"in-batch-1","sender":"a"},{"id":"in-batch-2"},{"no":"id"}]"#;
        d.add(Some(b"1:9"), Some(batch), &[("error", Some(b"decode: invalid sent_at"))], "1:9");
        assert_eq!(d.records, 5);
        for id in ["in-batch-1", "in-batch-2"] {
            assert_eq!(d.by_id[id], [DeadLetter { store: "decode".into(), reason: "decode: invalid sent_at".into() }]);
        }
        assert_eq!(d.by_id["from-header"], [DeadLetter { store: "es".into(), reason: "es: mapping".into() }]);
        assert_eq!(d.by_id["from-payload"][0].store, "mongo");
        assert_eq!(
            d.without_id,
            [("0:7".into(), "decode: not a message".into()), ("0:4".into(), "no error header".into())]
        );
    }

    #[test]
    fn store_header_wins_and_repeats_are_kept_once() {
        let mut d = DeadLetters::default();
        for _ in 0..3 {
            d.add(None, Some(br#"{"id":"x"}"#), &[("error", Some(b"refused")), ("store", Some(b"redis"))], "0:0");
        }
        assert_eq!(d.records, 3);
        assert_eq!(d.by_id["x"], [DeadLetter { store: "redis".into(), reason: "refused".into() }]);
        assert_eq!(store_of_reason("weird"), "unknown");
    }
}
