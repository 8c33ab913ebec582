#![forbid(unsafe_code)]
use clap::Parser;
use ingest::config::{Cmd, IngestConfig, KeyCmd};
use ingest::startup::Application;
use pipeline_common::telemetry;

/// mimalloc instead of glibc's malloc: a request allocates per message (parse, validation, the
/// Kafka payload, its delivery report), and glibc's allocator was a large share of the ingest's
/// profile under load; mimalloc lowered its CPU per message (docs/results/performance-log.md). The writer
/// gained nothing from it, so it keeps glibc's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[actix_web::main]
async fn main() -> anyhow::Result<()> {
    let _logs = telemetry::init_tracing();
    let cfg = IngestConfig::parse();
    if let Some(Cmd::Key { cmd: KeyCmd::New { name, token_out } }) = &cfg.cmd {
        return ingest::auth::new_key(name, token_out.as_deref());
    }
    Application::build(cfg).await?.run().await
}
