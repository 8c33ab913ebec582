//! How to reach MongoDB.

use crate::StoreFlags;
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

impl StoreFlags for MongoArgs {
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("MONGO_URL", self.url.clone()),
            ("MONGO_DB", self.database.clone()),
            ("MONGO_COLLECTION", self.collection.clone()),
        ]
    }
}
