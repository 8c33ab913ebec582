//! How to reach Redis.

use crate::StoreFlags;
use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct RedisArgs {
    /// Connection URL (database number as the path).
    #[arg(id = "redis-url", long = "redis-url", env = "REDIS_URL", default_value = "redis://127.0.0.1:6379/0")]
    pub url: String,
}

impl StoreFlags for RedisArgs {
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![("REDIS_URL", self.url.clone())]
    }
}
