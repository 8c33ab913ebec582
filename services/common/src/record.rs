//! The topic's record format: what the ingest writes to Kafka and the writer reads back.
//!
//! A record's value is either one [`Message`] as a JSON object (a single POST, and every record
//! an older ingest wrote) or a JSON array of messages (a batch POST, cut into records of at most
//! a byte budget). One record per request instead of one per message is the ingest's largest
//! saving in batches: librdkafka's work, its delivery reports and the broker's (tansu's) work
//! are per record, not per byte (docs/performance.md, "One record per request").
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
                new.into_message(Limits::default(), OffsetDateTime::now_utc()).expect("valid")
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
