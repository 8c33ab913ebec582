//! Which part of the topic `reconcile replay` reads.
//!
//! The flags are parsed and checked against each other here before anything is contacted (bad
//! input is exit 2 with nothing touched); [`resolve`] then turns them into one half-open offset
//! range `[start, end)` per partition against the broker: `--from-*` is the first record read,
//! `--to-*` the first one not read, and the end is never past the high watermark taken at the
//! start, so a replay ends even while the ingest keeps producing.
//!
//! What the log no longer holds is said, not skipped in silence: an explicit start below the
//! low watermark (records deleted by the topic's retention) is a gap the replay cannot restore.

use pipeline_common::config::KafkaArgs;
use pipeline_common::kafka::ADMIN_TIMEOUT;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message as _;
use rdkafka::{Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Where a partition's replay starts, as `--from-offset` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// The oldest record the topic still holds (its low watermark).
    Earliest,
    At(i64),
}

/// An offset flag's value: one for every partition, or one per named partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PerPartition<T> {
    All(T),
    Each(BTreeMap<i32, T>),
}

impl<T: Copy> PerPartition<T> {
    /// The value for partition `p`, `None` when the flag lists partitions and not this one.
    pub(crate) fn get(&self, p: i32) -> Option<T> {
        match self {
            PerPartition::All(v) => Some(*v),
            PerPartition::Each(m) => m.get(&p).copied(),
        }
    }
}

/// The start of the range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Begin {
    Offsets(PerPartition<Start>),
    Time(OffsetDateTime),
}

/// The end of the range (exclusive); none means the high watermark at the start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Until {
    Offsets(PerPartition<i64>),
    Time(OffsetDateTime),
}

/// What the flags ask for, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spec {
    pub from: Begin,
    pub to: Option<Until>,
}

fn offset(s: &str) -> Result<i64, String> {
    let n: i64 = s.trim().parse().map_err(|_| format!("`{s}` is not an offset (a whole number from 0)"))?;
    if n < 0 {
        return Err(format!("`{s}`: an offset is 0 or more"));
    }
    Ok(n)
}

fn start(s: &str) -> Result<Start, String> {
    if s.trim() == "earliest" {
        Ok(Start::Earliest)
    } else {
        offset(s).map(Start::At)
    }
}

/// `OFFSET` for every partition, or `PARTITION:OFFSET,...` for the named ones.
fn per_partition<T>(s: &str, one: impl Fn(&str) -> Result<T, String>) -> Result<PerPartition<T>, String> {
    let s = s.trim();
    if !s.contains(':') {
        return one(s).map(PerPartition::All);
    }
    let mut each = BTreeMap::new();
    for item in s.split(',').map(str::trim) {
        let (p, v) = item.split_once(':').ok_or_else(|| format!("`{item}` is not PARTITION:OFFSET"))?;
        let p: i32 = p.trim().parse().ok().filter(|p| *p >= 0).ok_or_else(|| format!("`{p}` is not a partition"))?;
        if each.insert(p, one(v)?).is_some() {
            return Err(format!("partition {p} is named twice"));
        }
    }
    Ok(PerPartition::Each(each))
}

/// `--from-offset`: `earliest`, an offset, or `PARTITION:OFFSET,...` (`earliest` allowed per
/// partition too).
pub(crate) fn parse_from_offset(s: &str) -> Result<PerPartition<Start>, String> {
    per_partition(s, start)
}

/// `--to-offset`: an offset, or `PARTITION:OFFSET,...`.
pub(crate) fn parse_to_offset(s: &str) -> Result<PerPartition<i64>, String> {
    per_partition(s, offset)
}

/// `--from-time` / `--to-time`: RFC 3339.
pub(crate) fn parse_time(s: &str) -> Result<OffsetDateTime, String> {
    OffsetDateTime::parse(s.trim(), &Rfc3339)
        .map_err(|e| format!("`{s}` is not an RFC 3339 time (e.g. 2026-12-01T09:30:00Z): {e}"))
}

