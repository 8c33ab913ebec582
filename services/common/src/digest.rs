//! What reconcile compares when it checks content: a fingerprint of the stored fields of one
//! message, in a canonical form every store's audit side produces from what it holds.
//!
//! Two fingerprints of the same message are equal exactly when the stores hold the same version
//! and the same sender, recipient, body and `sent_at`, whatever each store's own encoding (hex
//! literals and `DATETIME(6)` in MySQL, JSON in Redis, `_source` and `_version` in
//! Elasticsearch, BSON in MongoDB). The canonical form is:
//!
//! - each text field as its UTF-8 bytes, `sent_at` as microseconds since the Unix epoch in UTC
//!   (the finest any store keeps; the edge truncates to milliseconds, so stores agree), each
//!   hashed alone with xxh3 so a mismatch names the fields that differ, at 8 bytes a field;
//! - the version as it is.
//!
//! [`Digest::sent`] is the digest a client can compute of what it sent (k6 logs it beside each
//! accepted id): the first 8 bytes of SHA-256 over the JSON array `[sender, recipient, body,
//! sent_at]`, `sent_at` written as `YYYY-MM-DDTHH:MM:SS.mmmZ` (JavaScript's `toISOString`; six
//! digits only when the stored instant has microseconds). JSON as serde_json writes it and as
//! `JSON.stringify` does are the same bytes for every valid string (both escape only `"`, `\`
//! and control characters, with the same short forms and lowercase `\u00xx`), so k6 and
//! reconcile agree without a library of their own.

use crate::message::Message;
use sha2::{Digest as _, Sha256};
use time::OffsetDateTime;
use xxhash_rust::xxh3::xxh3_64;

/// The fields a fingerprint covers, in [`Digest::fields`] order.
pub const FIELDS: [&str; 4] = ["sender", "recipient", "body", "sent_at"];

/// A stored message's fingerprint (48 bytes: reconcile keeps one per id of the reference store).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digest {
    pub version: u64,
    /// xxh3 of each of [`FIELDS`].
    pub fields: [u64; 4],
    /// The digest of the content as a client computes it of what it sent (see the module docs).
    pub sent: u64,
}

/// A message's fields as a store returns them.
#[derive(Debug, Clone, Copy)]
pub struct Stored<'a> {
    pub sender: &'a str,
    pub recipient: &'a str,
    pub body: &'a str,
    pub sent_at: OffsetDateTime,
    pub version: u64,
}

impl<'a> From<&'a Message> for Stored<'a> {
    fn from(m: &'a Message) -> Stored<'a> {
        Stored { sender: &m.sender, recipient: &m.recipient, body: &m.body, sent_at: m.sent_at, version: m.version }
    }
}

/// Microseconds since the Unix epoch.
pub fn micros(t: OffsetDateTime) -> i64 {
    i64::try_from(t.unix_timestamp_nanos() / 1_000).unwrap_or(i64::MIN)
}

/// `sent_at` as text in the canonical form: UTC, milliseconds (microseconds when it has them).
pub fn sent_at_text(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    let (date, clock) = (t.date(), t.time());
    let frac = if t.microsecond().is_multiple_of(1000) {
        format!("{:03}", t.millisecond())
    } else {
        format!("{:06}", t.microsecond())
    };
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{frac}Z",
        date.year(),
        u8::from(date.month()),
        date.day(),
        clock.hour(),
        clock.minute(),
        clock.second()
    )
}

/// The client-side digest of a message's content (see the module docs).
pub fn sent(sender: &str, recipient: &str, body: &str, sent_at: &str) -> u64 {
    // Serialising four strings cannot fail; an empty array would only make every id mismatch.
    let json = serde_json::to_vec(&[sender, recipient, body, sent_at]).unwrap_or_default();
    let hash = Sha256::digest(&json);
    let mut first = [0u8; 8];
    first.copy_from_slice(&hash[..8]);
    u64::from_be_bytes(first)
}

/// The 16 hex digits k6 logs for a digest.
pub fn hex(d: u64) -> String {
    format!("{d:016x}")
}

impl Digest {
    pub fn of(s: Stored<'_>) -> Digest {
        let fields = [
            xxh3_64(s.sender.as_bytes()),
            xxh3_64(s.recipient.as_bytes()),
            xxh3_64(s.body.as_bytes()),
            xxh3_64(&micros(s.sent_at).to_le_bytes()),
        ];
        let sent = sent(s.sender, s.recipient, s.body, &sent_at_text(s.sent_at));
        Digest { version: s.version, fields, sent }
    }

    pub fn of_message(m: &Message) -> Digest {
        Digest::of(m.into())
    }

    /// The fields that differ from `other`'s (with `version` first when the versions do).
    pub fn differences(&self, other: &Digest) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.version != other.version {
            out.push("version");
        }
        out.extend(
            FIELDS.iter().zip(self.fields.iter().zip(&other.fields)).filter(|(_, (a, b))| a != b).map(|(f, _)| *f),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn msg(body: &str) -> Message {
        Message {
            id: "a".into(),
            sender: "al\"ice\u{0}".into(),
            recipient: "bob 🦀".into(),
            body: body.into(),
            sent_at: datetime!(2026-12-01 10:00:00.123 UTC),
            version: 9,
        }
    }

    #[test]
    fn equal_content_equal_digest_and_each_difference_is_named() {
        let a = Digest::of_message(&msg("hi"));
        assert_eq!(a, Digest::of_message(&msg("hi")));
        let mut b = msg("ho");
        b.version = 10;
        b.sent_at += time::Duration::milliseconds(1);
        let d = Digest::of_message(&b);
        assert_eq!(a.differences(&d), ["version", "body", "sent_at"]);
        assert_ne!(a.sent, d.sent);
        let mut c = msg("hi");
        c.version = 1;
        assert_eq!(a.sent, Digest::of_message(&c).sent, "the client's digest is of the content, not the version");
    }

    #[test]
    fn sent_at_text_is_javascripts_to_iso_string() {
        assert_eq!(sent_at_text(datetime!(2026-12-01 10:00:00 UTC)), "2026-12-01T10:00:00.000Z");
        assert_eq!(sent_at_text(datetime!(1000-01-01 00:00:00.5 +01:00)), "0999-12-31T23:00:00.500Z");
        assert_eq!(sent_at_text(datetime!(2026-12-01 10:00:00.000001 UTC)), "2026-12-01T10:00:00.000001Z");
    }

    #[test]
    fn the_client_digest_is_fixed() {
        // Computed independently: python3 -c "import hashlib,json;
        // print(hashlib.sha256(json.dumps(['a','b','c','2026-12-01T10:00:00.000Z'],
        // separators=(',',':')).encode()).hexdigest()[:16])"
        assert_eq!(hex(sent("a", "b", "c", "2026-12-01T10:00:00.000Z")), "bcab17fd897069c1");
    }
}
