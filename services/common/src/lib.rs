//! What every part of the pipeline shares: the message type and shard rule, configuration,
//! telemetry, Kafka plumbing and the four stores behind one trait.
//!
//! The data path is ingest → ring → kafka → writer → stores; `reconcile` sits beside it and
//! uses the same [`stores`] to count what arrived.

pub mod catalog;
pub mod config;
pub mod kafka;
pub mod message;
pub mod stores;
pub mod telemetry;

pub use message::{Limits, Message, NewMessage};