impl Spec {
    /// Builds the spec from the flags (clap has parsed each and refused two starts or two ends),
    /// refusing what can be seen to be wrong without the broker: an end before its start, an
    /// end for a partition the start does not name.
    pub(crate) fn new(from: Begin, to: Option<Until>) -> Result<Spec, String> {
        match (&from, &to) {
            (Begin::Time(f), Some(Until::Time(t))) if f > t => {
                return Err(format!("--from-time {} is after --to-time {}", rfc3339(*f), rfc3339(*t)));
            }
            (Begin::Offsets(f), Some(Until::Offsets(t))) => {
                if let (PerPartition::Each(fm), PerPartition::Each(tm)) = (f, t) {
                    if let Some(p) = tm.keys().find(|p| !fm.contains_key(p)) {
                        return Err(format!("--to-offset names partition {p}, which --from-offset does not replay"));
                    }
                }
                let partitions: Vec<i32> = match (f, t) {
                    (PerPartition::Each(m), _) => m.keys().copied().collect(),
                    (_, PerPartition::Each(m)) => m.keys().copied().collect(),
                    _ => vec![0],
                };
                for p in partitions {
                    if let (Some(Start::At(a)), Some(b)) = (f.get(p), t.get(p)) {
                        if a > b {
                            return Err(format!("partition {p}: --from-offset {a} is after --to-offset {b}"));
                        }
                    }
                }
            }
            _ => {}
        }
        Ok(Spec { from, to })
    }

    /// The range as the flags gave it, for the report.
    pub(crate) fn describe(&self) -> String {
        let from = match &self.from {
            Begin::Offsets(o) => format!(
                "--from-offset {}",
                show(o, |s| match s {
                    Start::Earliest => "earliest".into(),
                    Start::At(n) => n.to_string(),
                })
            ),
            Begin::Time(t) => format!("--from-time {}", rfc3339(*t)),
        };
        let to = match &self.to {
            None => "to the high watermark at the start".into(),
            Some(Until::Offsets(o)) => format!("--to-offset {}", show(o, |n| n.to_string())),
            Some(Until::Time(t)) => format!("--to-time {}", rfc3339(*t)),
        };
        format!("{from}, {to}")
    }
}

fn show<T: Copy>(o: &PerPartition<T>, f: impl Fn(T) -> String) -> String {
    match o {
        PerPartition::All(v) => f(*v),
        PerPartition::Each(m) => m.iter().map(|(p, v)| format!("{p}:{}", f(*v))).collect::<Vec<_>>().join(","),
    }
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_else(|_| t.to_string())
}

/// One partition's range, resolved against the broker.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Planned {
    pub partition: i32,
    /// The oldest offset the topic still holds, and the next one to be written, at the start.
    pub low: i64,
    pub high: i64,
    /// The records read: `[start, end)`.
    pub start: i64,
    pub end: i64,
    /// Asked for but past the topic's retention: `[from, to)` no longer exists.
    pub gone: Option<(i64, i64)>,
}

/// Why a range could not be resolved.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ResolveError {
    #[error("topic {0} does not exist")]
    NoTopic(String),
    #[error("topic {topic} has no partition {partitions:?} (it has {count})")]
    NoPartition { topic: String, partitions: Vec<i32>, count: usize },
    #[error(
        "the broker answered offset {offset} of partition {partition} for {time}, but that record is from \
         {record_ms} ms since the epoch, before it, and later records are not: its time lookup cannot be \
         trusted here; give --from-offset/--to-offset instead"
    )]
    BadTimeAnswer { partition: i32, time: String, offset: i64, record_ms: i64 },
    #[error("{what}: {source}")]
    Kafka { what: String, source: KafkaError },
}

impl ResolveError {
    /// A flag that names what the topic does not have: bad input, not an unreachable broker.
    pub(crate) fn is_bad_input(&self) -> bool {
        matches!(self, ResolveError::NoTopic(_) | ResolveError::NoPartition { .. })
    }
}

fn kafka_err(what: impl Into<String>) -> impl FnOnce(KafkaError) -> ResolveError {
    let what = what.into();
    move |source| ResolveError::Kafka { what, source }
}

