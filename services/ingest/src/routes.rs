//! HTTP handlers. Every error is JSON `{"error": code, "detail": what and where}`; bad input is
//! a 4xx and never touches the ring.
//!
//! The answers to a valid request are a contract (docs/explanation/trust.md, "What an answer means"):
//! - **202**: Kafka acknowledged every message (acks=all); each will be in all four stores once.
//! - **503** (`ring_full`, `kafka_unavailable`, with Retry-After): nothing of the request was
//!   written and nothing will be. Retrying is always safe.
//! - **504** `uncertain` (with Retry-After and the request's `ids`): the messages entered the
//!   pipeline but Kafka did not confirm them in time (the deadline passed, or librdkafka reported
//!   a failure after it may have sent them). Each may be stored, at most once; retrying with the
//!   same ids is safe because every store writes by id.
//!
//! A client that loses the connection after sending must treat the request as uncertain too.

use crate::ack::{Delivery, RequestAck};
use crate::answer::{ApiError, Code};
use crate::auth::KeyName;
use crate::body::{self, BatchError, BodyBudget, Bounds};
use crate::config::{AckMode, IngestConfig};
use crate::edge::Edge;
use crate::gather::Entry;
use crate::limits::{KeyLimits, Refusal};
use crate::openapi::{Accepted, AcceptedBatch};
use crate::ring::Ring;
use crate::telemetry_mw::Accepted as Counted;
use actix_web::{web, HttpMessage, HttpRequest, HttpResponse, ResponseError};
use pipeline_common::message::{FieldError, Limits, Message, NewMessage};
use pipeline_common::record;
use pipeline_common::version::VersionClock;
use serde_json::{json, Value};
use std::cell::RefCell;
use time::OffsetDateTime;
use tokio::sync::oneshot;

/// Each HTTP worker's own ring producer handle (workers are single-threaded).
pub(crate) struct WorkerRing(pub RefCell<Ring>);

/// Syntax errors are 400 with line and column; well-formed JSON of the wrong shape is 422.
fn json_error(e: serde_json::Error) -> ApiError {
    use serde_json::error::Category;
    let detail = format!("{e}");
    match e.classify() {
        Category::Data => ApiError::new(Code::InvalidMessage, detail),
        _ => ApiError::new(Code::MalformedJson, json!({ "message": detail, "line": e.line(), "column": e.column() })),
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
        Delivery::Acknowledged => Ok(()),
        Delivery::Uncertain(e) => Err(ApiError::uncertain(&e, cfg.retry_after_secs, msgs)),
        // No record of the request was sent (`RequestAck` makes a partial one uncertain).
        Delivery::NotSent(e) => Err(ApiError::retry(Code::KafkaUnavailable, &e, cfg.retry_after_secs)),
    }
}

/// A refusal for the key's limits as its answer.
fn limited(r: Refusal) -> ApiError {
    match r {
        Refusal::Rate { reason, retry_after } => ApiError::retry(
            Code::RateLimited,
            &format!(
                "this key's {} limit is reached; retry later",
                if reason == "bytes" { "bytes-per-second" } else { "messages-per-second" }
            ),
            retry_after.as_secs_f64().ceil().max(1.0) as u64,
        ),
        Refusal::TooLarge { reason, limit } => ApiError::new(
            Code::PayloadTooLarge,
            format!("more than this key may send in one second ({limit} {reason} per second)"),
        ),
        Refusal::Share => ApiError::retry(Code::KeyBusy, "this key's share of the ingest is in use; retry later", 1),
    }
}

/// Puts validated messages in the ring as the topic's records (all or none; a batch is one
/// record unless it passes `--record-max-bytes`) and, in `--ack kafka` mode, waits for Kafka.
/// The request's key must have room for them first (`crate::limits`), which it holds until the
/// request has its answer.
async fn publish(cfg: &IngestConfig, ring: &WorkerRing, key: Key<'_>, msgs: &[Message]) -> Result<(), ApiError> {
    let records = record::encode(msgs, cfg.record_max_bytes);
    let bytes: u64 = records.iter().map(|r| r.len() as u64).sum();
    let _held = key.limits.admit(&key.name.0, key.name.1, msgs.len() as u64, bytes).map_err(limited)?;
    let (ack, rx) = match cfg.ack {
        AckMode::Kafka => {
            let (ack, rx) = RequestAck::new(records.len());
            (Some(ack), Some(rx))
        }
        AckMode::Ring => (None, None),
    };
    let put = std::time::Instant::now();
    let entries = records.into_iter().map(|payload| Entry { payload, ack: ack.clone(), put }).collect();
    drop(ack);
    let put = ring.0.borrow_mut().try_put_all(entries);
    put.map_err(|_| ApiError::retry(Code::RingFull, "the ingest ring is full; retry later", cfg.retry_after_secs))?;
    await_ack(cfg, rx, msgs).await
}

fn bounds<'a>(cfg: &IngestConfig, budget: &'a BodyBudget, limit: usize) -> Bounds<'a> {
    Bounds { limit, deadline: cfg.read_timeout(), budget, retry_after: cfg.retry_after_secs }
}

/// The request's key (set by `crate::auth`) and every key's limits.
struct Key<'a> {
    name: KeyName,
    limits: &'a KeyLimits,
}

fn key_of<'a>(req: &HttpRequest, limits: &'a KeyLimits) -> Key<'a> {
    let name = req.extensions().get::<KeyName>().cloned();
    // Every /v1 route passes `require_key`, which sets it; a route without it counts as "none".
    let name =
        name.unwrap_or_else(|| KeyName("none".into(), crate::auth::Limits { rate: 0, bytes_rate: 0, share: 1.0 }));
    Key { name, limits }
}

