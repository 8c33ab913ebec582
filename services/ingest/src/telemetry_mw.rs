//! Request metrics and the access log.
//!
//! Metrics: `ingest_requests_total{route,status,key}` and `ingest_request_seconds{route}`,
//! labelled by route pattern (never by raw path) and API key name (the names in the keys file:
//! a bounded set). The access log is one structured line per request (tracing target `access`):
//! time, key name, client address, route, status, messages accepted, body bytes, latency; one
//! request in every `--access-log-every` is logged (0: none).
//!
//! Every request runs in a `request` span (route, client, a request number, the
//! `x-request-id` header when the client sends one), so whatever the handlers log about it
//! (a deadline, a refused body, a broker error) says which request it was.

use crate::auth::KeyName;
use crate::config::IngestConfig;
use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header;
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage};
use metrics::{counter, histogram};
use pipeline_common::catalog;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;

/// How many messages a response accepted (set by the handlers on a 202).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Accepted(pub usize);

static SEEN: AtomicU64 = AtomicU64::new(0);

/// Observes one request: its span, its metrics, its access-log line.
pub(crate) async fn observe(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let started = Instant::now();
    let route = req.match_pattern().unwrap_or_else(|| "unmatched".into());
    let every = req.app_data::<web::Data<IngestConfig>>().map_or(1, |c| c.access_log_every);
    let client = req.peer_addr().map(|a| a.ip().to_string()).unwrap_or_default();
    let bytes: u64 = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse().ok()).unwrap_or(0);
    let n = SEEN.fetch_add(1, Ordering::Relaxed);
    // The client's id, when it is a short printable token (it goes into log lines).
    let client_id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| v.len() <= 64 && v.bytes().all(|b| b.is_ascii_graphic()))
        .unwrap_or("");
    let span = tracing::info_span!("request", n, route = %route, client = %client, request_id = client_id);
    let res = next.call(req).instrument(span).await;
    let (status, key, messages) = match &res {
        Ok(r) => (
            r.status().as_u16(),
            r.request().extensions().get::<KeyName>().map(|k| k.0.clone()),
            r.response().extensions().get::<Accepted>().map_or(0, |a| a.0),
        ),
        Err(e) => (e.as_response_error().status_code().as_u16(), None, 0),
    };
    let key = key.unwrap_or_else(|| Arc::from("none"));
    let elapsed = started.elapsed();
    counter!(catalog::INGEST_REQUESTS_TOTAL, "route" => route.clone(), "status" => status.to_string(), "key" => key.to_string())
        .increment(1);
    histogram!(catalog::INGEST_REQUEST_SECONDS, "route" => route.clone()).record(elapsed.as_secs_f64());
    if messages > 0 {
        counter!(catalog::INGEST_ACCEPTED_MESSAGES_TOTAL, "key" => key.to_string()).increment(messages as u64);
    }
    if every > 0 && n.is_multiple_of(every) {
        tracing::info!(
            target: "access",
            key = %key,
            client = %client,
            route = %route,
            status,
            messages,
            bytes,
            latency_ms = elapsed.as_secs_f64() * 1000.0,
        );
    }
    res
}
