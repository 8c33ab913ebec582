//! The topic's record format: what the ingest writes to Kafka and the writer reads back.
//!
//! A record's value is either one [`Message`] as a JSON object (a single POST, and every record
//! an older ingest wrote) or a JSON array of messages (a batch POST, cut into records of at most
//! a byte budget). One record per request instead of one per message is the ingest's largest
//! saving in batches: librdkafka's work, its delivery reports and the broker's (tansu's) work
//! are per record, not per byte (docs/results/performance-log.md, "Third round: one record per request").
//!
//! Offsets stay per record: a record is committed when every message in it is stored, and
//! redelivered whole otherwise. Every store writes by id, so a redelivered array is harmless.

use crate::message::{DecodeError, Limits, Message};
use serde_json::Value;

/// Encodes validated messages as records of at most `max_bytes` each (a message larger than
/// that on its own gets a record of its own): one object for a single message, arrays otherwise.
/// `max_bytes` 0 is one object per message, the format before batch records: what a writer
/// older than this module can read.
pub fn encode(msgs: &[Message], max_bytes: usize) -> Vec<Vec<u8>> {
    if max_bytes == 0 || msgs.len() == 1 {
        return msgs.iter().map(|m| m.to_json().into_bytes()).collect();
    }
    let mut records = Vec::new();
    let mut record = Vec::with_capacity(max_bytes.min(msgs.len().saturating_mul(384)) + 2);
    let mut one = Vec::with_capacity(384);
    for m in msgs {
        one.clear();
        m.write_json(&mut one);
        // `[` + items + `,` between + `]`.
        if record.len() > 1 && record.len() + 1 + one.len() + 1 > max_bytes {
            record.push(b']');
            records.push(std::mem::take(&mut record));
        }
        record.push(if record.is_empty() { b'[' } else { b',' });
        record.extend_from_slice(&one);
    }
    if !record.is_empty() {
        record.push(b']');
        records.push(record);
    }
    records
}

/// Joins records already encoded by [`encode`] into one: a single record is kept as it is; two or
/// more become one array of all their messages, in order (an object is one item, an array's
/// items are spliced in). The ingest's ring consumer uses it to send every request of a moment
/// as one Kafka record (docs/results/performance-log.md, "Fourth round: requests gathered into records").
#[derive(Debug, Default)]
pub struct Joined {
    buf: Vec<u8>,
    /// The first record, kept whole until a second one comes.
    first: Option<Vec<u8>>,
    records: usize,
}

/// A record's items without the array's brackets (an object is its own item).
fn items(record: &[u8]) -> &[u8] {
    match record {
        [b'[', inner @ .., b']'] => inner,
        _ => record,
    }
}

impl Joined {
    /// Records joined so far.
    pub fn records(&self) -> usize {
        self.records
    }

    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// The joined record's length if `record` were added.
    pub fn len_with(&self, record: &[u8]) -> usize {
        match (&self.first, self.records) {
            (_, 0) => record.len(),
            (Some(first), _) => 1 + items(first).len() + 1 + items(record).len() + 1,
            (None, _) => self.buf.len() + 1 + items(record).len() + 1,
        }
    }

    /// Adds a record (one produced by [`encode`]: an object, or an array without spaces around
    /// its brackets).
    pub fn push(&mut self, record: Vec<u8>) {
        self.records += 1;
        if self.records == 1 {
            self.first = Some(record);
            return;
        }
        if let Some(first) = self.first.take() {
            self.buf.clear();
            self.buf.push(b'[');
            self.buf.extend_from_slice(items(&first));
        }
        self.buf.push(b',');
        self.buf.extend_from_slice(items(&record));
    }

    /// The joined record; `self` is empty again.
    pub fn take(&mut self) -> Option<Vec<u8>> {
        let records = std::mem::take(&mut self.records);
        match (self.first.take(), records) {
            (_, 0) => None,
            (Some(first), _) => Some(first),
            (None, _) => {
                let mut out = std::mem::take(&mut self.buf);
                out.push(b']');
                Some(out)
            }
        }
    }
}

