//! Helpers for the integration tests of every crate. A dev-dependency only: nothing here is
//! compiled into the services.
//!
//! The tests talk to the real servers that `scripts/stack up` starts. A missing server is a
//! failed test with the server's name in the message, never a skipped one.
#![forbid(unsafe_code)]
// Visibility says who uses an item: `pub` only for what another crate reads.
#![warn(unreachable_pub)]

use pipeline_common::config::KafkaArgs;
use pipeline_stores::StoreArgs;
use pipeline_stores::StoreKind;
use tokio::sync::{Mutex, MutexGuard};

mod check;
mod data;
pub mod docs;
mod kafka;
mod key;
mod namespace;
mod pki;
mod process;
mod redis_db;
mod service;

pub use check::*;
pub use data::*;
pub use kafka::*;
pub use key::*;
pub use namespace::*;
pub use pki::*;
pub use process::*;
pub use redis_db::*;
pub use service::*;

/// An async mutex: each `#[tokio::test]` has its own runtime, and tokio's mutex works across them.
static EXCLUSIVE: Mutex<()> = Mutex::const_new(());

/// Serialises the tests of one test binary that hold it: the heavy ones (thousands of messages
/// through a writer), so that two of them do not share the machine's two cores. Redis no longer
/// needs it: each namespace leases a database of its own ([`RedisDb`]). Hold the guard for the
/// whole test.
pub async fn exclusive() -> MutexGuard<'static, ()> {
    EXCLUSIVE.lock().await
}

/// Checks that every server answers a real request; panics naming each one that does not.
pub async fn require_servers() -> (StoreArgs, KafkaArgs) {
    let stores = StoreArgs::from_env();
    let kafka = KafkaArgs::from_env();
    let mut missing = Vec::new();
    match pipeline_stores::connect(&stores, &StoreKind::ALL).await {
        Ok(all) => {
            for s in all {
                if let Err(e) = s.prepare().await {
                    missing.push(format!("{} ({e})", s.kind()));
                }
            }
        }
        Err(e) => missing.push(format!("{} ({e})", e.store)),
    }
    let k = kafka.clone();
    let meta = tokio::task::spawn_blocking(move || pipeline_common::kafka::partition_count(&k, "__probe"))
        .await
        .expect("join");
    if let Err(e) = meta {
        missing.push(format!("kafka at {} ({e})", kafka.brokers));
    }
    if !missing.is_empty() {
        panic!(
            "integration servers not answering: {}. Start them with `scripts/stack up` \
             (addresses come from the environment, see .env.example; `. scripts/lib.sh` gives a \
             shell the native stack's, with its Redis password).",
            missing.join("; ")
        );
    }
    (stores, kafka)
}
