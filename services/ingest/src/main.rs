use clap::Parser;
use ingest::config::IngestConfig;
use ingest::startup::Application;
use pipeline_common::telemetry;

#[actix_web::main]
async fn main() -> anyhow::Result<()> {
    telemetry::init_tracing();
    let cfg = IngestConfig::parse();
    Application::build(cfg).await?.run().await
}
