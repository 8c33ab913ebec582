//! A batch as SQL text, so the whole batch is one round trip: `START TRANSACTION`, one multi-row
//! INSERT per shard table present, `COMMIT`, sent as one multi-statement request.
//!
//! With prepared statements a batch cost one round trip per shard table plus BEGIN and COMMIT
//! (up to 18), each a wake-up of the writer and of the server on a CPU-bound machine. A
//! multi-statement request cannot carry bind parameters, so values are written as literals that
//! need no escaping at all: strings as hex literals with a character-set introducer
//! (`_utf8mb4 X'…'`, byte-exact whatever they hold: quotes, backslashes, NUL, any plane), the
//! date and the version as digits. Table names come only from `shard_table` (digits). Nothing
//! from input is ever spliced into SQL as text.
//!
//! A row already there is replaced only by a newer version (the writer) or a newer-or-same one
//! (repair), column by column in `ON DUPLICATE KEY UPDATE` with the version assigned last, so
//! each condition reads the stored version ([`pipeline_common::version`]).

use crate::Overwrite;
use pipeline_common::message::{shard_table, Message};
use std::collections::BTreeMap;
use std::io::Write;

/// Most SQL bytes in one request, far below MariaDB's default `max_allowed_packet` (16 MiB): a
/// batch of large messages (hex doubles them) becomes several requests in the same transaction.
pub(super) const MAX_REQUEST_BYTES: usize = 4 << 20;

/// The rows of a batch, by shard table, with `sent_at` already checked and converted.
pub(super) type ByShard<'a> = BTreeMap<u32, Vec<(&'a Message, time::PrimitiveDateTime)>>;

const COLUMNS: &str = "(id, sender, recipient, body, sent_at, version)";
const BEGIN: &str = "START TRANSACTION;";

/// The requests that write `rows`, in order: the first opens the transaction and the last
/// commits it, so one request is the usual case. Each holds whole statements and at most
/// `max_bytes` of SQL (a single row larger than that still gets its own statement).
///
/// Rows are written straight into the request as bytes through one reused row buffer: building
/// a `String` per row and per statement, hex digit by `char`, then copying each twice was 9 % of
/// the writer's CPU samples under batch load.
pub(super) fn requests(rows: &ByShard<'_>, max_bytes: usize, overwrite: Overwrite) -> Vec<String> {
    // Room for a statement's closing clause and the final COMMIT.
    const SLACK: usize = 384;
    // Each row and the comma after it.
    let total: usize = rows.values().flatten().map(|(m, _)| row_len(m) + 1).sum();
    let mut out = Vec::new();
    let mut req = Vec::with_capacity((total + 128 * (rows.len() + 1)).min(max_bytes.saturating_add(SLACK)));
    req.extend_from_slice(BEGIN.as_bytes());
    let mut row = Vec::new();
    for (shard, rows) in rows {
        let head = format!("INSERT INTO {} {COLUMNS} VALUES ", shard_table(*shard));
        // Whether this shard's statement is open at the end of `req`.
        let mut open = false;
        for (m, at) in rows {
            row.clear();
            write_row(&mut row, m, at);
            if open && req.len() + row.len() + SLACK > max_bytes {
                close(&mut req, overwrite);
                open = false;
            }
            let fresh = req.is_empty() || req == BEGIN.as_bytes();
            if !open && !fresh && req.len() + head.len() + row.len() + SLACK > max_bytes {
                out.push(text(std::mem::take(&mut req)));
            }
            if open {
                req.push(b',');
            } else {
                req.extend_from_slice(head.as_bytes());
                open = true;
            }
            req.extend_from_slice(&row);
        }
        if open {
            close(&mut req, overwrite);
        }
    }
    req.extend_from_slice(b"COMMIT");
    out.push(text(req));
    out
}

