//! How to reach Redis.

use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct RedisArgs {
    /// Connection URL (database number as the path).
    #[arg(id = "redis-url", long = "redis-url", env = "REDIS_URL", default_value = "redis://127.0.0.1:6379/0")]
    pub url: String,
}
