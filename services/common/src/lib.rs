//! What every part of the pipeline shares: the message type and shard rule, Kafka settings and
//! the one producer configuration, telemetry and the metric catalog.
//!
//! The data path is ingest → ring → kafka → writer → stores (`pipeline-stores`); `reconcile` sits
//! beside it and uses the same stores to count what arrived.
#![forbid(unsafe_code)]
// Visibility says who uses an item: `pub` only for what another crate reads.
#![warn(unreachable_pub)]

pub mod catalog;
pub mod config;
pub mod digest;
pub mod kafka;
pub mod largest;
pub mod logbuf;
pub mod message;
pub mod procstat;
pub mod reconcile_report;
pub mod record;
pub mod reference;
pub mod secret;
pub mod telemetry;
pub mod version;

pub use message::{Limits, Message, NewMessage};
