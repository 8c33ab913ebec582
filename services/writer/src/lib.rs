//! The writer service: Kafka → every store of `--stores` (all of `StoreKind::ALL` by default),
//! committing an offset only when every record before it is stored everywhere.
//!
//! kafka ([`consumer`]) → [`driver`] (write policy, pools, retry) → stores (`pipeline_stores`);
//! [`tracker`] decides what may be committed, [`rebalance`] is what librdkafka calls back,
//! [`dlq`] takes what can never be written, and [`stall`] rejoins the group when the broker
//! leaves a partition with records waiting to nobody.
#![forbid(unsafe_code)]
// Visibility says who uses an item: `pub` only for what another crate reads.
#![warn(unreachable_pub)]

pub mod config;
pub(crate) mod consumer;
pub(crate) mod dlq;
pub(crate) mod driver;
pub(crate) mod pool_spec;
pub(crate) mod rebalance;
pub(crate) mod stall;
pub mod startup;
pub(crate) mod tracker;
pub(crate) mod watermarks;
