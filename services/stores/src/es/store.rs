//! Elasticsearch / OpenSearch: `_bulk` index into one index with `_id` = message id and the
//! message's version as an **external version** (`version_type=external`): the server indexes a
//! document only over an older version of its `_id` and answers 409 otherwise, which is success
//! here (a newer or the same version is stored). So redelivery never adds a second document, and
//! two versions end as the newer one in either order. Repair uses `external_gte`, which also
//! replaces the same version. The version lives in `_version`, not in `_source`, so the
//! document and the index mapping are the message's fields only.
//!
//! Every bulk item's status is checked: 400/413 items (mapping or parsing errors) are permanent
//! rejections that the writer dead-letters; any other failed item (429 rejected execution, 5xx)
//! makes the whole call a transient error that the writer retries with backoff (re-indexing the
//! items that did succeed is harmless). The audit side is in [`super::audit`].

use super::args::EsArgs;
use super::codec::{op, Doc};
use super::limit;
use super::{err, json_of, KIND};
use crate::Sink;
use crate::{Backend, Overwrite, Rejected, StoreError, StoreKind};
use async_trait::async_trait;
use elasticsearch::auth::Credentials;
use elasticsearch::cert::{Certificate, CertificateValidation};
use elasticsearch::http::transport::{SingleNodeConnectionPool, TransportBuilder};
use elasticsearch::indices::{IndicesCreateParts, IndicesPutIndexTemplateParts, IndicesRefreshParts};
use elasticsearch::params::VersionType;
use elasticsearch::{BulkOperation, BulkParts, Elasticsearch};
use pipeline_common::message::Message;
use serde_json::{json, Value};

pub struct EsStore {
    pub(super) client: Elasticsearch,
    pub(super) index: String,
    refresh_interval: String,
}

/// The index settings and mapping. One shard and no replicas: a single node here, and a
/// single-shard `_count` is exact right after a refresh. The mapping analyses only `body` (the
/// text people search); the other fields are exact values.
fn index_definition(refresh_interval: &str) -> Value {
    json!({
        "settings": { "number_of_shards": 1, "number_of_replicas": 0, "refresh_interval": refresh_interval },
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

/// The index template that gives the index its definition whenever it is created, by `prepare`
/// or by the server itself: a bulk request to a deleted index makes the server create it again
/// (`action.auto_create_index`, on by default), and without the template it would get a mapping
/// guessed from the first document (`id` as text, no `strict`).
fn template(index: &str, refresh_interval: &str) -> Value {
    let def = index_definition(refresh_interval);
    json!({ "index_patterns": [index], "priority": 500, "template": def })
}

/// A connection setting this cannot use: the same on every attempt.
fn bad(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::permanent_from(KIND, e)
}

#[async_trait]
impl Backend for EsStore {
    type Args = EsArgs;

    /// No request is made here: the client connects on first use (and `prepare` is the first).
    async fn connect(args: &EsArgs) -> Result<Self, StoreError> {
        let mut url = url::Url::parse(&args.connection_url()?).map_err(bad)?;
        let mut transport =
            TransportBuilder::new(SingleNodeConnectionPool::new(url.clone())).timeout(args.timeout()).disable_proxy();
        // Basic auth from the URL's `user:password@`, sent as a header (the URL itself without).
        if !url.username().is_empty() {
            let user = url.username().to_string();
            let password = url.password().unwrap_or_default().to_string();
            let _ = (url.set_username(""), url.set_password(None));
            transport = TransportBuilder::new(SingleNodeConnectionPool::new(url))
                .timeout(args.timeout())
                .disable_proxy()
                .auth(Credentials::Basic(user, password));
        }
        let secret = |f: &std::path::Path| pipeline_common::secret::read_or("", Some(f)).map_err(bad);
        if let Some(f) = &args.api_key_file {
            let key = secret(f)?;
            transport = transport.auth(match key.split_once(':') {
                Some((id, k)) => Credentials::ApiKey(id.to_string(), k.to_string()),
                None => Credentials::EncodedApiKey(key),
            });
        }
        if let Some(f) = &args.bearer_file {
            transport = transport.auth(Credentials::Bearer(secret(f)?));
        }
        if let Some(ca) = &args.ca_file {
            let pem = std::fs::read(ca).map_err(|e| bad(e).context(ca.display()))?;
            let cert = Certificate::from_pem(&pem).map_err(bad)?;
            transport = transport.cert_validation(CertificateValidation::Full(cert));
        }
        let transport = transport.build().map_err(bad)?;
        Ok(Self {
            client: Elasticsearch::new(transport),
            index: args.index.clone(),
            refresh_interval: args.refresh_interval.clone(),
        })
    }
}

impl EsStore {
    pub(super) async fn refresh(&self) -> Result<(), StoreError> {
        let resp =
            self.client.indices().refresh(IndicesRefreshParts::Index(&[&self.index])).send().await.map_err(err)?;
        json_of(resp, "refresh").await.map(|_| ())
    }
}

#[async_trait]
impl Sink for EsStore {
    fn kind(&self) -> StoreKind {
        KIND
    }

    async fn prepare(&self) -> Result<(), StoreError> {
        let name = format!("pipeline-{}", self.index);
        let resp = self
            .client
            .indices()
            .put_index_template(IndicesPutIndexTemplateParts::Name(&name))
            .body(template(&self.index, &self.refresh_interval))
            .send()
            .await
            .map_err(err)?;
        json_of(resp, "put index template").await?;
        let resp = self
            .client
            .indices()
            .create(IndicesCreateParts::Index(&self.index))
            .body(index_definition(&self.refresh_interval))
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

    async fn write(&self, batch: &[Message], overwrite: Overwrite) -> Result<Vec<Rejected>, StoreError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let version_type = match overwrite {
            Overwrite::Older => VersionType::External,
            Overwrite::OlderOrSame => VersionType::ExternalGte,
        };
        // Each message is serialized once, straight into the request body (no JSON tree first).
        // Versions are below 10^18 (`Message::validate`), so the cast keeps them.
        let ops: Vec<BulkOperation<Doc<'_>>> = batch.iter().map(|m| op(m, version_type)).collect();
        // Only what the classification below reads: the server builds, and we parse, a few bytes
        // per item instead of its whole result (index, id, version, shards, sequence numbers).
        let resp = self
            .client
            .bulk(BulkParts::Index(&self.index))
            .filter_path(&["errors", "items.*.status", "items.*.error"])
            .body(ops)
            .send()
            .await
            .map_err(err)?;
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
                // 409: the stored version is newer than this one, or the same: nothing to do.
                200..=299 | 409 => {}
                // The document itself is refused (a mapping or parsing error): it alone is
                // dead-lettered. Any other status is the server's state, not the document's.
                400 | 413 => rejected.push(Rejected { id: m.id.clone(), reason: result["error"].to_string() }),
                _ => {
                    transient += 1;
                    if first_transient.is_empty() {
                        first_transient = format!("HTTP {status}: {}", result["error"]);
                    }
                }
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

    async fn holds(&self, largest: &[Message]) -> Result<(), StoreError> {
        limit::holds(&self.client, largest).await
    }

    async fn healthcheck(&self) -> Result<(), StoreError> {
        let resp = self.client.ping().send().await.map_err(err)?;
        match resp.status_code().as_u16() {
            200..=299 => Ok(()),
            status => Err(StoreError::transient(KIND, format!("HEAD /: HTTP {status}"))),
        }
    }
}
