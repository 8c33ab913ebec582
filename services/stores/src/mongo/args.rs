//! How to reach MongoDB.

use crate::StoreFlags;
use clap::Args;

#[derive(Debug, Clone, Args, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct MongoArgs {
    /// Connection URL (`tls`, `tlsCAFile`, `authSource` options work as the driver documents): prefer --mongo-url-file when it holds a password.
    #[arg(
        id = "mongo-url",
        long = "mongo-url",
        env = "MONGO_URL",
        hide_env_values = true,
        default_value = "mongodb://127.0.0.1:27017"
    )]
    pub url: String,
    /// A file holding the connection URL (the Docker and Kubernetes secrets convention); wins
    /// over --mongo-url.
    #[arg(id = "mongo-url-file", long = "mongo-url-file", env = "MONGO_URL_FILE")]
    pub url_file: Option<std::path::PathBuf>,
    /// Database holding the messages.
    #[arg(id = "mongo-db", long = "mongo-db", env = "MONGO_DB", default_value = "pipeline")]
    pub db: String,
    /// Collection holding the messages.
    #[arg(id = "mongo-collection", long = "mongo-collection", env = "MONGO_COLLECTION", default_value = "messages")]
    pub collection: String,
}

impl MongoArgs {
    /// The URL to connect with: the file's when --mongo-url-file names one.
    pub fn connection_url(&self) -> Result<String, crate::StoreError> {
        crate::flags::resolve_url(crate::StoreKind::Mongo, &self.url, self.url_file.as_deref())
    }
}

impl StoreFlags for MongoArgs {
    fn url_mut(&mut self) -> (&mut String, &mut Option<std::path::PathBuf>) {
        (&mut self.url, &mut self.url_file)
    }

    /// TLS is on with `tls=true` (or `ssl=true`) in the URL, and always with `mongodb+srv://`.
    fn plaintext_host(&self) -> Option<String> {
        crate::flags::remote_plaintext(&self.connection_url().ok()?, |u| {
            u.scheme() == "mongodb+srv" || u.query_pairs().any(|(k, v)| (k == "tls" || k == "ssl") && v == "true")
        })
    }
}
