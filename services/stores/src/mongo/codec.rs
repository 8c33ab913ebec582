//! A message as the collection holds it: the document the sink writes (`_id` the message's id,
//! its version an int64) and the audit side reads back.

use mongodb::bson::{Bson, DateTime, Document};
use pipeline_common::message::Message;

/// A message as its document, borrowing the message's text: the driver serializes it straight
/// into BSON. (Building a `Document` first cloned every field and was then serialized again:
/// ~5 % of the writer's CPU samples under batch load.)
#[derive(serde::Serialize)]
pub(super) struct Doc<'a> {
    _id: &'a str,
    sender: &'a str,
    recipient: &'a str,
    body: &'a str,
    /// BSON dates hold milliseconds: the edge truncates `sent_at` to them.
    sent_at: DateTime,
    /// Below 10^18 (`Message::validate`): a BSON int64.
    version: i64,
}

pub(super) fn to_doc(m: &Message) -> Doc<'_> {
    let millis = (m.sent_at.unix_timestamp_nanos() / 1_000_000) as i64;
    Doc {
        _id: &m.id,
        sender: &m.sender,
        recipient: &m.recipient,
        body: &m.body,
        sent_at: DateTime::from_millis(millis),
        version: m.version as i64,
    }
}

/// The id of a document, whatever its BSON type (ours are strings).
pub(super) fn id_of(d: &Document) -> Option<String> {
    match d.get("_id")? {
        Bson::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// A document as a message, when it is one of ours (a document written before versions reads
/// version 0).
pub(super) fn message_of(d: &Document) -> Option<Message> {
    let text = |k: &str| d.get_str(k).ok().map(str::to_string);
    let version = match d.get("version") {
        None => 0,
        Some(Bson::Int64(v)) => u64::try_from(*v).ok()?,
        Some(Bson::Int32(v)) => u64::try_from(*v).ok()?,
        Some(_) => return None,
    };
    let millis = d.get_datetime("sent_at").ok()?.timestamp_millis();
    let sent_at = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(millis) * 1_000_000).ok()?;
    Some(Message {
        id: id_of(d)?,
        sender: text("sender")?,
        recipient: text("recipient")?,
        body: text("body")?,
        sent_at,
        version,
    })
}