fn millis(t: OffsetDateTime) -> i64 {
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

/// The timestamp of the record at `offset` (the next one, if that offset holds none), read with
/// `consumer` assigned to it alone. Blocking.
fn timestamp_at(consumer: &BaseConsumer, topic: &str, p: i32, offset: i64) -> Result<Option<i64>, ResolveError> {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, p, Offset::Offset(offset)).map_err(kafka_err("assigning"))?;
    consumer.assign(&tpl).map_err(kafka_err("assigning"))?;
    let deadline = Instant::now() + ADMIN_TIMEOUT;
    while Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) if m.partition() == p && m.offset() >= offset => return Ok(m.timestamp().to_millis()),
            Some(Err(KafkaError::PartitionEOF(_))) => return Ok(None),
            Some(Err(e)) => return Err(kafka_err(format!("reading partition {p} at {offset}"))(e)),
            _ => {}
        }
    }
    Ok(None)
}

/// The first offset of partition `p` whose record is at or after `time`: the broker's answer
/// (librdkafka's `offsets_for_times`), checked against the record it names. A broker must name a
/// record at or after `time`, or the end; tansu 0.6 answers 0 for a time after the partition's
/// last record, which would read the whole partition for a `--from-time` and nothing for a
/// `--to-time`. When the named record is older than `time` and so is the last one, the answer is
/// the end; when only the named one is, the broker's index cannot be used and the replay stops.
fn offset_for_time(
    consumer: &BaseConsumer,
    topic: &str,
    p: i32,
    time: OffsetDateTime,
    (low, high): (i64, i64),
) -> Result<i64, ResolveError> {
    let ms = millis(time);
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, p, Offset::Offset(ms)).map_err(kafka_err("asking offsets for a time"))?;
    let answer = consumer.offsets_for_times(tpl, ADMIN_TIMEOUT).map_err(kafka_err("asking offsets for a time"))?;
    let named = match answer.find_partition(topic, p).map(|e| (e.offset(), e.error())) {
        Some((_, Err(e))) => return Err(kafka_err(format!("offsets for a time, partition {p}"))(e)),
        Some((Offset::Offset(o), _)) => o.clamp(low, high),
        _ => high,
    };
    if named >= high {
        return Ok(high);
    }
    match timestamp_at(consumer, topic, p, named)? {
        Some(at) if at < ms => match timestamp_at(consumer, topic, p, high - 1)? {
            Some(last) if last < ms => Ok(high),
            _ => Err(ResolveError::BadTimeAnswer { partition: p, time: rfc3339(time), offset: named, record_ms: at }),
        },
        _ => Ok(named),
    }
}

/// Resolves the spec into one range per partition replayed, in partition order, with a client
/// of its own: the time lookups read single records, and a record fetched for them must never
/// reach the consumer that replays. Blocking (librdkafka calls).
pub(crate) fn resolve(kafka: &KafkaArgs, topic: &str, spec: &Spec) -> Result<Vec<Planned>, ResolveError> {
    let consumer = &super::consumer::consumer(kafka).map_err(kafka_err("creating a consumer"))?;
    let md = consumer.fetch_metadata(Some(topic), ADMIN_TIMEOUT).map_err(kafka_err("reading the topic's metadata"))?;
    let Some(t) = md.topics().iter().find(|t| t.name() == topic && t.error().is_none()) else {
        return Err(ResolveError::NoTopic(topic.to_string()));
    };
    let mut partitions: Vec<i32> = t.partitions().iter().map(|p| p.id()).collect();
    partitions.sort_unstable();
    let mut named: Vec<i32> = Vec::new();
    if let Begin::Offsets(PerPartition::Each(m)) = &spec.from {
        named.extend(m.keys());
    }
    if let Some(Until::Offsets(PerPartition::Each(m))) = &spec.to {
        named.extend(m.keys());
    }
    let mut unknown: Vec<i32> = named.into_iter().filter(|p| !partitions.contains(p)).collect();
    unknown.sort_unstable();
    unknown.dedup();
    if !unknown.is_empty() {
        return Err(ResolveError::NoPartition { topic: topic.into(), partitions: unknown, count: partitions.len() });
    }
    let mut out = Vec::new();
    for p in partitions {
        if let Begin::Offsets(o) = &spec.from {
            if o.get(p).is_none() {
                continue;
            }
        }
        let (low, high) = consumer
            .fetch_watermarks(topic, p, ADMIN_TIMEOUT)
            .map_err(kafka_err(format!("reading partition {p}'s watermarks")))?;
        let asked_from = match &spec.from {
            Begin::Offsets(o) => match o.get(p) {
                Some(Start::At(n)) => n,
                _ => low,
            },
            Begin::Time(t) => offset_for_time(consumer, topic, p, *t, (low, high))?,
        };
        let asked_to = match &spec.to {
            None => high,
            Some(Until::Offsets(o)) => o.get(p).unwrap_or(high),
            Some(Until::Time(t)) => offset_for_time(consumer, topic, p, *t, (low, high))?,
        };
        out.push(clamp(p, (asked_from, asked_to), (low, high)));
    }
    Ok(out)
}

