//! What every scenario of a chaos run shares, made once by `run` (`mod.rs`) and lent to each
//! stage. Its own file because the stages read it while `mod.rs` starts the stages: were it in
//! `mod.rs`, the folder's files would import each other in a circle.

use super::net;
use super::sizes::Sizes;
use pipeline_common::config::KafkaArgs;
use pipeline_stores::StoreArgs;
use std::path::PathBuf;

/// Everything the scenarios share.
pub(crate) struct Setting {
    pub root: PathBuf,
    /// A private copy of the binaries: a rebuild of the shared target folder must not swap them
    /// mid-run.
    pub bins: PathBuf,
    pub k6: PathBuf,
    pub http: reqwest::Client,
    pub out: PathBuf,
    pub stores: StoreArgs,
    pub kafka: KafkaArgs,
    pub stamp: String,
    /// Short: k6 message ids are cut at 64 characters.
    pub run_id: String,
    pub ingest_port: u16,
    pub writer_ports: Vec<u16>,
    pub sizes: Sizes,
    pub restart_delay_s: u64,
    pub hosts_subnet: net::Subnet,
}
