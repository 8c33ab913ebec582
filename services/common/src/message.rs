//! The one message type every part of the pipeline shares, its validation, and the shard rule.
//!
//! A client sends a [`NewMessage`] (id and `sent_at` optional); the ingest turns it into a
//! [`Message`] (every field present and valid) and that exact JSON travels through Kafka to the
//! writer, which decodes it with the same [`Message::decode`] before writing anything.

use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Number of MySQL shard tables (`messages_00` … `messages_15`). Part of the schema, not a knob.
pub const SHARDS: u32 = 16;

/// Default largest body, in bytes of UTF-8.
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024;

/// The most `MAX_BODY_BYTES` may be set to: the largest body every store holds, so that a 202 is
/// never followed by a store refusing the message for its size. MySQL is the tightest: the writer
/// sends a row as hex (two bytes per body byte, `mysql::insert`) and a single row must fit one
/// `max_allowed_packet`, 16 MiB by MariaDB's default, so 4 MiB of body is 8 MiB of SQL with
/// room for the other fields. MongoDB's document limit (16 MiB of BSON, the body raw) and
/// MEDIUMTEXT's 16 MiB are looser, and Elasticsearch's 100 MB request holds one such body
/// escaped six times over in JSON. A MariaDB configured with a smaller `max_allowed_packet`
/// lowers this bound (docs/explanation/trust.md). Proven in every real store by
/// `stores/tests/versions.rs` `every_store_holds_the_largest_body_the_edge_may_allow`.
pub const MAX_STORABLE_BODY_BYTES: usize = 4 << 20;

/// `MAX_BODY_BYTES` as the ingest and the writer read it: 1 to [`MAX_STORABLE_BODY_BYTES`].
pub fn parse_max_body_bytes(s: &str) -> Result<usize, String> {
    let n: usize = s.trim().parse().map_err(|e| format!("{s:?}: {e}"))?;
    if (1..=MAX_STORABLE_BODY_BYTES).contains(&n) {
        Ok(n)
    } else {
        Err(format!(
            "{n} bytes: must be 1 to {MAX_STORABLE_BODY_BYTES}, the largest body every store holds (MySQL takes a row \
             as hex in one max_allowed_packet of 16 MiB)"
        ))
    }
}

/// Longest id, sender and recipient, in characters.
pub const MAX_NAME_CHARS: usize = 64;

/// The UTC years every store can hold in `sent_at`: MySQL/MariaDB `DATETIME` is specified for
/// 1000-01-01 to 9999-12-31 (strict mode refuses year 10000, and sqlx cannot even encode a
/// negative year). Elasticsearch and MongoDB hold a wider range, so MySQL sets the limit. The
/// check is on the UTC instant, because that is what every store keeps: `0000-01-01T00:00:00+00:01`
/// is year -1 in UTC.
pub const SENT_AT_YEARS: std::ops::RangeInclusive<i32> = 1000..=9999;

/// A message as a client posts it. Unknown fields are refused, so a typo never silently drops data.
// The field docs and `schema` attributes are the OpenAPI document's description of a message
// (the ingest's `openapi` module); the checks themselves are `NewMessage::into_message`'s.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewMessage {
    /// The message's id, an idempotency key: posting it again replaces the stored message with
    /// the newer version in every store. Absent or null: the ingest gives it a UUIDv7.
    #[serde(default)]
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub id: Option<String>,
    /// 1 to 64 characters of any kind.
    #[schema(min_length = 1, max_length = 64)]
    pub sender: String,
    /// 1 to 64 characters of any kind.
    #[schema(min_length = 1, max_length = 64)]
    pub recipient: String,
    /// UTF-8 text of at most `MAX_BODY_BYTES` bytes (16 KiB unless the operator set it; 4 MiB
    /// at most), stored byte for byte.
    pub body: String,
    /// RFC 3339, in UTC years 1000 to 9999 (what MySQL's `DATETIME` holds); kept to the
    /// millisecond. Absent or null: the time the ingest received it. Kept as text here so that a bad
    /// value is reported as a field error (422), not as a JSON syntax error.
    #[serde(default)]
    #[schema(format = DateTime)]
    pub sent_at: Option<String>,
}

