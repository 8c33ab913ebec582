//! How to reach MongoDB.

use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct MongoArgs {
    /// Connection URL.
    #[arg(id = "mongo-url", long = "mongo-url", env = "MONGO_URL", default_value = "mongodb://127.0.0.1:27017")]
    pub url: String,
    /// Database holding the messages.
    #[arg(id = "mongo-db", long = "mongo-db", env = "MONGO_DB", default_value = "pipeline")]
    pub database: String,
    /// Collection holding the messages.
    #[arg(id = "mongo-collection", long = "mongo-collection", env = "MONGO_COLLECTION", default_value = "messages")]
    pub collection: String,
}