/// The range asked for, `[from, to)`, within what the partition holds, `[low, high)`: what lies
/// below `low` is gone (retention deleted it), what lies at or past `high` is not read (it did
/// not exist when the replay started).
fn clamp(partition: i32, (from, to): (i64, i64), (low, high): (i64, i64)) -> Planned {
    let gone_to = to.min(low);
    let gone = (from < gone_to).then_some((from, gone_to));
    let end = to.min(high).max(low);
    let start = from.max(low).min(end);
    Planned { partition, low, high, start, end, gone }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_for_all_or_each_partition() {
        assert_eq!(parse_from_offset("1200"), Ok(PerPartition::All(Start::At(1200))));
        assert_eq!(parse_from_offset("earliest"), Ok(PerPartition::All(Start::Earliest)));
        let each = parse_from_offset("0:1200, 1:0,3:earliest").expect("valid");
        assert_eq!(each.get(0), Some(Start::At(1200)));
        assert_eq!(each.get(3), Some(Start::Earliest));
        assert_eq!(each.get(2), None, "a partition not named is not replayed");
        assert_eq!(parse_to_offset("0:5,2:9").expect("valid").get(2), Some(9));
    }

    #[test]
    fn bad_offsets_are_refused_with_the_reason() {
        for bad in ["x", "-1", "0:", ":5", "0:5,0:6", "a:1", "1.5", "0:-3", "", "0:1;1:2"] {
            assert!(parse_from_offset(bad).is_err(), "{bad:?}");
        }
        assert!(parse_to_offset("earliest").is_err(), "an end is an offset");
        assert!(parse_from_offset("0:5,0:6").is_err_and(|e| e.contains("twice")));
        assert!(parse_time("yesterday").is_err());
        assert!(parse_time("2026-12-01T09:30:00+01:00").is_ok());
    }

    #[test]
    fn what_retention_deleted_is_gone_and_the_end_is_the_high_watermark() {
        let range = |asked, held| {
            let p = clamp(0, asked, held);
            (p.start, p.end, p.gone)
        };
        assert_eq!(range((0, 100), (0, 100)), (0, 100, None), "all of it");
        assert_eq!(range((20, 100), (50, 100)), (50, 100, Some((20, 50))), "20..50 past retention");
        assert_eq!(range((20, 40), (50, 100)), (50, 50, Some((20, 40))), "all of the range past retention");
        assert_eq!(range((50, 500), (50, 100)), (50, 100, None), "never past the high watermark");
        assert_eq!(range((300, 500), (50, 100)), (100, 100, None), "a start past the end reads nothing");
        assert_eq!(range((60, 70), (50, 100)), (60, 70, None));
    }

    #[test]
    fn an_end_before_its_start_is_refused_before_anything_is_contacted() {
        let t = |s: &str| parse_time(s).expect("time");
        let off = |s: &str| Begin::Offsets(parse_from_offset(s).expect("offsets"));
        let to = |s: &str| Some(Until::Offsets(parse_to_offset(s).expect("offsets")));
        assert!(
            Spec::new(Begin::Time(t("2026-12-02T00:00:00Z")), Some(Until::Time(t("2026-12-01T00:00:00Z")))).is_err()
        );
        assert!(Spec::new(Begin::Time(t("2026-12-01T00:00:00Z")), Some(Until::Time(t("2026-12-01T00:00:00Z")))).is_ok());
        assert!(Spec::new(off("10"), to("5")).is_err());
        assert!(Spec::new(off("0:10,1:0"), to("5")).is_err(), "partition 0 would end before it starts");
        assert!(Spec::new(off("0:1"), to("1:5")).is_err(), "an end for a partition not replayed");
        assert!(Spec::new(off("0:1,1:2"), to("1:5")).is_ok());
        assert!(Spec::new(off("earliest"), to("0")).is_ok(), "earliest is resolved against the broker");
    }
}
