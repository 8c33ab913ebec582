//! How a content mismatch is shown to a person: the fields that differ, each with both values
//! (shortened), so a report says what is wrong without anyone opening the stores.

use pipeline_common::digest::sent_at_text;
use pipeline_common::Message;
use pipeline_stores::StoreKind;

/// Characters of a value shown.
const SHOWN_CHARS: usize = 40;

fn short(s: &str) -> String {
    let mut out: String = s.chars().take(SHOWN_CHARS).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    format!("{out:?}")
}

/// `body: mysql "…" vs redis "…"; version: mysql 7 vs redis 5`.
pub(crate) fn compare(a_kind: StoreKind, a: &Message, b_kind: StoreKind, b: &Message) -> String {
    let body_lengths = format!(" ({} vs {} bytes)", a.body.len(), b.body.len());
    let fields = [
        ("version", a.version.to_string(), b.version.to_string(), ""),
        ("sender", short(&a.sender), short(&b.sender), ""),
        ("recipient", short(&a.recipient), short(&b.recipient), ""),
        ("body", short(&a.body), short(&b.body), body_lengths.as_str()),
        ("sent_at", sent_at_text(a.sent_at), sent_at_text(b.sent_at), ""),
    ];
    let same = [
        a.version == b.version,
        a.sender == b.sender,
        a.recipient == b.recipient,
        a.body == b.body,
        a.sent_at == b.sent_at,
    ];
    let parts: Vec<String> = fields
        .iter()
        .zip(same)
        .filter(|(_, same)| !same)
        .map(|((name, x, y, extra), _)| format!("{name}: {a_kind} {x} vs {b_kind} {y}{extra}"))
        .collect();
    if parts.is_empty() {
        return "the values read back agree now (changed since the check read them)".into();
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_each_differing_field_with_both_values() {
        let a = Message {
            id: "x".into(),
            sender: "alice".into(),
            recipient: "bob".into(),
            body: "b".repeat(50),
            sent_at: time::macros::datetime!(2026-12-01 00:00 UTC),
            version: 7,
        };
        let mut b = a.clone();
        b.body.truncate(10);
        b.version = 5;
        let text = compare(StoreKind::Mysql, &a, StoreKind::Redis, &b);
        assert!(text.starts_with("version: mysql 7 vs redis 5; body: mysql \"bbbb"), "{text}");
        assert!(text.contains("…\" vs redis \"bbbbbbbbbb\" (50 vs 10 bytes)"), "{text}");
        assert!(!text.contains("sender"), "{text}");
    }
}
