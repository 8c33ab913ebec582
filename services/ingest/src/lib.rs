//! The ingest service: HTTP → disruptor ring → Kafka.
//!
//! [`auth`] decides who may write; [`ack`] is the acknowledgement contract every step shares; [`routes`] validates and answers; [`ring`] decouples the HTTP workers from the producer and
//! [`gather`]s their records;
//! [`kafka`] publishes and turns delivery reports into acknowledgements, to the partition
//! [`partitions`] picks; [`startup`] wires it.
#![forbid(unsafe_code)]
// Visibility says who uses an item: `pub` only for what another crate reads.
#![warn(unreachable_pub)]

pub(crate) mod ack;
pub mod answer;
pub mod auth;
pub(crate) mod body;
pub mod config;
pub(crate) mod edge;
pub(crate) mod gather;
pub mod kafka;
pub(crate) mod key_mw;
pub(crate) mod limits;
pub mod openapi;
pub(crate) mod partitions;
pub(crate) mod ready;
pub(crate) mod reload;
pub(crate) mod ring;
pub(crate) mod routes;
pub mod startup;
pub(crate) mod telemetry_mw;
pub(crate) mod tls;
pub(crate) mod wake;
