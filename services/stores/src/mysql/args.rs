//! How to reach MySQL / MariaDB.

use crate::StoreFlags;
use clap::Args;

/// MySQL / MariaDB, the system of record.
#[derive(Debug, Clone, Args)]
pub struct MysqlArgs {
    /// Connection URL (database included). It holds the password: prefer --mysql-url-file.
    #[arg(
        id = "mysql-url",
        long = "mysql-url",
        env = "MYSQL_URL",
        hide_env_values = true,
        default_value = "mysql://pipeline:pipeline@127.0.0.1:3306/pipeline"
    )]
    pub url: String,
    /// A file holding the connection URL (the Docker and Kubernetes secrets convention); wins
    /// over --mysql-url.
    #[arg(id = "mysql-url-file", long = "mysql-url-file", env = "MYSQL_URL_FILE")]
    pub url_file: Option<std::path::PathBuf>,
    /// Connections in the pool.
    #[arg(id = "mysql-pool", long = "mysql-pool", env = "MYSQL_POOL", default_value_t = 8)]
    pub pool: u32,
}

impl MysqlArgs {
    /// The URL to connect with: the file's when --mysql-url-file names one.
    pub fn connection_url(&self) -> Result<String, crate::StoreError> {
        crate::resolve_url(crate::StoreKind::Mysql, &self.url, self.url_file.as_deref())
    }
}

impl StoreFlags for MysqlArgs {
    /// TLS is on when the URL's `ssl-mode` requires it (sqlx's default, PREFERRED, may fall
    /// back to plaintext).
    fn plaintext_host(&self) -> Option<String> {
        crate::remote_plaintext(&self.connection_url().ok()?, |u| {
            u.query_pairs().any(|(k, v)| {
                k == "ssl-mode"
                    && ["required", "verify_ca", "verify_identity"].contains(&v.to_ascii_lowercase().as_str())
            })
        })
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            crate::url_env(("MYSQL_URL", "MYSQL_URL_FILE"), &self.url, self.url_file.as_deref()),
            ("MYSQL_POOL", self.pool.to_string()),
        ]
    }
}