/// One item of a record that the writer cannot store: it goes to the dead-letter topic.
#[derive(Debug)]
pub struct BadItem {
    /// Its place in the record's array (`None`: the record as a whole).
    pub index: Option<usize>,
    /// The message id, when the item parsed as a message.
    pub id: Option<String>,
    /// The item's bytes, as they will be dead-lettered.
    pub payload: Vec<u8>,
    pub error: DecodeError,
}

/// What a record holds: its valid messages, and whatever in it is not one.
#[derive(Debug, Default)]
pub struct Decoded {
    pub messages: Vec<Message>,
    pub bad: Vec<BadItem>,
}

/// Decodes and validates a record (either format). A well-formed array parses in one pass; a
/// bad one is taken apart item by item, so one poison item never costs its neighbours.
pub fn decode(payload: &[u8], limits: Limits) -> Decoded {
    let whole = |error: DecodeError| Decoded {
        messages: Vec::new(),
        bad: vec![BadItem { index: None, id: None, payload: payload.to_vec(), error }],
    };
    if payload.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'[') {
        return match Message::decode(payload, limits) {
            Ok(m) => Decoded { messages: vec![m], bad: Vec::new() },
            Err(e) => whole(e),
        };
    }
    let mut out = Decoded::default();
    match serde_json::from_slice::<Vec<Message>>(payload) {
        Ok(msgs) if msgs.is_empty() => return whole(DecodeError::Empty),
        Ok(msgs) => {
            for (i, m) in msgs.into_iter().enumerate() {
                out.push(i, m, limits);
            }
        }
        Err(e) => match serde_json::from_slice::<Vec<Value>>(payload) {
            Ok(items) if items.is_empty() => return whole(DecodeError::Empty),
            Ok(items) => {
                for (i, item) in items.into_iter().enumerate() {
                    match serde_json::from_value::<Message>(item.clone()) {
                        Ok(m) => out.push(i, m, limits),
                        Err(e) => out.bad.push(BadItem {
                            index: Some(i),
                            id: None,
                            payload: item.to_string().into_bytes(),
                            error: e.into(),
                        }),
                    }
                }
            }
            Err(_) => return whole(e.into()),
        },
    }
    out
}

