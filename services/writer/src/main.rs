#![forbid(unsafe_code)]
use clap::Parser;
use pipeline_common::telemetry;
use tokio_util::sync::CancellationToken;
use writer::config::WriterConfig;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _logs = telemetry::init_tracing();
    let cfg = WriterConfig::parse();
    if cfg.list_stores {
        // A reader that stops early (`| head -1`) is no error: stop writing, exit 0.
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        for kind in cfg.stores.selected() {
            if writeln!(out, "{kind}").is_err() {
                break;
            }
        }
        return Ok(());
    }
    let stop = CancellationToken::new();
    tokio::spawn({
        let stop = stop.clone();
        async move {
            shutdown_signal().await;
            tracing::info!("signal received: stop fetching, finish in-flight writes, commit");
            stop.cancel();
            shutdown_signal().await;
            tracing::warn!("second signal: exiting now; uncommitted records will be redelivered");
            std::process::exit(130);
        }
    });
    writer::startup::run(cfg, stop).await
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
