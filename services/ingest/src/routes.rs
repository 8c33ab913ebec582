//! HTTP handlers. Every error is JSON `{"error": code, "detail": what and where}`; bad input is
//! a 4xx and never touches the ring.
//!
//! The answers to a valid request are a contract (docs/architecture.md, "What an answer means"):
//! - **202**: Kafka acknowledged every message (acks=all); each will be in all four stores once.
//! - **503** (`ring_full`, `kafka_unavailable`, with Retry-After): nothing of the request was
//!   written and nothing will be. Retrying is always safe.
//! - **504** `uncertain` (with Retry-After and the request's `ids`): the messages entered the
//!   pipeline but Kafka did not confirm them in time (the deadline passed, or librdkafka reported
//!   a failure after it may have sent them). Each may be stored, at most once; retrying with the
//!   same ids is safe because every store writes by id.
//!
//! A client that loses the connection after sending must treat the request as uncertain too.

use crate::config::{AckMode, IngestConfig};
use crate::kafka::{Delivery, Publisher, RequestAck};
use crate::ring::{Entry, Ring};
use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse, ResponseError};
use futures::StreamExt;
use metrics::counter;
use pipeline_common::catalog;
use pipeline_common::message::{FieldError, Limits, Message, NewMessage};
use pipeline_common::record;
use pipeline_common::telemetry;
use pipeline_common::version::VersionClock;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::fmt;
use time::OffsetDateTime;
use tokio::sync::oneshot;

/// Each HTTP worker's own ring producer handle (workers are single-threaded).
pub struct WorkerRing(pub RefCell<Ring>);

#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    detail: Value,
    retry_after: Option<u64>,
    /// The request's message ids, for an `uncertain` answer.
    ids: Option<Vec<String>>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, detail: impl Into<Value>) -> Self {
        ApiError { status, code, detail: detail.into(), retry_after: None, ids: None }
    }
    /// 503: nothing was written.
    fn unavailable(code: &'static str, detail: &str, retry_after: u64) -> Self {
        ApiError { retry_after: Some(retry_after), ..Self::new(StatusCode::SERVICE_UNAVAILABLE, code, detail) }
    }
    /// 504: the messages may or may not be stored.
    fn uncertain(detail: &str, retry_after: u64, msgs: &[Message]) -> Self {
        counter!(catalog::INGEST_UNCERTAIN_MESSAGES_TOTAL).increment(msgs.len() as u64);
        ApiError {
            retry_after: Some(retry_after),
            ids: Some(msgs.iter().map(|m| m.id.clone()).collect()),
            ..Self::new(StatusCode::GATEWAY_TIMEOUT, "uncertain", detail)
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.detail)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }
    fn error_response(&self) -> HttpResponse {
        let mut resp = HttpResponse::build(self.status);
        if let Some(s) = self.retry_after {
            resp.insert_header((header::RETRY_AFTER, s.to_string()));
        }
        match &self.ids {
            Some(ids) => resp.json(json!({ "error": self.code, "detail": self.detail, "ids": ids })),
            None => resp.json(json!({ "error": self.code, "detail": self.detail })),
        }
    }
}

/// Checks the content type and reads the body up to the limit, without buffering past it.
async fn read_json_body(req: &HttpRequest, mut payload: web::Payload, limit: usize) -> Result<web::BytesMut, ApiError> {
    let ct = req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let mime = ct.split(';').next().unwrap_or("").trim();
    if !mime.eq_ignore_ascii_case("application/json") {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!("Content-Type must be application/json, got `{ct}`"),
        ));
    }
    let too_large =
        || ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", format!("body over {limit} bytes"));
    if req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
        .is_some_and(|n| n > limit)
    {
        return Err(too_large());
    }
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "bad_body", e.to_string()))?;
        if body.len() + chunk.len() > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Syntax errors are 400 with line and column; well-formed JSON of the wrong shape is 422.
fn json_error(e: serde_json::Error) -> ApiError {
    use serde_json::error::Category;
    let detail = format!("{e}");
    match e.classify() {
        Category::Data => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_message", detail),
        _ => ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed_json",
            json!({ "message": detail, "line": e.line(), "column": e.column() }),
        ),
    }
}

