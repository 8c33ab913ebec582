//! Request metrics and the access log.
//!
//! Metrics: `ingest_requests_total{route,status,key}` and `ingest_request_seconds{route}`,
//! labelled by route pattern (never by raw path) and API key name (the names in the keys file:
//! a bounded set). The access log is one structured line per request (tracing target `access`):
//! time, key name, client address, route, status, messages accepted, body bytes, latency; one
//! request in every `--access-log-every` is logged (0: none).
//!
//! Every request runs in a `request` span (route, client, a request number, the
//! `x-request-id` header when the client sends one), so whatever is logged about it says which
//! request it was. The span is at debug level: at info nothing logs inside a request (its access
//! line is written once it is answered, with the same fields), yet the subscriber formats an
//! enabled span's fields for every request: a visible share of an HTTP worker's CPU per request
//! (docs/results/2026-12-07-consumer-and-span.md). A handler that logs at info or above names
//! the request itself.

use crate::auth::KeyName;
use crate::edge::Edge;
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

/// The request metrics' handles, by route, status and key, made once per HTTP worker (a worker
/// is one thread): `counter!` with labels builds the label strings and looks the series up in
/// the registry on every call, which was a visible part of a request's CPU. Bounded: routes and
/// statuses are the API's, keys the keys file's.
struct Handles {
    requests: metrics::Counter,
    seconds: metrics::Histogram,
    accepted: metrics::Counter,
}

/// By route, then by status and key.
type ByRoute = std::collections::HashMap<String, std::collections::HashMap<(u16, Arc<str>), Handles>>;

thread_local! {
    static HANDLES: std::cell::RefCell<ByRoute> = std::cell::RefCell::new(ByRoute::new());
}

fn record(route: &str, status: u16, key: &Arc<str>, elapsed: f64, messages: usize) {
    HANDLES.with(|h| {
        let mut h = h.borrow_mut();
        if !h.contains_key(route) {
            h.insert(route.to_string(), Default::default());
        }
        let Some(by_status) = h.get_mut(route) else { return };
        let handles = by_status.entry((status, key.clone())).or_insert_with(|| Handles {
            requests: counter!(catalog::INGEST_REQUESTS_TOTAL, "route" => route.to_string(), "status" => status.to_string(), "key" => key.to_string()),
            seconds: histogram!(catalog::INGEST_REQUEST_SECONDS, "route" => route.to_string()),
            accepted: counter!(catalog::INGEST_ACCEPTED_MESSAGES_TOTAL, "key" => key.to_string()),
        });
        handles.requests.increment(1);
        handles.seconds.record(elapsed);
        if messages > 0 {
            handles.accepted.increment(messages as u64);
        }
    });
}

/// The client's address as the logs show it (empty when unknown).
#[derive(Clone, Copy)]
struct ClientIp(Option<std::net::IpAddr>);

impl std::fmt::Display for ClientIp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(ip) => ip.fmt(f),
            None => Ok(()),
        }
    }
}

/// Observes one request: its span, its metrics, its access-log line.
pub(crate) async fn observe(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let started = Instant::now();
    let route = req.match_pattern().unwrap_or_else(|| "unmatched".into());
    let every = req.app_data::<web::Data<Edge>>().map_or(1, |e| e.settings.access_log_every);
    // Displayed where it is logged, not made into a string per request.
    let client = ClientIp(req.peer_addr().map(|a| a.ip()));
    let bytes: u64 = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse().ok()).unwrap_or(0);
    let n = SEEN.fetch_add(1, Ordering::Relaxed);
    // The client's id, when it is a short printable token (it goes into log lines).
    let client_id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| v.len() <= 64 && v.bytes().all(|b| b.is_ascii_graphic()))
        .unwrap_or("");
    let span = tracing::debug_span!("request", n, route = %route, client = %client, request_id = client_id);
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
    record(&route, status, &key, elapsed.as_secs_f64(), messages);
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
