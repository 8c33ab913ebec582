//! A message as the index holds it: its document (`_source`) and its version (`_version`, an
//! external version), what the sink writes and the audit side reads back.

use elasticsearch::params::VersionType;
use elasticsearch::BulkOperation;
use pipeline_common::message::Message;
use serde_json::Value;

/// A message as its document: every field but the version, which is the document's `_version`.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct Doc<'a> {
    #[serde(borrow)]
    pub id: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    pub sender: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    pub recipient: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    pub body: std::borrow::Cow<'a, str>,
    #[serde(with = "time::serde::rfc3339")]
    pub sent_at: time::OffsetDateTime,
}

impl<'a> From<&'a Message> for Doc<'a> {
    fn from(m: &'a Message) -> Doc<'a> {
        Doc {
            id: m.id.as_str().into(),
            sender: m.sender.as_str().into(),
            recipient: m.recipient.as_str().into(),
            body: m.body.as_str().into(),
            sent_at: m.sent_at,
        }
    }
}

/// A message's bulk operation: indexed under its id, at its version as an external version.
pub(super) fn op(m: &Message, version_type: VersionType) -> BulkOperation<Doc<'_>> {
    BulkOperation::index(Doc::from(m)).id(&m.id).version(m.version as i64).version_type(version_type).into()
}

/// A hit's message, when its `_source` is one of ours and its `_version` a number.
pub(super) fn message_of(hit: &Value) -> Option<Message> {
    let doc: Doc<'_> = serde::Deserialize::deserialize(&hit["_source"]).ok()?;
    Some(Message {
        id: doc.id.into_owned(),
        sender: doc.sender.into_owned(),
        recipient: doc.recipient.into_owned(),
        body: doc.body.into_owned(),
        sent_at: doc.sent_at,
        version: hit["_version"].as_u64()?,
    })
}