/// `POST /v1/messages`: one message.
pub(crate) async fn post_message(
    req: HttpRequest,
    payload: web::Payload,
    edge: web::Data<Edge>,
    ring: web::Data<WorkerRing>,
) -> Result<HttpResponse, ApiError> {
    let cfg = &edge.settings;
    let body = body::read_json(&req, payload, bounds(cfg, &edge.budget, cfg.max_message_request_bytes())).await?;
    let new: NewMessage = serde_json::from_slice(&body.bytes).map_err(json_error)?;
    drop(body);
    let now = OffsetDateTime::now_utc();
    let msg = new
        .into_message(limits(cfg), now, edge.clock.next(now))
        .map_err(|errs| ApiError::new(Code::InvalidMessage, Value::Array(field_errors(None, &errs))))?;
    publish(cfg, &ring, key_of(&req, &edge.key_limits), std::slice::from_ref(&msg)).await?;
    let mut resp = HttpResponse::Accepted().json(Accepted { id: &msg.id, version: msg.version });
    resp.extensions_mut().insert(Counted(1));
    Ok(resp)
}

/// `POST /v1/messages/batch`: 1 to `--max-batch` messages, all or none.
pub(crate) async fn post_batch(
    req: HttpRequest,
    payload: web::Payload,
    edge: web::Data<Edge>,
    ring: web::Data<WorkerRing>,
) -> Result<HttpResponse, ApiError> {
    let cfg = &edge.settings;
    let body = body::read_json(&req, payload, bounds(cfg, &edge.budget, cfg.max_request_bytes)).await?;
    // A well-formed batch parses in one pass, straight into messages; a bad one is taken apart
    // item by item, its count checked as it is read (`crate::body`).
    let items = body::parse_batch(&body.bytes, cfg.max_batch).map_err(|e| batch_error(cfg, e))?;
    drop(body);
    let msgs = validate(cfg, &edge.clock, items)?;
    publish(cfg, &ring, key_of(&req, &edge.key_limits), &msgs).await?;
    let versions = msgs.iter().map(|m| m.version).collect();
    let mut resp =
        HttpResponse::Accepted().json(AcceptedBatch { ids: msgs.iter().map(|m| m.id.as_str()).collect(), versions });
    resp.extensions_mut().insert(Counted(msgs.len()));
    Ok(resp)
}

/// Validates a batch's items: all valid, or a 422 naming each bad field by its item's index.
/// Items are stamped in order, so a later item with the id of an earlier one is the newer version.
// The large error is the HTTP answer itself, built at most once per bad request.
#[allow(clippy::result_large_err)]
fn validate(cfg: &IngestConfig, clock: &VersionClock, items: Vec<NewMessage>) -> Result<Vec<Message>, ApiError> {
    let now = OffsetDateTime::now_utc();
    let (mut msgs, mut bad) = (Vec::with_capacity(items.len()), Vec::new());
    for (i, new) in items.into_iter().enumerate() {
        match new.into_message(limits(cfg), now, clock.next(now)) {
            Ok(m) => msgs.push(m),
            Err(errs) => bad.extend(field_errors(Some(i), &errs)),
        }
    }
    if !bad.is_empty() {
        return Err(ApiError::new(Code::InvalidBatch, Value::Array(bad)));
    }
    Ok(msgs)
}

/// The answer to a batch body that is not a list of 1 to `--max-batch` valid messages.
fn batch_error(cfg: &IngestConfig, e: BatchError) -> ApiError {
    let invalid = |detail: Value| ApiError::new(Code::InvalidBatch, detail);
    match e {
        BatchError::Syntax(e) => json_error(e),
        BatchError::NotArray => invalid("the body must be a JSON array of messages".into()),
        BatchError::Count(n) => {
            let got = n.map_or(format!("more than {}", cfg.max_batch), |n| n.to_string());
            invalid(format!("a batch holds 1 to {} messages, got {got}", cfg.max_batch).into())
        }
        BatchError::Items { bad, parsed } => {
            let now = OffsetDateTime::now_utc();
            let mut all: Vec<(usize, Value)> = bad
                .into_iter()
                .map(|(i, reason)| (i, json!({ "index": i, "field": null, "reason": reason })))
                .collect();
            for (i, new) in parsed {
                if let Err(errs) = new.into_message(limits(cfg), now, 0) {
                    all.extend(field_errors(Some(i), &errs).into_iter().map(|e| (i, e)));
                }
            }
            all.sort_by_key(|(i, _)| *i);
            invalid(Value::Array(all.into_iter().map(|(_, e)| e).collect()))
        }
    }
}

pub(crate) async fn readyz(ready: web::Data<crate::ready::Readiness>) -> HttpResponse {
    ready.answer()
}

/// The OpenAPI document ([`crate::openapi`]), made once.
pub(crate) async fn openapi() -> HttpResponse {
    static DOC: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HttpResponse::Ok().content_type("application/json").body(DOC.get_or_init(crate::openapi::json).clone())
}

/// A method other than POST on an API route.
pub(crate) async fn method_not_allowed(req: HttpRequest) -> HttpResponse {
    ApiError::new(Code::MethodNotAllowed, format!("{} {} takes only POST", req.method(), req.path())).error_response()
}

/// Catch-all: unknown paths get the same JSON error shape.
pub(crate) async fn not_found(req: HttpRequest) -> HttpResponse {
    ApiError::new(Code::NotFound, format!("no route for {} {}", req.method(), req.path())).error_response()
}
