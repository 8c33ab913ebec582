//! Test messages and the bodies a client posts for them.

/// `n` valid messages with ids `<tag>-<i>`.
pub fn messages(n: usize, tag: &str) -> Vec<pipeline_common::Message> {
    let now = time::OffsetDateTime::now_utc();
    (0..n)
        .map(|i| pipeline_common::Message {
            id: format!("{tag}-{i:06}"),
            sender: format!("user-{}", i % 97),
            recipient: format!("user-{}", i % 89),
            body: format!("message {i} of {n}: {}", "lorem ipsum ".repeat(8)),
            sent_at: pipeline_common::message::normalize_sent_at(now),
            version: 1,
        })
        .collect()
}

/// The body a client posts for `m`: its fields without the version (the ingest stamps it).
pub fn request_json(m: &pipeline_common::Message) -> String {
    let sent_at = m.sent_at.format(&time::format_description::well_known::Rfc3339).expect("a valid date");
    serde_json::json!({ "id": m.id, "sender": m.sender, "recipient": m.recipient, "body": m.body, "sent_at": sent_at })
        .to_string()
}
