//! The writer service: Kafka → MySQL + Redis + Elasticsearch + MongoDB, committing an offset
//! only when every record before it is stored everywhere.
//!
//! kafka ([`consumer`]) → policy ([`dispatch`], [`pool`]) → stores (`pipeline_stores`);
//! [`retry`] gets one batch into one store (retrying, isolating, containing panics);
//! [`tracker`] decides what may be committed, [`dlq`] takes what can never be written.

pub mod config;
pub mod consumer;
pub mod dispatch;
pub mod dlq;
pub mod pool;
pub mod retry;
pub mod startup;
pub mod tracker;
