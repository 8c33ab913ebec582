//! Redis cannot be namespaced without changing the `msg:` key format, so a caller gets the
//! database numbered by its [`crate::Slot`], emptied: a test the number it leased, a chaos run
//! database 2.

use super::args::RedisArgs;
use super::store::RedisStore;
use super::KIND;
use crate::{Fixture, StoreError};
use async_trait::async_trait;

fn fail(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::permanent_from(KIND, e)
}

#[async_trait]
impl Fixture for RedisStore {
    async fn isolate(args: &mut RedisArgs, _namespace: &str, slot: crate::Slot) -> Result<(), StoreError> {
        let mut url = url::Url::parse(&args.url).map_err(fail)?;
        url.set_path(&format!("/{}", slot.number()));
        args.url = url.to_string();
        let client = redis::Client::open(args.url.as_str()).map_err(fail)?;
        let mut conn = client.get_multiplexed_async_connection().await.map_err(fail)?;
        redis::cmd("FLUSHDB").query_async::<()>(&mut conn).await.map_err(fail)
    }
}
