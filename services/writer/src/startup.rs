//! Wiring: connect and prepare the stores, make sure the topics exist, start the consumers and
//! the metrics endpoint, stop cleanly on a signal.

use crate::config::WriterConfig;
use crate::consumer::BatchConsumer;
use crate::dlq::Dlq;
use crate::driver::Driver;
use crate::stall::Rejoiner;
use actix_web::{web, App, HttpServer};
use anyhow::Context;
use pipeline_common::catalog;
use pipeline_common::kafka::ensure_topic;
use pipeline_common::telemetry;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Runs the writer until `stop` is cancelled; returns after in-flight writes are committed.
pub async fn run(cfg: WriterConfig, stop: CancellationToken) -> anyhow::Result<()> {
    let handle = telemetry::metrics_handle();
    let mut links = cfg.stores.plaintext_links();
    links.extend(pipeline_common::kafka::plaintext_brokers(&cfg.kafka));
    pipeline_common::secret::check_plaintext(&links, cfg.kafka.allow_plaintext).map_err(anyhow::Error::msg)?;
    cfg.check_selection().map_err(anyhow::Error::msg)?;
    // Only the stores this deployment has: one left out of --stores is never contacted, so its
    // server may be absent, and the health endpoint answers without waiting for it.
    let stores =
        pipeline_stores::connect(&cfg.stores, cfg.stores.selected()).await.context("connecting to the stores")?;
    // Every server is asked whether it takes the largest message the edge accepts, before
    // anything is consumed: a server set below MAX_BODY_BYTES stops the writer here, with the
    // setting to change, instead of dead-lettering a message the ingest answered 202 for.
    let largest = pipeline_common::largest::messages(pipeline_common::Limits { max_body_bytes: cfg.max_body_bytes });
    for s in &stores {
        s.prepare().await.with_context(|| format!("preparing {}", s.kind()))?;
        s.holds(&largest).await.with_context(|| {
            format!("checking that {} holds the largest message MAX_BODY_BYTES={} allows", s.kind(), cfg.max_body_bytes)
        })?;
    }
    ensure_topic(&cfg.kafka, &cfg.kafka.topic, cfg.kafka.partitions).await.context("creating the topic")?;
    ensure_topic(&cfg.kafka, &cfg.dlq_topic, 1).await.context("creating the dead-letter topic")?;

    let server = HttpServer::new({
        let handle = handle.clone();
        move || App::new().app_data(web::Data::new(handle.clone())).configure(telemetry::routes)
    })
    .workers(1)
    .disable_signals()
    .bind(cfg.metrics_addr)
    .with_context(|| format!("binding metrics on {}", cfg.metrics_addr))?
    .run();
    let server_handle = server.handle();
    tokio::spawn(server);

    let dlq = Dlq::new(&cfg.kafka, &cfg.dlq_topic)?;
    let cfg = Arc::new(cfg);
    // The writer holds each store by its write side only.
    let sinks: Vec<Arc<dyn pipeline_stores::Sink>> =
        stores.into_iter().map(|s| s as Arc<dyn pipeline_stores::Sink>).collect();
    let driver = Arc::new(Driver::new(&cfg, sinks.clone(), dlq.clone()));
    tracing::info!(
        consumers = cfg.consumers,
        stores = %cfg.stores.selection,
        sync = ?cfg.sync_stores.0,
        pool = ?cfg.pool,
        commit = ?cfg.commit,
        boot_id = %telemetry::boot().id,
        "writer started"
    );
    // A consumer that ends with an error (or panics) stops the others and makes the process
    // exit non-zero, so a supervisor restarts it; none can die while the rest carry on unseen.
    let mut tasks = tokio::task::JoinSet::new();
    let mut members = Vec::with_capacity(cfg.consumers);
    for id in 0..cfg.consumers {
        let c = BatchConsumer::new(id, cfg.clone(), driver.clone(), dlq.clone())?;
        members.push(c.membership());
        tasks.spawn(c.run(stop.clone()));
    }
    let rejoiner = (cfg.rejoin_stalled_secs > 0)
        .then(|| Rejoiner::new(Duration::from_secs(cfg.rejoin_stalled_secs), members, sinks.clone()));
    crate::watermarks::spawn(&cfg.kafka, stop.clone(), rejoiner);
    let mut failure: Option<anyhow::Error> = None;
    while let Some(joined) = tasks.join_next().await {
        let err = match joined {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => e,
            Err(e) => anyhow::anyhow!("consumer task died: {e}"),
        };
        tracing::error!(error = %err, "a consumer cannot continue; stopping the writer");
        metrics::counter!(catalog::WRITER_CONSUMER_FAILURES_TOTAL).increment(1);
        stop.cancel();
        failure.get_or_insert(err);
    }
    server_handle.stop(true).await;
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