fn field_errors(index: Option<usize>, errors: &[FieldError]) -> Vec<Value> {
    errors.iter().map(|e| json!({ "index": index, "field": e.field, "reason": e.reason })).collect()
}

fn limits(cfg: &IngestConfig) -> Limits {
    Limits { max_body_bytes: cfg.max_body_bytes }
}

/// Waits for Kafka's delivery reports (in `--ack kafka` mode) within the deadline and turns
/// them into the answer: 202 when all are stored, 503 only when none can have been written.
async fn await_ack(
    cfg: &IngestConfig,
    ack: Option<oneshot::Receiver<Delivery>>,
    msgs: &[Message],
) -> Result<(), ApiError> {
    let Some(ack) = ack else { return Ok(()) };
    let worst = match tokio::time::timeout(cfg.deadline(), ack).await {
        Err(_) => {
            return Err(ApiError::uncertain(
                "Kafka did not acknowledge within the deadline",
                cfg.retry_after_secs,
                msgs,
            ))
        }
        Ok(Ok(worst)) => worst,
        // Records were dropped without a report (cannot happen while the producer lives):
        // nothing says they were not sent.
        Ok(Err(_)) => Delivery::Uncertain("delivery report lost".to_string()),
    };
    match worst {
        Delivery::Stored => Ok(()),
        Delivery::Uncertain(e) => Err(ApiError::uncertain(&e, cfg.retry_after_secs, msgs)),
        // No record of the request was sent (`RequestAck` makes a partial one uncertain).
        Delivery::NotSent(e) => Err(ApiError::unavailable("kafka_unavailable", &e, cfg.retry_after_secs)),
    }
}

/// Puts validated messages in the ring as the topic's records (all or none; a batch is one
/// record unless it passes `--record-max-bytes`) and, in `--ack kafka` mode, waits for Kafka.
async fn publish(cfg: &IngestConfig, ring: &WorkerRing, msgs: &[Message]) -> Result<(), ApiError> {
    let records = record::encode(msgs, cfg.record_max_bytes);
    let (ack, rx) = match cfg.ack {
        AckMode::Kafka => {
            let (ack, rx) = RequestAck::new(records.len());
            (Some(ack), Some(rx))
        }
        AckMode::Ring => (None, None),
    };
    let entries = records.into_iter().map(|payload| Entry { payload, ack: ack.clone() }).collect();
    drop(ack);
    let put = ring.0.borrow_mut().try_put_all(entries);
    put.map_err(|_| ApiError::unavailable("ring_full", "the ingest ring is full; retry later", cfg.retry_after_secs))?;
    await_ack(cfg, rx, msgs).await
}

pub async fn post_message(
    req: HttpRequest,
    body: web::Payload,
    cfg: web::Data<IngestConfig>,
    ring: web::Data<WorkerRing>,
    clock: web::Data<VersionClock>,
) -> Result<HttpResponse, ApiError> {
    let bytes = read_json_body(&req, body, cfg.max_message_request_bytes()).await?;
    let new: NewMessage = serde_json::from_slice(&bytes).map_err(json_error)?;
    let now = OffsetDateTime::now_utc();
    let msg = new.into_message(limits(&cfg), now, clock.next(now)).map_err(|errs| {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_message", Value::Array(field_errors(None, &errs)))
    })?;
    publish(&cfg, &ring, std::slice::from_ref(&msg)).await?;
    Ok(HttpResponse::Accepted().json(json!({ "id": msg.id, "version": msg.version })))
}

