//! A test's own database (created on first write).

use super::args::MongoArgs;
use super::store::MongoStore;
use crate::{Fixture, StoreError};
use async_trait::async_trait;

#[async_trait]
impl Fixture for MongoStore {
    async fn isolate(args: &mut MongoArgs, namespace: &str, _slot: crate::Slot) -> Result<(), StoreError> {
        args.db = namespace.to_string();
        Ok(())
    }
}
