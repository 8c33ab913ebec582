//! A test's own index (created by `prepare`).

use super::args::EsArgs;
use super::store::EsStore;
use crate::{Fixture, StoreError};
use async_trait::async_trait;

#[async_trait]
impl Fixture for EsStore {
    async fn isolate(args: &mut EsArgs, namespace: &str, _slot: crate::Slot) -> Result<(), StoreError> {
        args.index = namespace.to_string();
        Ok(())
    }
}