impl Decoded {
    /// A parsed item: kept when valid, dead-lettered (with its id) otherwise.
    fn push(&mut self, index: usize, mut m: Message, limits: Limits) {
        match m.check(limits) {
            Ok(()) => self.messages.push(m),
            Err(error) => {
                self.bad.push(BadItem { index: Some(index), payload: m.to_json().into_bytes(), id: Some(m.id), error })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::NewMessage;
    use time::OffsetDateTime;

    fn msgs(n: usize, body: &str) -> Vec<Message> {
        (0..n)
            .map(|i| {
                let new = NewMessage {
                    id: Some(format!("m{i:03}")),
                    sender: "a".into(),
                    recipient: "b".into(),
                    body: body.into(),
                    // Fixed: RFC 3339 drops trailing zeros of the fraction, so `now` would
                    // give messages of different lengths and the budget arithmetic below would
                    // depend on the clock (it failed in CI: 50 records, not 34).
                    sent_at: Some("2026-11-30T12:00:00.123456Z".into()),
                };
                new.into_message(Limits::default(), OffsetDateTime::now_utc(), 1).expect("valid")
            })
            .collect()
    }

    fn all(records: &[Vec<u8>]) -> Vec<Message> {
        records
            .iter()
            .flat_map(|r| {
                let d = decode(r, Limits::default());
                assert!(d.bad.is_empty(), "{:?}", d.bad);
                d.messages
            })
            .collect()
    }

    #[test]
    fn a_single_message_is_an_object_as_before() {
        let m = msgs(1, "hi");
        let records = encode(&m, 1 << 20);
        assert_eq!(records, vec![m[0].to_json().into_bytes()]);
        assert_eq!(all(&records), m);
    }

    #[test]
    fn a_batch_is_arrays_within_the_budget_in_order() {
        let m = msgs(100, "x");
        let one = m[0].to_json().len();
        assert_eq!(encode(&m, 1 << 20).len(), 1, "100 small messages, one record");
        // Room for three messages per record ([a,b,c] = 3 × one + 4), not four.
        let records = encode(&m, 3 * one + 4);
        assert_eq!(records.len(), 34);
        assert!(records.iter().all(|r| r.len() <= 3 * one + 4), "every record within the budget");
        assert_eq!(all(&records), m, "every message, once, in order");
        // Budget 0: one object per message, as before batch records.
        let old = encode(&m[..3], 0);
        assert_eq!(old, m[..3].iter().map(|m| m.to_json().into_bytes()).collect::<Vec<_>>());
        // A message larger than the budget still gets a record, alone.
        let big = encode(&msgs(3, &"y".repeat(1000)), 10);
        assert_eq!(big.len(), 3);
        assert_eq!(all(&big).len(), 3);
    }

    #[test]
    fn joined_records_hold_every_message_once_in_order() {
        let m = msgs(7, "z");
        let mut joined = Joined::default();
        assert_eq!(joined.take(), None, "nothing joined, no record");
        // One record alone is kept as it is: a single POST stays an object.
        let single = encode(&m[..1], 1 << 20);
        joined.push(single[0].clone());
        assert_eq!(joined.take().as_ref(), Some(&single[0]));
        assert!(joined.is_empty());
        // An object, an array, an object, an array: one flat array, every message in order.
        let parts: Vec<Vec<u8>> =
            [&m[..1], &m[1..4], &m[4..5], &m[5..]].iter().flat_map(|part| encode(part, 1 << 20)).collect();
        for k in 1..=parts.len() {
            let mut probe = Joined::default();
            parts[..k - 1].iter().for_each(|p| probe.push(p.clone()));
            let predicted = probe.len_with(&parts[k - 1]);
            probe.push(parts[k - 1].clone());
            assert_eq!(probe.take().map(|r| r.len()), Some(predicted), "len_with predicts {k} records' length");
        }
        parts.iter().for_each(|p| joined.push(p.clone()));
        assert_eq!(joined.records(), 4);
        let record = joined.take().expect("a record");
        assert_eq!(record, encode(&m, 1 << 20)[0], "the same bytes as encoding them together");
        assert_eq!(all(&[record]), m);
    }

    #[test]
    fn a_poison_item_costs_only_itself() {
        let m = msgs(3, "ok");
        let mut bad = serde_json::to_value(&m).expect("json");
        bad[1]["sent_at"] = "0000-01-01T00:00:00+00:01".into(); // parses, fails validation
        bad[2] = serde_json::json!({ "not": "a message" }); // does not parse
        let d = decode(bad.to_string().as_bytes(), Limits::default());
        assert_eq!(d.messages, vec![m[0].clone()]);
        assert_eq!(d.bad.len(), 2);
        assert_eq!((d.bad[0].index, d.bad[0].id.as_deref()), (Some(1), Some("m001")));
        assert!(matches!(d.bad[0].error, DecodeError::Invalid(_)));
        assert_eq!((d.bad[1].index, d.bad[1].id.as_deref()), (Some(2), None));
        assert_eq!(d.bad[1].payload, br#"{"not":"a message"}"#);
        for whole in [&b"[]"[..], b"[1,", b"{}", b"  "] {
            let d = decode(whole, Limits::default());
            assert!(d.messages.is_empty());
            assert_eq!(d.bad.len(), 1, "{}", String::from_utf8_lossy(whole));
            assert_eq!((d.bad[0].index, &d.bad[0].payload[..]), (None, whole));
        }
    }
}