/// A complete, validated message: what goes on the topic and into every store.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Message {
    pub id: String,
    pub sender: String,
    pub recipient: String,
    pub body: String,
    /// Always UTC and whole milliseconds once it left the ingest (see [`normalize_sent_at`]).
    #[serde(with = "time::serde::rfc3339")]
    pub sent_at: OffsetDateTime,
    /// When the ingest accepted it, as an order every store applies: of two messages with one
    /// id, every store keeps the higher version ([`crate::version`]). 0 in records written by
    /// an ingest older than versions.
    #[serde(default)]
    pub version: u64,
}

/// One field that failed validation, and why.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FieldError {
    pub field: &'static str,
    pub reason: String,
}

/// Limits that validation enforces; the body limit is configurable per service.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_body_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_body_bytes: DEFAULT_MAX_BODY_BYTES }
    }
}

/// A fresh time-ordered unique id (UUIDv7, hyphenated: 36 chars of `[0-9a-f-]`).
pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// The shard table index of an id: CRC-32 (IEEE 802.3, the zlib/`crc32fast` polynomial) of the
/// id's UTF-8 bytes, modulo [`SHARDS`].
///
/// CRC-32 is a fixed, standardised function, so it can never drift with a library upgrade, and
/// MySQL computes the same value (`CRC32(id) % 16`), which lets reconcile check placement in SQL.
/// Changing this function would strand every stored row: never change it.
pub fn shard_of(id: &str) -> u32 {
    crc32fast::hash(id.as_bytes()) % SHARDS
}

/// The table name for a shard index: `messages_00` … `messages_15`.
pub fn shard_table(shard: u32) -> String {
    format!("messages_{shard:02}")
}

fn check_id(id: &str, errors: &mut Vec<FieldError>) {
    let ok_len = (1..=MAX_NAME_CHARS).contains(&id.len());
    let ok_chars = id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !ok_len || !ok_chars {
        errors.push(FieldError {
            field: "id",
            reason: format!("must be 1-{MAX_NAME_CHARS} characters of [A-Za-z0-9_-]"),
        });
    }
}

fn check_name(field: &'static str, value: &str, errors: &mut Vec<FieldError>) {
    let n = value.chars().count();
    if n == 0 || n > MAX_NAME_CHARS {
        errors.push(FieldError { field, reason: format!("must be 1-{MAX_NAME_CHARS} characters, got {n}") });
    }
}

fn check_body(body: &str, limits: Limits, errors: &mut Vec<FieldError>) {
    if body.len() > limits.max_body_bytes {
        errors.push(FieldError {
            field: "body",
            reason: format!("must be at most {} bytes, got {}", limits.max_body_bytes, body.len()),
        });
    }
}

/// The form every store receives: converted to UTC and truncated to whole milliseconds, the
/// finest instant every store holds (MongoDB's BSON date and Elasticsearch's `date` keep
/// milliseconds; MySQL's `DATETIME(6)` would keep microseconds). Truncating at the edge means the
/// four stores hold the same instant, and a value like `9999-12-31T23:59:59.9999999Z` cannot be
/// rounded up into year 10000 by a server that rounds instead of truncating.
pub fn normalize_sent_at(t: OffsetDateTime) -> OffsetDateTime {
    let utc = t.to_offset(time::UtcOffset::UTC);
    let millis = utc.nanosecond() / 1_000_000 * 1_000_000;
    utc.replace_nanosecond(millis).unwrap_or(utc)
}

fn check_sent_at(t: OffsetDateTime, errors: &mut Vec<FieldError>) {
    let year = t.to_offset(time::UtcOffset::UTC).year();
    if !SENT_AT_YEARS.contains(&year) {
        errors.push(FieldError {
            field: "sent_at",
            reason: format!(
                "must be between years {} and {} in UTC, got UTC year {year}",
                SENT_AT_YEARS.start(),
                SENT_AT_YEARS.end()
            ),
        });
    }
}

