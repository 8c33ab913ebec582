//! How to reach MySQL / MariaDB.

use crate::StoreFlags;
use clap::Args;

/// MySQL / MariaDB, the system of record.
#[derive(Debug, Clone, Args)]
pub struct MysqlArgs {
    /// Connection URL (database included).
    #[arg(
        id = "mysql-url",
        long = "mysql-url",
        env = "MYSQL_URL",
        default_value = "mysql://pipeline:pipeline@127.0.0.1:3306/pipeline"
    )]
    pub url: String,
    /// Connections in the pool.
    #[arg(id = "mysql-pool", long = "mysql-pool", env = "MYSQL_POOL", default_value_t = 8)]
    pub pool: u32,
}

impl StoreFlags for MysqlArgs {
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![("MYSQL_URL", self.url.clone()), ("MYSQL_POOL", self.pool.to_string())]
    }
}
