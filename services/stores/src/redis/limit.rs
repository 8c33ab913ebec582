//! What one value may hold on this server: `proto-max-bulk-len`, the longest string Redis takes
//! in a request (512 MB by default, settable down to 1 MB). The writer sends each message as its
//! JSON, one string of the script call.

use super::KIND;
use crate::limits::{fits, unchecked};
use crate::StoreError;
use pipeline_common::message::Message;
use redis::aio::ConnectionManager;
use std::collections::HashMap;

const SETTING: &str = "proto-max-bulk-len";

/// Fails unless the server takes each message's JSON as one string. A server that refuses
/// `CONFIG GET` (managed Redis services disable it or deny it to the writer's user) or does not
/// know the setting (a Redis-protocol server) cannot be asked: that is logged, not refused, since
/// Redis's default is two orders of magnitude above the edge's bound. A connection that fails is
/// an error like any other at startup.
pub(super) async fn holds(mut conn: ConnectionManager, largest: &[Message]) -> Result<(), StoreError> {
    let config: Result<HashMap<String, String>, redis::RedisError> =
        redis::cmd("CONFIG").arg("GET").arg(SETTING).query_async(&mut conn).await;
    let skip = |why: &dyn std::fmt::Display| unchecked(KIND, SETTING, why);
    let allows = match config {
        Ok(c) => match c.get(SETTING).map(|v| v.parse::<u64>()) {
            Some(Ok(n)) => n,
            Some(Err(e)) => return skip(&e),
            None => return skip(&"the server does not list it"),
        },
        Err(e) if matches!(e.kind(), redis::ErrorKind::Server(_) | redis::ErrorKind::Extension) => return skip(&e),
        Err(e) => return Err(StoreError::transient_from(KIND, e)),
    };
    fits(KIND, SETTING, allows, largest.iter().map(|m| Ok(m.to_json().len() as u64)))
}