impl NewMessage {
    /// Validates every field and fills what the server supplies (id, `sent_at`, and the
    /// `version` the ingest stamped it with, [`crate::version::VersionClock`]). Returns all field
    /// errors at once, so a client can fix a request in one round trip.
    pub fn into_message(self, limits: Limits, now: OffsetDateTime, version: u64) -> Result<Message, Vec<FieldError>> {
        let mut errors = Vec::new();
        if let Some(id) = &self.id {
            check_id(id, &mut errors);
        }
        check_name("sender", &self.sender, &mut errors);
        check_name("recipient", &self.recipient, &mut errors);
        check_body(&self.body, limits, &mut errors);
        let sent_at = match self.sent_at.as_deref().map(|s| OffsetDateTime::parse(s, &Rfc3339)) {
            None => Some(normalize_sent_at(now)),
            Some(Ok(t)) => {
                check_sent_at(t, &mut errors);
                Some(normalize_sent_at(t))
            }
            Some(Err(e)) => {
                errors.push(FieldError { field: "sent_at", reason: format!("not RFC 3339: {e}") });
                None
            }
        };
        match (errors.is_empty(), sent_at) {
            (true, Some(sent_at)) => Ok(Message {
                id: self.id.unwrap_or_else(new_id),
                sender: self.sender,
                recipient: self.recipient,
                body: self.body,
                sent_at,
                version,
            }),
            _ => Err(errors),
        }
    }
}

/// Why a record read back from Kafka is not a valid [`Message`].
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("not a message: {0}")]
    Json(#[from] serde_json::Error),
    #[error("invalid {}: {}", .0[0].field, .0[0].reason)]
    Invalid(Vec<FieldError>),
    #[error("an empty array of messages")]
    Empty,
}

impl Message {
    /// Checks the invariants a stored message must hold (the same rules as [`NewMessage`]).
    pub fn validate(&self, limits: Limits) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        check_id(&self.id, &mut errors);
        check_name("sender", &self.sender, &mut errors);
        check_name("recipient", &self.recipient, &mut errors);
        check_body(&self.body, limits, &mut errors);
        check_sent_at(self.sent_at, &mut errors);
        if self.version >= crate::version::VERSION_LIMIT {
            errors.push(FieldError { field: "version", reason: format!("must be below 10^18, got {}", self.version) });
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// Decodes and validates a Kafka record payload. `sent_at` is normalised as the ingest does,
    /// so records written by an older ingest (with a local offset) are stored the same way.
    pub fn decode(payload: &[u8], limits: Limits) -> Result<Message, DecodeError> {
        let mut msg: Message = serde_json::from_slice(payload)?;
        msg.check(limits)?;
        Ok(msg)
    }

    /// Validates a message read from the topic and normalises its `sent_at` (see [`decode`]).
    ///
    /// [`decode`]: Message::decode
    pub fn check(&mut self, limits: Limits) -> Result<(), DecodeError> {
        self.validate(limits).map_err(DecodeError::Invalid)?;
        self.sent_at = normalize_sent_at(self.sent_at);
        Ok(())
    }

    /// The JSON that travels on the topic and is stored in Redis.
    ///
    /// Serialising cannot fail for a validated message (strings, and a `sent_at` inside
    /// [`SENT_AT_YEARS`], which RFC 3339 can express); the fallback keeps this path panic-free
    /// anyway, and its output is refused by [`Message::decode`] downstream rather than lost.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"unserialisable\":{:?}}}", e.to_string()))
    }