pub async fn post_batch(
    req: HttpRequest,
    body: web::Payload,
    cfg: web::Data<IngestConfig>,
    ring: web::Data<WorkerRing>,
    clock: web::Data<VersionClock>,
) -> Result<HttpResponse, ApiError> {
    let bytes = read_json_body(&req, body, cfg.max_request_bytes).await?;
    // A well-formed batch parses in one pass, straight into messages; only a bad one goes
    // through a JSON tree, to report every bad item by its index. (The tree for every batch
    // was 14 % of the ingest's CPU samples under batch load.)
    let msgs = match serde_json::from_slice::<Vec<NewMessage>>(&bytes) {
        Ok(items) if !items.is_empty() && items.len() <= cfg.max_batch => {
            validate(&cfg, &clock, items.into_iter().map(Ok::<_, std::convert::Infallible>))
        }
        // Freed before the slow path builds its tree: a body of the largest size is not held
        // twice.
        parsed => {
            drop(parsed);
            validate_each(&cfg, &clock, &bytes)
        }
    }?;
    publish(&cfg, &ring, &msgs).await?;
    let versions = msgs.iter().map(|m| m.version).collect();
    Ok(HttpResponse::Accepted().json(AcceptedBatch { ids: msgs.iter().map(|m| m.id.as_str()).collect(), versions }))
}

/// A batch's 202 body, serialized straight from the ids (no JSON tree of copies per request):
/// the ids and, in the same order, the versions they were accepted as.
#[derive(serde::Serialize)]
struct AcceptedBatch<'a> {
    ids: Vec<&'a str>,
    versions: Vec<u64>,
}

/// Validates a batch's items: all valid, or a 422 naming each bad item or field by index.
// The large error is the HTTP answer itself, built at most once per bad request.
#[allow(clippy::result_large_err)]
/// Items are stamped in order, so a later item with the id of an earlier one is the newer version.
fn validate<E: fmt::Display>(
    cfg: &IngestConfig,
    clock: &VersionClock,
    items: impl ExactSizeIterator<Item = Result<NewMessage, E>>,
) -> Result<Vec<Message>, ApiError> {
    let now = OffsetDateTime::now_utc();
    let (mut msgs, mut bad) = (Vec::with_capacity(items.len()), Vec::new());
    for (i, item) in items.enumerate() {
        match item {
            Err(e) => bad.push(json!({ "index": i, "field": null, "reason": e.to_string() })),
            Ok(new) => match new.into_message(limits(cfg), now, clock.next(now)) {
                Ok(m) => msgs.push(m),
                Err(errs) => bad.extend(field_errors(Some(i), &errs)),
            },
        }
    }
    if !bad.is_empty() {
        return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_batch", Value::Array(bad)));
    }
    Ok(msgs)
}

/// The slow path for a batch that did not parse as 1 to `max_batch` messages: says why, item by
/// item.
#[allow(clippy::result_large_err)] // as for `validate`
fn validate_each(cfg: &IngestConfig, clock: &VersionClock, bytes: &[u8]) -> Result<Vec<Message>, ApiError> {
    let items: Vec<Value> = match serde_json::from_slice::<Value>(bytes).map_err(json_error)? {
        Value::Array(items) => items,
        _ => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_batch",
                "the body must be a JSON array",
            ))
        }
    };
    if items.is_empty() || items.len() > cfg.max_batch {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_batch",
            format!("a batch holds 1 to {} messages, got {}", cfg.max_batch, items.len()),
        ));
    }
    validate(cfg, clock, items.into_iter().map(serde_json::from_value::<NewMessage>))
}

pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(telemetry::health())
}

pub async fn readyz(publisher: web::Data<Publisher>) -> HttpResponse {
    let publisher = publisher.into_inner();
    let found = tokio::task::spawn_blocking(move || publisher.partition_count()).await;
    match found {
        Ok(Ok(Some(n))) => HttpResponse::Ok().json(json!({ "status": "ready", "partitions": n })),
        Ok(Ok(None)) => {
            HttpResponse::ServiceUnavailable().json(json!({ "status": "not_ready", "detail": "topic missing" }))
        }
        Ok(Err(e)) => {
            HttpResponse::ServiceUnavailable().json(json!({ "status": "not_ready", "detail": e.to_string() }))
        }
        Err(e) => HttpResponse::ServiceUnavailable().json(json!({ "status": "not_ready", "detail": e.to_string() })),
    }
}

pub async fn metrics(handle: web::Data<metrics_exporter_prometheus::PrometheusHandle>) -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain; version=0.0.4").body(handle.render())
}

/// Catch-all: unknown paths and methods get the same JSON error shape.
pub async fn not_found(req: HttpRequest) -> HttpResponse {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("no route for {} {}", req.method(), req.path()))
        .error_response()
}
