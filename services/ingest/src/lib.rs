//! The ingest service: HTTP → disruptor ring → Kafka.
//!
//! [`auth`] decides who may write; [`ack`] is the acknowledgement contract every step shares; [`routes`] validates and answers; [`ring`] decouples the HTTP workers from the producer and
//! [`gather`]s their records;
//! [`kafka`] publishes and turns delivery reports into acknowledgements, to the partition
//! [`partitions`] picks; [`startup`] wires it.
#![forbid(unsafe_code)]

pub mod ack;
pub mod answer;
pub mod auth;
pub mod body;
pub mod config;
pub mod gather;
pub mod kafka;
pub mod limits;
pub mod partitions;
pub mod ready;
pub mod ring;
pub mod routes;
pub mod startup;
pub mod telemetry_mw;
