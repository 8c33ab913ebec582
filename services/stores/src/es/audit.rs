//! Elasticsearch's audit side: every document's fingerprint (its `_source` and `_version`),
//! documents fetched (`_mget`) and deleted (`_bulk`) by id.

use super::codec::message_of;
use super::store::EsStore;
use super::{err, json_of, KIND};
use crate::{Audit, Sink};
use crate::{Audited, StoreError};
use async_trait::async_trait;
use elasticsearch::indices::IndicesDeleteParts;
use elasticsearch::{BulkOperation, BulkParts, CountParts, MgetParts, SearchParts};
use pipeline_common::digest::{Digest, Stored};
use pipeline_common::message::Message;
use serde_json::{json, Value};

/// Page size when reading every document with `search_after`.
const PAGE: usize = 5000;
/// Ids per `_mget` or `_bulk` delete.
const IDS_PER_REQUEST: usize = 1000;

pub(super) async fn audit(es: &EsStore, prefix: &str) -> Result<Vec<Audited>, StoreError> {
    es.refresh().await?;
    let mut out = Vec::new();
    let mut after: Option<Value> = None;
    loop {
        let mut query = json!({ "size": PAGE, "version": true, "sort": [{ "id": "asc" }] });
        if !prefix.is_empty() {
            // `id` is a keyword: a prefix query walks the terms dictionary, not every document.
            query["query"] = json!({ "prefix": { "id": prefix } });
        }
        if let Some(a) = after.take() {
            query["search_after"] = a;
        }
        let resp = es.client.search(SearchParts::Index(&[&es.index])).body(query).send().await.map_err(err)?;
        let body = json_of(resp, "search").await?;
        let hits = body["hits"]["hits"].as_array().cloned().unwrap_or_default();
        for h in &hits {
            let digest = message_of(h).map(|m| Digest::of(Stored::from(&m)));
            out.push(Audited { id: h["_id"].as_str().unwrap_or_default().to_string(), place: None, digest });
        }
        match hits.last() {
            Some(last) if hits.len() == PAGE => after = Some(last["sort"].clone()),
            _ => return Ok(out),
        }
    }
}

pub(super) async fn fetch(es: &EsStore, ids: &[String]) -> Result<Vec<Message>, StoreError> {
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(IDS_PER_REQUEST) {
        let resp =
            es.client.mget(MgetParts::Index(&es.index)).body(json!({ "ids": chunk })).send().await.map_err(err)?;
        let body = json_of(resp, "mget").await?;
        // A document that is not a message is left out, like an absent one (audit reports it).
        out.extend(body["docs"].as_array().into_iter().flatten().filter(|d| d["found"] == true).filter_map(message_of));
    }
    Ok(out)
}

pub(super) async fn delete(es: &EsStore, ids: &[String]) -> Result<(), StoreError> {
    for chunk in ids.chunks(IDS_PER_REQUEST) {
        let ops: Vec<BulkOperation<()>> = chunk.iter().map(|id| BulkOperation::delete(id).into()).collect();
        let resp = es
            .client
            .bulk(BulkParts::Index(&es.index))
            .filter_path(&["errors", "items.*.status", "items.*.error"])
            .body(ops)
            .send()
            .await
            .map_err(err)?;
        let body = json_of(resp, "bulk delete").await?;
        let failed = body["items"].as_array().into_iter().flatten().find(|i| {
            // 404: not there, which is what a delete wants.
            !matches!(i["delete"]["status"].as_u64(), Some(200..=299 | 404))
        });
        if let Some(item) = failed {
            return Err(StoreError::transient(KIND, format!("bulk delete: {item}")));
        }
    }
    Ok(())
}

#[async_trait]
impl Audit for EsStore {
    async fn count(&self) -> Result<u64, StoreError> {
        self.refresh().await?;
        let resp = self.client.count(CountParts::Index(&[&self.index])).send().await.map_err(err)?;
        let body = json_of(resp, "count").await?;
        body["count"].as_u64().ok_or_else(|| StoreError::transient(KIND, format!("count: no count in {body}")))
    }

    async fn audit(&self, prefix: &str) -> Result<Vec<Audited>, StoreError> {
        audit(self, prefix).await
    }

    async fn fetch(&self, ids: &[String]) -> Result<Vec<Message>, StoreError> {
        fetch(self, ids).await
    }

    async fn delete(&self, ids: &[String]) -> Result<(), StoreError> {
        delete(self, ids).await
    }

    async fn reset(&self) -> Result<(), StoreError> {
        let resp = self.client.indices().delete(IndicesDeleteParts::Index(&[&self.index])).send().await.map_err(err)?;
        let status = resp.status_code().as_u16();
        if status != 404 {
            json_of(resp, "delete index").await?;
        }
        self.prepare().await
    }
}
