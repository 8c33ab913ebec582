//! How to reach Redis.

use crate::StoreFlags;
use clap::Args;

#[derive(Debug, Clone, Args, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct RedisArgs {
    /// Connection URL (database number as the path; a password as `redis://:PASS@host`): prefer --redis-url-file when it holds one.
    #[arg(
        id = "redis-url",
        long = "redis-url",
        env = "REDIS_URL",
        hide_env_values = true,
        default_value = "redis://127.0.0.1:6379/0"
    )]
    pub url: String,
    /// A file holding the connection URL (the Docker and Kubernetes secrets convention); wins
    /// over --redis-url.
    #[arg(id = "redis-url-file", long = "redis-url-file", env = "REDIS_URL_FILE")]
    pub url_file: Option<std::path::PathBuf>,
    /// A PEM file of the CA that signs the server's certificate, for a `rediss://` URL (TLS);
    /// without it, the system's roots.
    #[arg(id = "redis-ca-file", long = "redis-ca-file", env = "REDIS_CA_FILE")]
    pub ca_file: Option<std::path::PathBuf>,
}

impl RedisArgs {
    /// The URL to connect with: the file's when --redis-url-file names one.
    pub fn connection_url(&self) -> Result<String, crate::StoreError> {
        crate::flags::resolve_url(crate::StoreKind::Redis, &self.url, self.url_file.as_deref())
    }
}

impl StoreFlags for RedisArgs {
    fn url_mut(&mut self) -> (&mut String, &mut Option<std::path::PathBuf>) {
        (&mut self.url, &mut self.url_file)
    }

    fn plaintext_host(&self) -> Option<String> {
        crate::flags::remote_plaintext(&self.connection_url().ok()?, |u| u.scheme() == "rediss")
    }
}
