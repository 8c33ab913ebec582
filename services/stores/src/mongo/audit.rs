//! MongoDB's audit side: every document's fingerprint, documents fetched and deleted by id.

use super::codec::{id_of, message_of};
use super::err;
use super::store::MongoStore;
use crate::Audit;
use crate::{Audited, StoreError};
use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{doc, Document};
use mongodb::Collection;
use pipeline_common::digest::Digest;
use pipeline_common::message::Message;

/// Documents per cursor batch, and ids per `$in` list.
const BATCH: u32 = 10_000;
const IDS_PER_QUERY: usize = 1000;

pub(super) async fn audit(coll: &Collection<Document>, prefix: &str) -> Result<Vec<Audited>, StoreError> {
    let filter = if prefix.is_empty() {
        doc! {}
    } else {
        // A range of `_id` (its index), not a regex: string order is bytewise UTF-8, so every id
        // that starts with `prefix` lies below `prefix` + the last code point.
        doc! { "_id": { "$gte": prefix, "$lt": format!("{prefix}{}", char::MAX) } }
    };
    let mut cursor = coll.find(filter).batch_size(BATCH).await.map_err(err)?;
    let mut out = Vec::new();
    while let Some(d) = cursor.try_next().await.map_err(err)? {
        let Some(id) = id_of(&d).filter(|id| id.starts_with(prefix)) else { continue };
        let digest = message_of(&d).map(|m| Digest::of_message(&m));
        out.push(Audited { id, place: None, digest });
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

    async fn audit(&self, prefix: &str) -> Result<Vec<Audited>, StoreError> {
        audit(&self.coll, prefix).await
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
