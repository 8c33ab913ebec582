//! MongoDB's audit side: every document's fingerprint, documents fetched and deleted by id.

use super::store::{err, MongoStore};
use crate::Audit;
use crate::{Audited, StoreError};
use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use mongodb::Collection;
use pipeline_common::digest::Digest;
use pipeline_common::message::Message;

/// Documents per page (and cursor batch) of the audit, and ids per `$in` list.
const BATCH: u32 = 10_000;
const IDS_PER_QUERY: usize = 1000;

/// The id of a document, whatever its BSON type (ours are strings).
fn id_of(d: &Document) -> Option<String> {
    match d.get("_id")? {
        Bson::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// A document as a message, when it is one of ours (a document written before versions reads
/// version 0).
fn message_of(d: &Document) -> Option<Message> {
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

fn audited(d: &Document) -> Option<Audited> {
    let id = id_of(d)?;
    Some(Audited { id, place: None, digest: message_of(d).map(|m| Digest::of_message(&m)) })
}

/// Every document, read in pages of `BATCH` ordered by id (`_id > last`), not as one cursor:
/// a server that gathers a whole query's answer before sending the first batch (nx-27017
/// does) then holds one page at a time instead of the collection. Ids are ours, all strings;
/// a `$gt` on a string passes over ids of other types, so when the pages add up to fewer
/// documents than the collection holds, the audit reads the collection again in one cursor
/// and reports everything.
pub(super) async fn audit(coll: &Collection<Document>) -> Result<Vec<Audited>, StoreError> {
    let mut out: Vec<Audited> = Vec::new();
    let mut last: Option<String> = None;
    loop {
        let filter = match &last {
            Some(id) => doc! { "_id": { "$gt": id } },
            None => doc! {},
        };
        let page: Vec<Document> =
            coll.find(filter).sort(doc! { "_id": 1 }).limit(i64::from(BATCH)).await.map_err(err)?.try_collect().await.map_err(err)?;
        let Some(next) = page.last().and_then(|d| d.get_str("_id").ok().map(str::to_string)) else {
            out.extend(page.iter().filter_map(audited));
            break;
        };
        // A page must move forward; a server that does not order ids as it compares them
        // would loop, so take the one-cursor read instead.
        if last.as_ref().is_some_and(|l| next.as_str() <= l.as_str()) {
            return audit_in_one_cursor(coll).await;
        }
        out.extend(page.iter().filter_map(audited));
        if page.len() < BATCH as usize {
            break;
        }
        last = Some(next);
    }
    if out.len() as u64 != coll.count_documents(doc! {}).await.map_err(err)? {
        return audit_in_one_cursor(coll).await;
    }
    Ok(out)
}

async fn audit_in_one_cursor(coll: &Collection<Document>) -> Result<Vec<Audited>, StoreError> {
    let mut cursor = coll.find(doc! {}).batch_size(BATCH).await.map_err(err)?;
    let mut out = Vec::new();
    while let Some(d) = cursor.try_next().await.map_err(err)? {
        out.extend(audited(&d));
    }
    Ok(out)
}

pub(super) async fn fetch(coll: &Collection<Document>, ids: &[String]) -> Result<Vec<Message>, StoreError> {
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(IDS_PER_QUERY) {
        let mut cursor = coll.find(doc! { "_id": { "$in": chunk } }).await.map_err(err)?;
        // A document that is not a message is left out, like an absent one (audit reports it).
        while let Some(d) = cursor.try_next().await.map_err(err)? {
            out.extend(message_of(&d));
        }
    }
    Ok(out)
}

pub(super) async fn delete(coll: &Collection<Document>, ids: &[String]) -> Result<(), StoreError> {
    for chunk in ids.chunks(IDS_PER_QUERY) {
        coll.delete_many(doc! { "_id": { "$in": chunk } }).await.map_err(err)?;
    }
    Ok(())
}

#[async_trait]
impl Audit for MongoStore {
    async fn count(&self) -> Result<u64, StoreError> {
        self.coll.count_documents(doc! {}).await.map_err(err)
    }

    async fn audit(&self) -> Result<Vec<Audited>, StoreError> {
        audit(&self.coll).await
    }

    async fn fetch(&self, ids: &[String]) -> Result<Vec<Message>, StoreError> {
        fetch(&self.coll, ids).await
    }

    async fn delete(&self, ids: &[String]) -> Result<(), StoreError> {
        delete(&self.coll, ids).await
    }

    async fn reset(&self) -> Result<(), StoreError> {
        self.coll.drop().await.map_err(err)
    }
}
