//! The null-202 reference of the performance figures: an HTTP server that reads each body and
//! answers 202 without looking at it, on the same framework and worker count as the ingest.
//! k6 against it measures what the load generator alone allows on this machine, so
//! `scripts/bench` can report the pipeline's rate as a share of it (the performance issue's
//! "≥ 0.6 × the k6 script's own rate").
//!
//!   INGEST_LISTEN=127.0.0.1:18090 cargo run --release -p ingest --example null_202
//!
//! `/healthz` answers with a boot id like the ingest's, because every k6 script checks it before
//! and after its run.

use actix_web::{web, App, HttpResponse, HttpServer};

async fn accepted(body: web::Bytes) -> HttpResponse {
    // Read (the framework already did) and dropped: the reference pays for receiving the body.
    HttpResponse::Accepted().content_type("application/json").body(format!("{{\"bytes\":{}}}", body.len()))
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let listen = std::env::var("INGEST_LISTEN").unwrap_or_else(|_| "127.0.0.1:18090".into());
    let boot = format!("null-{}", std::process::id());
    // `INGEST_WORKERS` as the ingest reads it (0 or unset: one per core), so the reference runs
    // the ingest's worker count.
    let flag = std::env::var("INGEST_WORKERS").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    let workers = ingest::config::http_workers(flag);
    eprintln!("null_202: listening on {listen} with {workers} workers");
    HttpServer::new(move || {
        let boot = boot.clone();
        App::new()
            .app_data(web::PayloadConfig::new(16 * 1024 * 1024))
            .route("/v1/messages", web::post().to(accepted))
            .route("/v1/messages/batch", web::post().to(accepted))
            .route(
                "/healthz",
                web::get().to(move || {
                    let body = format!("{{\"status\":\"ok\",\"boot_id\":\"{boot}\"}}");
                    async move { HttpResponse::Ok().content_type("application/json").body(body) }
                }),
            )
    })
    .workers(workers)
    .bind(listen)?
    .run()
    .await
}
