//! The one place that names every store: their flags (flattened into each service's CLI) and how
//! to connect to each.

use crate::elastic::{EsArgs, EsStore};
use crate::mongo::{MongoArgs, MongoStore};
use crate::mysql::{MysqlArgs, MysqlStore};
use crate::redis::{RedisArgs, RedisStore};
use crate::{Store, StoreError, StoreKind};
use clap::Args;
use std::sync::Arc;

/// All four stores, for the services that talk to every one of them.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    #[command(flatten)]
    pub mysql: MysqlArgs,
    #[command(flatten)]
    pub redis: RedisArgs,
    #[command(flatten)]
    pub es: EsArgs,
    #[command(flatten)]
    pub mongo: MongoArgs,
}

impl StoreArgs {
    /// The defaults, as a service would see them with no flags (environment still applies).
    pub fn from_env() -> Self {
        #[derive(clap::Parser)]
        struct P {
            #[command(flatten)]
            s: StoreArgs,
        }
        <P as clap::Parser>::parse_from(["env"]).s
    }
}

/// Connects to every store named, in [`StoreKind::ALL`] order. Connecting does not prepare.
pub async fn connect(args: &StoreArgs, kinds: &[StoreKind]) -> Result<Vec<Arc<dyn Store>>, StoreError> {
    let mut out: Vec<Arc<dyn Store>> = Vec::new();
    for kind in StoreKind::ALL.into_iter().filter(|k| kinds.contains(k)) {
        out.push(match kind {
            StoreKind::Mysql => Arc::new(MysqlStore::connect(&args.mysql).await?),
            StoreKind::Redis => Arc::new(RedisStore::connect(&args.redis).await?),
            StoreKind::Es => Arc::new(EsStore::connect(&args.es)?),
            StoreKind::Mongo => Arc::new(MongoStore::connect(&args.mongo).await?),
        });
    }
    Ok(out)
}
