//! How to reach MySQL / MariaDB.

use crate::StoreFlags;
use clap::Args;

/// MySQL / MariaDB, the system of record.
#[derive(Debug, Clone, Args, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
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
    /// A second URL, of a user that may change the schema (the migrations) and empty the tables
    /// (`reconcile reset`), so `--mysql-url` can be a user that may only SELECT, INSERT and
    /// UPDATE (least privilege: docs/explanation/security.md). Unset: --mysql-url does both.
    #[arg(id = "mysql-admin-url", long = "mysql-admin-url", env = "MYSQL_ADMIN_URL", hide_env_values = true)]
    pub admin_url: Option<String>,
    /// A file holding the admin URL; wins over --mysql-admin-url.
    #[arg(id = "mysql-admin-url-file", long = "mysql-admin-url-file", env = "MYSQL_ADMIN_URL_FILE")]
    pub admin_url_file: Option<std::path::PathBuf>,
    /// Connections in the pool.
    #[arg(id = "mysql-pool", long = "mysql-pool", env = "MYSQL_POOL", default_value_t = 8)]
    pub pool: u32,
}

impl MysqlArgs {
    /// The URL to connect with: the file's when --mysql-url-file names one.
    pub fn connection_url(&self) -> Result<String, crate::StoreError> {
        crate::flags::resolve_url(crate::StoreKind::Mysql, &self.url, self.url_file.as_deref())
    }

    /// The URL of schema changes and resets: the admin URL's when one is given.
    pub fn admin_connection_url(&self) -> Result<Option<String>, crate::StoreError> {
        // Empty means unset (compose passes `${MYSQL_ADMIN_URL:-}`).
        match (self.admin_url.as_ref().filter(|u| !u.is_empty()), &self.admin_url_file) {
            (None, None) => Ok(None),
            (inline, file) => {
                crate::flags::resolve_url(crate::StoreKind::Mysql, inline.map_or("", String::as_str), file.as_deref())
                    .map(Some)
            }
        }
    }
}

impl StoreFlags for MysqlArgs {
    fn url_mut(&mut self) -> (&mut String, &mut Option<std::path::PathBuf>) {
        (&mut self.url, &mut self.url_file)
    }

    /// TLS is on when the URL's `ssl-mode` requires it (sqlx's default, PREFERRED, may fall
    /// back to plaintext).
    fn plaintext_host(&self) -> Option<String> {
        crate::flags::remote_plaintext(&self.connection_url().ok()?, |u| {
            u.query_pairs().any(|(k, v)| {
                k == "ssl-mode"
                    && ["required", "verify_ca", "verify_identity"].contains(&v.to_ascii_lowercase().as_str())
            })
        })
    }
}