/// The request as text. Everything written is ASCII (hex, digits, SQL keywords), so the check
/// cannot fail; if it ever did, the lossy copy would make the server refuse the request.
fn text(req: Vec<u8>) -> String {
    String::from_utf8(req).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Closes the open statement with the clause that applies the version rule to a row already
/// there (`ON DUPLICATE KEY UPDATE`, not `INSERT IGNORE`, which would turn a truncated value into
/// a warning and store a damaged row). The version is assigned last: every condition before it
/// compares with the stored version, with MariaDB's default left-to-right assignments and with
/// `SIMULTANEOUS_ASSIGNMENT` alike.
fn close(req: &mut Vec<u8>, overwrite: Overwrite) {
    req.extend_from_slice(match overwrite {
        Overwrite::Older => UPDATE_OLDER.as_bytes(),
        Overwrite::OlderOrSame => UPDATE_OLDER_OR_SAME.as_bytes(),
    });
}

macro_rules! update_if {
    ($cmp:literal) => {
        concat!(
            " ON DUPLICATE KEY UPDATE",
            " sender = IF(VALUES(version) ",
            $cmp,
            " version, VALUES(sender), sender),",
            " recipient = IF(VALUES(version) ",
            $cmp,
            " version, VALUES(recipient), recipient),",
            " body = IF(VALUES(version) ",
            $cmp,
            " version, VALUES(body), body),",
            " sent_at = IF(VALUES(version) ",
            $cmp,
            " version, VALUES(sent_at), sent_at),",
            " version = GREATEST(version, VALUES(version));"
        )
    };
}
const UPDATE_OLDER: &str = update_if!(">");
const UPDATE_OLDER_OR_SAME: &str = update_if!(">=");

const HEX_OPEN: &[u8] = b"_utf8mb4 X'";

/// The length [`write_row`] writes for `m` (exact for the years the API accepts, 1000 to 9999;
/// only used to size buffers): four hex literals with their commas, the 28-byte date literal,
/// its comma, the version's digits and the parentheses.
fn row_len(m: &Message) -> usize {
    let text: usize = [&m.id, &m.sender, &m.recipient, &m.body].iter().map(|s| HEX_OPEN.len() + 2 * s.len() + 2).sum();
    let digits = m.version.checked_ilog10().unwrap_or(0) as usize + 1;
    1 + text + 28 + 1 + digits + 1
}

fn write_row(r: &mut Vec<u8>, m: &Message, at: &time::PrimitiveDateTime) {
    r.reserve(row_len(m));
    r.push(b'(');
    for s in [&m.id, &m.sender, &m.recipient, &m.body] {
        hex_literal(r, s);
        r.push(b',');
    }
    // DATETIME(6) from digits only: 'YYYY-MM-DD HH:MM:SS.ffffff'.
    let _ = write!(
        r,
        "'{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:06}',{})",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second(),
        at.microsecond(),
        m.version
    );
}

/// `_utf8mb4 X'…'`: the exact bytes of `s`, read by the server as utf8mb4 text. An empty string
/// is `_utf8mb4 X''`, which is valid and empty.
fn hex_literal(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.extend_from_slice(HEX_OPEN);
    out.extend(s.bytes().flat_map(|b| [HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]));
    out.push(b'\'');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(id: &str, body: &str) -> Message {
        Message {
            id: id.into(),
            sender: "it's \\ a \"quote\"".into(),
            recipient: "🦀\u{0}\u{10FFFF}".into(),
            body: body.into(),
            sent_at: time::macros::datetime!(2026-11-30 12:34:56.789012 UTC),
            version: 1_234_567,
        }
    }

    fn at(m: &Message) -> time::PrimitiveDateTime {
        time::PrimitiveDateTime::new(m.sent_at.date(), m.sent_at.time())
    }

    #[test]
    fn row_len_is_exact() {
        for m in [msg("a-1", ""), msg("x", "🦀 é\u{0}"), msg(&"i".repeat(64), &"b".repeat(16_384))] {
            let mut r = Vec::new();
            write_row(&mut r, &m, &at(&m));
            assert_eq!(r.len(), row_len(&m), "{}", String::from_utf8_lossy(&r[..40]));
        }
    }

    #[test]
    fn values_are_hex_and_digits_only() {
        let m = msg("a-1", "x'); DROP TABLE messages_00; --");
        let mut rows = ByShard::new();
        rows.entry(m.shard()).or_default().push((&m, at(&m)));
        let reqs = requests(&rows, MAX_REQUEST_BYTES, Overwrite::Older);
        assert_eq!(reqs.len(), 1);
        let sql = &reqs[0];
        assert!(sql.starts_with("START TRANSACTION;INSERT INTO messages_"), "{sql}");
        assert!(sql.ends_with(&format!("{UPDATE_OLDER}COMMIT")), "{sql}");
        assert!(sql.contains("'2026-11-30 12:34:56.789012',1234567)"), "the version after the date: {sql}");
        assert!(!sql.contains("DROP"), "input never appears as text: {sql}");
        assert!(sql.contains("'2026-11-30 12:34:56.789012'"));
        // The body's bytes, exactly.
        let hex: String = m.body.bytes().map(|b| format!("{b:02X}")).collect();
        assert!(sql.contains(&format!("_utf8mb4 X'{hex}'")));
        let quotes = sql.matches('\'').count();
        assert_eq!(quotes, 2 * 5, "four hex literals and one date: no other quote");
        let repair = requests(&rows, MAX_REQUEST_BYTES, Overwrite::OlderOrSame).concat();
        assert!(repair.contains("IF(VALUES(version) >= version, VALUES(body), body)"), "{repair}");
    }

    #[test]
    fn large_batches_split_into_requests_of_whole_statements() {
        let body = "b".repeat(10_000);
        let msgs: Vec<Message> = (0..100).map(|i| msg(&format!("id-{i}"), &body)).collect();
        let mut rows = ByShard::new();
        for m in &msgs {
            rows.entry(m.shard()).or_default().push((m, at(m)));
        }
        let reqs = requests(&rows, 200_000, Overwrite::Older);
        assert!(reqs.len() >= 5, "100 rows of ~20 KB of hex in requests of 200 KB: {}", reqs.len());
        assert!(reqs.iter().all(|r| r.len() <= 200_000));
        assert!(reqs[0].starts_with("START TRANSACTION;") && reqs.last().unwrap().ends_with("COMMIT"));
        assert_eq!(reqs.iter().filter(|r| r.contains("START TRANSACTION")).count(), 1);
        for r in &reqs[..reqs.len() - 1] {
            assert!(r.ends_with(UPDATE_OLDER), "a request ends with a whole statement");
        }
        let all = reqs.concat();
        assert_eq!(all.matches("_utf8mb4 X'69642D").count(), 100, "every id once (hex of `id-`)");
    }
}
