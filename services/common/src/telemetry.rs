//! Logs, metrics and the process boot id, set up the same way by every binary.
//!
//! The boot id answers the first lesson of the reference experiment (docs/explanation/experiment.md) ("verify every run is a fresh process"): a new
//! random id per process start, exported as `pipeline_process_info{service,version,boot_id} 1`
//! (with `process_start_time_seconds`) and as `boot_id` on `/healthz`, so a load script can prove
//! it measured one fresh process from start to end.

use crate::catalog;
use actix_web::{web, HttpResponse};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::io::IsTerminal;
use std::sync::OnceLock;
use time::OffsetDateTime;
use tracing_subscriber::{fmt, EnvFilter};

/// Identity of this process start.
#[derive(Debug, Clone)]
pub struct Boot {
    pub id: String,
    pub started_at: OffsetDateTime,
}

static BOOT: OnceLock<Boot> = OnceLock::new();

/// The boot identity of this process, fixed on first use.
pub fn boot() -> &'static Boot {
    // A v7 id is unique per process start and sorts by start time.
    BOOT.get_or_init(|| Boot { id: uuid::Uuid::now_v7().simple().to_string(), started_at: OffsetDateTime::now_utc() })
}

/// Installs the tracing subscriber: `RUST_LOG` filters (default `info`), `LOG_FORMAT=json` for
/// machine-readable lines. Colours only on a terminal: a log file or a container's log gets plain
/// text. Lines reach standard error a block at a time ([`crate::logbuf`]): keep the guard until
/// the program ends, it writes out the last ones. Safe to call twice (tests spawn several apps
/// in one process).
pub fn init_tracing() -> crate::logbuf::FlushGuard {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let json = std::env::var("LOG_FORMAT").map(|v| v == "json").unwrap_or(false);
    let (writer, guard) = crate::logbuf::BufferedStderr::start();
    let builder = fmt().with_env_filter(filter).with_writer(writer).with_ansi(std::io::stderr().is_terminal());
    let _ = if json { builder.json().try_init() } else { builder.try_init() };
    guard
}

static PROMETHEUS: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the global Prometheus recorder once and returns its handle; renders with
/// `handle.render()`. Also records `pipeline_process_info` and `process_start_time_seconds`.
pub fn metrics_handle() -> PrometheusHandle {
    PROMETHEUS
        .get_or_init(|| {
            let handle = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("seconds".into()), &LATENCY_BUCKETS)
                .and_then(|b| b.set_buckets_for_metric(Matcher::Suffix("records".into()), &SIZE_BUCKETS))
                .expect("static buckets are valid")
                .install_recorder()
                .expect("no other metrics recorder is installed");
            catalog::describe_all();
            let boot = boot();
            metrics::gauge!(
                catalog::PIPELINE_PROCESS_INFO,
                "service" => service_name(),
                "version" => env!("CARGO_PKG_VERSION"),
                "boot_id" => boot.id.clone()
            )
            .set(1.0);
            metrics::gauge!(catalog::PROCESS_START_TIME_SECONDS)
                .set(boot.started_at.unix_timestamp_nanos() as f64 / 1e9);
            handle
        })
        .clone()
}

/// The `service` label of `pipeline_process_info`: the executable's name (`ingest`, `writer`);
/// a test binary's cargo hash suffix (`api-0123456789abcdef`) is dropped.
pub fn service_name() -> String {
    let exe = std::env::current_exe().ok();
    let stem = exe.as_deref().and_then(|p| p.file_stem()).and_then(|s| s.to_str()).unwrap_or("unknown");
    match stem.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => name.to_string(),
        _ => stem.to_string(),
    }
}

/// Histogram buckets in seconds: 100 µs to 30 s, for request, delivery and write latencies;
/// about 1.5× apart below a second, so a p99 read from them (the bench's per-stage table) is
/// within that factor of the truth.
pub const LATENCY_BUCKETS: [f64; 28] = [
    0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05,
    0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Histogram buckets for batch sizes (metric names ending in `records`).
pub const SIZE_BUCKETS: [f64; 12] = [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0];

/// The body of every service's `/healthz`: the same fields and formats everywhere, so a script
/// can tell a fresh process (boot id) from a restarted one without knowing which service it asks.
pub fn health() -> serde_json::Value {
    let boot = boot();
    serde_json::json!({
        "status": "up",
        "boot_id": boot.id,
        "started_at": boot.started_at.format(&time::format_description::well_known::Rfc3339).unwrap_or_default(),
        "version": env!("CARGO_PKG_VERSION"),
    })
}

/// `GET /healthz` of every service: [`health`] as JSON. Written once here so the ingest and the
/// writer cannot drift apart (both serve it with actix-web).
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(health())
}

/// `GET /metrics` of every service: the Prometheus text exposition of the recorder
/// [`metrics_handle`] installed; the app registers that handle as `web::Data`.
pub async fn metrics(handle: web::Data<PrometheusHandle>) -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain; version=0.0.4").body(handle.render())
}

/// Registers [`healthz`] and [`metrics`] on an app (which must hold the handle as `web::Data`).
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/healthz", web::get().to(healthz)).route("/metrics", web::get().to(metrics));
}
