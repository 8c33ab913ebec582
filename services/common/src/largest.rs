//! The largest messages the edge accepts, for asking each store's server whether it holds them.
//!
//! What a store can hold is partly the server's configuration (MariaDB's `max_allowed_packet`,
//! OpenSearch's `http.max_content_length`, Redis's `proto-max-bulk-len`, MongoDB's
//! `maxBsonObjectSize`), which the edge cannot see. The writer asks every store about these
//! messages before it consumes anything (`Sink::holds`), so a server set below what
//! `MAX_BODY_BYTES` allows stops the writer at startup with the reason, instead of the first
//! large message being dead-lettered after its 202.

use crate::message::{Limits, Message, MAX_NAME_CHARS};
use crate::version::VERSION_LIMIT;
use time::macros::{datetime, offset};

/// The messages of the largest encodings valid under `limits`: every name at its longest and the
/// body at its largest, once in four-byte characters (the most bytes per character: MySQL's hex
/// and BSON grow with bytes) and once in a control character (the most JSON per byte: `\u0001`
/// is six bytes in Elasticsearch's and Redis's JSON). The id is the longest the edge takes, the
/// version the highest, `sent_at` the last instant every store holds.
pub fn messages(limits: Limits) -> [Message; 2] {
    [largest_of('🦀', limits), largest_of('\u{1}', limits)]
}

fn largest_of(c: char, limits: Limits) -> Message {
    let name: String = std::iter::repeat_n(c, MAX_NAME_CHARS).collect();
    let mut body: String = std::iter::repeat_n(c, limits.max_body_bytes / c.len_utf8()).collect();
    // The bytes a four-byte character cannot fill, in ASCII: the body is exactly at its limit.
    body.extend(std::iter::repeat_n('x', limits.max_body_bytes - body.len()));
    Message {
        id: "x".repeat(MAX_NAME_CHARS),
        sender: name.clone(),
        recipient: name,
        body,
        sent_at: datetime!(9999-12-31 23:59:59.999).assume_offset(offset!(UTC)),
        version: VERSION_LIMIT - 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::MAX_STORABLE_BODY_BYTES;

    #[test]
    fn they_are_valid_and_at_every_limit() {
        for max_body_bytes in [1, 3, 16 * 1024, 16 * 1024 + 3, MAX_STORABLE_BODY_BYTES] {
            let limits = Limits { max_body_bytes };
            for m in messages(limits) {
                assert_eq!(m.validate(limits), Ok(()), "{max_body_bytes}");
                assert_eq!(m.body.len(), max_body_bytes);
                assert_eq!(m.sender.chars().count(), MAX_NAME_CHARS);
                assert_eq!(m.id.len(), MAX_NAME_CHARS);
                // One byte more is refused: nothing the edge accepts is larger.
                let mut over = m.clone();
                over.body.push('x');
                assert!(over.validate(limits).is_err());
            }
        }
    }

    #[test]
    fn one_is_the_most_json_and_the_other_the_most_bytes() {
        let [bytes, json] = messages(Limits { max_body_bytes: 1000 });
        assert!(bytes.sender.len() > json.sender.len());
        let len = |m: &Message| serde_json::to_string(m).map(|s| s.len()).unwrap_or(0);
        assert!(len(&json) > 5 * 1000 && len(&json) > len(&bytes), "{} {}", len(&json), len(&bytes));
    }
}