    /// [`Message::to_json`], appended to `out` (the same fallback).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        let start = out.len();
        if let Err(e) = serde_json::to_writer(&mut *out, self) {
            out.truncate(start);
            out.extend_from_slice(format!("{{\"unserialisable\":{:?}}}", e.to_string()).as_bytes());
        }
    }

    pub fn shard(&self) -> u32 {
        shard_of(&self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(sender: &str) -> NewMessage {
        NewMessage { id: None, sender: sender.into(), recipient: "bob".into(), body: "hi".into(), sent_at: None }
    }

    #[test]
    fn shard_rule_is_fixed() {
        // These values are part of the storage format (computed independently with Python's
        // zlib.crc32): if this test fails, stored rows would be looked up in the wrong table.
        assert_eq!(crc32fast::hash(b"a"), 0xE8B7BE43);
        let fixed = [("a", 3), ("msg-1", 3), ("0192f5c0-0000-7000-8000-000000000000", 10), ("alice-000001", 12)];
        for (id, shard) in fixed {
            assert_eq!(shard_of(id), shard, "shard of {id}");
        }
        assert_eq!(shard_table(0), "messages_00");
        assert_eq!(shard_table(15), "messages_15");
    }

    #[test]
    fn fills_id_and_sent_at() {
        let now = OffsetDateTime::now_utc();
        let m = new("alice").into_message(Limits::default(), now, 1).unwrap();
        assert_eq!(m.id.len(), 36);
        assert_eq!(m.sent_at, normalize_sent_at(now), "the server time, in UTC whole milliseconds");
        let again = new("alice").into_message(Limits::default(), now, 1).unwrap();
        assert!(again.id > m.id, "ids are time ordered");
    }

    #[test]
    fn reports_every_bad_field() {
        let bad = NewMessage {
            id: Some("has space".into()),
            sender: String::new(),
            recipient: "r".repeat(65),
            body: "x".repeat(10),
            sent_at: Some("yesterday".into()),
        };
        let errs = bad.into_message(Limits { max_body_bytes: 5 }, OffsetDateTime::now_utc(), 1).unwrap_err();
        let fields: Vec<_> = errs.iter().map(|e| e.field).collect();
        assert_eq!(fields, ["id", "sender", "recipient", "body", "sent_at"]);
    }

    fn at(sent_at: &str) -> Result<Message, Vec<FieldError>> {
        NewMessage { sent_at: Some(sent_at.into()), ..new("alice") }.into_message(
            Limits::default(),
            OffsetDateTime::now_utc(),
            7,
        )
    }

    #[test]
    fn sent_at_must_be_a_utc_year_every_store_holds() {
        // Both parse as RFC 3339 but leave MySQL's DATETIME range once converted to UTC: the first
        // crashed the writer for good (sqlx cannot encode year -1), the second was retried forever.
        for bad in ["0000-01-01T00:00:00+00:01", "9999-12-31T23:59:59-00:01", "0999-12-31T23:59:59.999999Z"] {
            let errs = at(bad).unwrap_err();
            assert_eq!(errs[0].field, "sent_at", "{bad}");
        }
        for good in ["1000-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999Z", "1000-01-01T23:59:00+23:59"] {
            let m = at(good).unwrap_or_else(|e| panic!("{good}: {e:?}"));
            assert_eq!(m.sent_at.offset(), time::UtcOffset::UTC, "stored as UTC");
            assert_eq!(m.sent_at.nanosecond() % 1_000_000, 0, "whole milliseconds");
            assert!(SENT_AT_YEARS.contains(&m.sent_at.year()));
        }
        let m = at("2026-11-30T12:00:00.123456789+02:00").unwrap();
        assert_eq!(
            m.to_json(),
            format!(
                r#"{{"id":"{}","sender":"alice","recipient":"bob","body":"hi","sent_at":"2026-11-30T10:00:00.123Z","version":7}}"#,
                m.id
            )
        );
    }

    #[test]
    fn the_writer_refuses_what_the_edge_refuses() {
        let json = r#"{"id":"x","sender":"a","recipient":"b","body":"c","sent_at":"0000-01-01T00:00:00+00:01"}"#;
        assert!(matches!(Message::decode(json.as_bytes(), Limits::default()), Err(DecodeError::Invalid(_))));
        let old = r#"{"id":"x","sender":"a","recipient":"b","body":"c","sent_at":"2020-01-01T01:00:00+01:00"}"#;
        let m = Message::decode(old.as_bytes(), Limits::default()).unwrap();
        assert_eq!(m.sent_at.offset(), time::UtcOffset::UTC, "records from an older ingest are normalised too");
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let err = serde_json::from_str::<NewMessage>(r#"{"sender":"a","recipient":"b","body":"c","x":1}"#);
        assert!(err.unwrap_err().to_string().contains("unknown field"));
    }

    #[test]
    fn round_trips_through_json() {
        let m = new("alice").into_message(Limits::default(), OffsetDateTime::now_utc(), 7).unwrap();
        let back = Message::decode(m.to_json().as_bytes(), Limits::default()).unwrap();
        assert_eq!(back, m);
        assert!(matches!(Message::decode(b"{}", Limits::default()), Err(DecodeError::Json(_))));
    }

    #[test]
    fn max_body_bytes_is_bounded_by_what_every_store_holds() {
        assert_eq!(parse_max_body_bytes("16384"), Ok(16384));
        assert_eq!(parse_max_body_bytes(&MAX_STORABLE_BODY_BYTES.to_string()), Ok(MAX_STORABLE_BODY_BYTES));
        let e = parse_max_body_bytes(&(MAX_STORABLE_BODY_BYTES + 1).to_string()).expect_err("over the bound");
        assert!(e.contains("max_allowed_packet"), "{e}");
        assert!(parse_max_body_bytes("0").is_err());
        assert!(parse_max_body_bytes("18446744073709551615").is_err(), "no overflow in the request bound later");
        assert!(parse_max_body_bytes("lots").is_err());
    }
}
