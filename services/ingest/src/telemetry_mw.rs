//! Request metrics: `ingest_requests_total{route,status}` and
//! `ingest_request_seconds{route}`, labelled by route pattern (never by raw path).

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use metrics::{counter, histogram};
use pipeline_common::catalog;
use std::time::Instant;

pub async fn record(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let started = Instant::now();
    let route = req.match_pattern().unwrap_or_else(|| "unmatched".into());
    let res = next.call(req).await;
    let status = match &res {
        Ok(r) => r.status().as_u16(),
        Err(e) => e.as_response_error().status_code().as_u16(),
    };
    counter!(catalog::INGEST_REQUESTS_TOTAL, "route" => route.clone(), "status" => status.to_string()).increment(1);
    histogram!(catalog::INGEST_REQUEST_SECONDS, "route" => route).record(started.elapsed().as_secs_f64());
    res
}
