//! Elasticsearch / OpenSearch: `_bulk` index into one index with `_id` = message id.
//!
//! Indexing the same `_id` twice overwrites one document, so redelivery never adds a second.
//! Every bulk item's status is checked: 429 (rejected execution) and 5xx items make the whole
//! call a transient error that the writer retries with backoff (re-indexing the items that did
//! succeed is harmless); other 4xx items (mapping errors) are permanent rejections that the writer
//! dead-letters.

use super::{Rejected, Store, StoreError, StoreKind, StoredId};
use crate::config::EsArgs;
use crate::message::Message;
use async_trait::async_trait;
use elasticsearch::http::response::Response;
use elasticsearch::http::transport::{SingleNodeConnectionPool, TransportBuilder};
use elasticsearch::indices::{IndicesCreateParts, IndicesDeleteParts, IndicesRefreshParts};
use elasticsearch::{BulkOperation, BulkParts, CountParts, Elasticsearch, SearchParts};
use serde_json::{json, Value};

const KIND: StoreKind = StoreKind::Es;
/// Page size when listing ids with `search_after`.
const PAGE: usize = 5000;

fn err(e: impl std::fmt::Display) -> StoreError {
    StoreError::transient(KIND, e)
}

pub struct EsStore {
    client: Elasticsearch,
    index: String,
}

/// The index settings and mapping. One shard and no replicas: a single node here, and a
/// single-shard `_count` is exact right after a refresh.
fn index_definition() -> Value {
    json!({
        "settings": { "number_of_shards": 1, "number_of_replicas": 0 },
        "mappings": {
            "dynamic": "strict",
            "properties": {
                "id":        { "type": "keyword" },
                "sender":    { "type": "keyword" },
                "recipient": { "type": "keyword" },
                "body":      { "type": "text" },
                "sent_at":   { "type": "date" }
            }
        }
    })
}

/// Reads a response body as JSON, turning an HTTP error status into a [`StoreError`]
/// (429 and 5xx transient, other statuses permanent).
async fn json_of(resp: Response, what: &str) -> Result<Value, StoreError> {
    let status = resp.status_code().as_u16();
    let body: Value = resp.json().await.map_err(err)?;
    match status {
        200..=299 => Ok(body),
        429 | 500..=599 => Err(StoreError::transient(KIND, format!("{what}: HTTP {status}: {body}"))),
        _ => Err(StoreError::permanent(KIND, format!("{what}: HTTP {status}: {body}"))),
    }
}

impl EsStore {
    pub fn connect(args: &EsArgs) -> Result<Self, StoreError> {
        let url = url::Url::parse(&args.url).map_err(|e| StoreError::permanent(KIND, e))?;
        let transport = TransportBuilder::new(SingleNodeConnectionPool::new(url))
            .timeout(args.timeout())
            .disable_proxy()
            .build()
            .map_err(|e| StoreError::permanent(KIND, e))?;
        Ok(Self { client: Elasticsearch::new(transport), index: args.index.clone() })
    }

    async fn refresh(&self) -> Result<(), StoreError> {
        let resp =
            self.client.indices().refresh(IndicesRefreshParts::Index(&[&self.index])).send().await.map_err(err)?;
        json_of(resp, "refresh").await.map(|_| ())
    }
}

#[async_trait]
impl Store for EsStore {
    fn kind(&self) -> StoreKind {
        KIND
    }

    async fn prepare(&self) -> Result<(), StoreError> {
        let resp = self
            .client
            .indices()
            .create(IndicesCreateParts::Index(&self.index))
            .body(index_definition())
            .send()
            .await
            .map_err(err)?;
        match json_of(resp, "create index").await {
            Ok(_) => Ok(()),
            // Another writer (or an earlier run) created it first: that is the idempotent case.
            Err(e) if e.message.contains("resource_already_exists_exception") => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn write(&self, batch: &[Message]) -> Result<Vec<Rejected>, StoreError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let ops: Vec<BulkOperation<Value>> = batch
            .iter()
            .map(|m| BulkOperation::index(serde_json::to_value(m).expect("serialisable")).id(&m.id).into())
            .collect();
        let resp = self.client.bulk(BulkParts::Index(&self.index)).body(ops).send().await.map_err(err)?;
        let body = json_of(resp, "bulk").await?;
        if body["errors"].as_bool() != Some(true) {
            return Ok(Vec::new());
        }
        let mut rejected = Vec::new();
        let mut transient = 0usize;
        let mut first_transient = String::new();
        for (item, m) in body["items"].as_array().into_iter().flatten().zip(batch) {
            let result = &item["index"];
            let status = result["status"].as_u64().unwrap_or(0);
            match status {
                200..=299 => {}
                429 | 500..=599 | 0 => {
                    transient += 1;
                    if first_transient.is_empty() {
                        first_transient = result["error"].to_string();
                    }
                }
                _ => rejected.push(Rejected { id: m.id.clone(), reason: result["error"].to_string() }),
            }
        }
        if transient > 0 {
            return Err(StoreError::transient(
                KIND,
                format!("bulk: {transient} items failed, first: {first_transient}"),
            ));
        }
        Ok(rejected)
    }

    async fn count(&self) -> Result<u64, StoreError> {
        self.refresh().await?;
        let resp = self.client.count(CountParts::Index(&[&self.index])).send().await.map_err(err)?;
        let body = json_of(resp, "count").await?;
        body["count"].as_u64().ok_or_else(|| err(format!("count: no count in {body}")))
    }

    async fn ids(&self) -> Result<Vec<StoredId>, StoreError> {
        self.refresh().await?;
        let mut out = Vec::new();
        let mut after: Option<Value> = None;
        loop {
            let mut query = json!({ "size": PAGE, "_source": false, "sort": [{ "id": "asc" }] });
            if let Some(a) = after.take() {
                query["search_after"] = a;
            }
            let resp = self.client.search(SearchParts::Index(&[&self.index])).body(query).send().await.map_err(err)?;
            let body = json_of(resp, "search").await?;
            let hits = body["hits"]["hits"].as_array().cloned().unwrap_or_default();
            for h in &hits {
                out.push(StoredId { id: h["_id"].as_str().unwrap_or_default().to_string(), place: None });
            }
            match hits.last() {
                Some(last) if hits.len() == PAGE => after = Some(last["sort"].clone()),
                _ => return Ok(out),
            }
        }
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
