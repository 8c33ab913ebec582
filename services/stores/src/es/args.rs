//! How to reach Elasticsearch / OpenSearch.

use crate::StoreFlags;
use clap::Args;
use std::time::Duration;

/// Elasticsearch or OpenSearch (ES 7.10 API and later).
#[derive(Debug, Clone, Args, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct EsArgs {
    /// Base URL of the Elasticsearch / OpenSearch HTTP API (`https://user:pass@host` for basic auth): prefer --es-url-file when it holds a password.
    #[arg(
        id = "es-url",
        long = "es-url",
        env = "ES_URL",
        hide_env_values = true,
        default_value = "http://127.0.0.1:9200"
    )]
    pub url: String,
    /// A file holding the connection URL (the Docker and Kubernetes secrets convention); wins
    /// over --es-url.
    #[arg(id = "es-url-file", long = "es-url-file", env = "ES_URL_FILE")]
    pub url_file: Option<std::path::PathBuf>,
    /// A PEM file of the CA that signs the server's certificate (an internal CA), for an
    /// `https://` URL; without it, the system's roots.
    #[arg(id = "es-ca-file", long = "es-ca-file", env = "ES_CA_FILE")]
    pub ca_file: Option<std::path::PathBuf>,
    /// A file holding an API key (`id:key`, or the base64 form Elasticsearch prints), sent as
    /// `Authorization: ApiKey`. Basic auth: put `user:password@` in the URL (from --es-url-file).
    #[arg(id = "es-api-key-file", long = "es-api-key-file", env = "ES_API_KEY_FILE")]
    pub api_key_file: Option<std::path::PathBuf>,
    /// A file holding a bearer token (a service account's), sent as `Authorization: Bearer`.
    #[arg(id = "es-bearer-file", long = "es-bearer-file", env = "ES_BEARER_FILE")]
    pub bearer_file: Option<std::path::PathBuf>,
    /// Index holding the messages (created with its mapping when missing).
    #[arg(id = "es-index", long = "es-index", env = "ES_INDEX", default_value = "messages")]
    pub index: String,
    /// Per-request timeout, in milliseconds.
    #[arg(id = "es-timeout-ms", long = "es-timeout-ms", env = "ES_TIMEOUT_MS", default_value_t = 30_000)]
    pub timeout_ms: u64,
    /// The index's `refresh_interval` when this service creates it: how soon a write becomes
    /// visible to searches. Refreshing is indexing work; at 30 s OpenSearch spent 4–27 % less CPU
    /// per message on bulk writes than at its 1 s default (docs/results/performance-log.md). Durability does
    /// not depend on it (the translog is synced per bulk request), and reconcile refreshes
    /// before it counts. `-1` turns periodic refresh off.
    #[arg(
        id = "es-refresh-interval",
        long = "es-refresh-interval",
        env = "ES_REFRESH_INTERVAL",
        default_value = "30s"
    )]
    pub refresh_interval: String,
}

impl EsArgs {
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }
}

impl EsArgs {
    /// The URL to connect with: the file's when --es-url-file names one.
    pub fn connection_url(&self) -> Result<String, crate::StoreError> {
        crate::flags::resolve_url(crate::StoreKind::Es, &self.url, self.url_file.as_deref())
    }
}

impl StoreFlags for EsArgs {
    fn url_mut(&mut self) -> (&mut String, &mut Option<std::path::PathBuf>) {
        (&mut self.url, &mut self.url_file)
    }

    fn plaintext_host(&self) -> Option<String> {
        crate::flags::remote_plaintext(&self.connection_url().ok()?, |u| u.scheme() == "https")
    }
}
