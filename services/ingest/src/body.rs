//! Request bodies, read and parsed within bounds, so no client can hold the ingest's memory or
//! its connections for as long or as much as it likes:
//!
//! - **time**: a body must arrive within `--read-timeout-ms` of the request's head (408 and the
//!   connection closed otherwise): a client trickling a byte a second cannot keep a connection
//!   and its buffer (the head itself is bounded by actix's `client_request_timeout`);
//! - **bytes**: every body being read or parsed holds its size in one process-wide budget
//!   (`--body-budget-bytes`), taken as the bytes arrive and given back when the body is dropped;
//!   a request that would pass it gets 503 `busy` at once, so concurrent large bodies cannot add
//!   up past the budget;
//! - **parse memory**: a batch is parsed item by item with its count checked as it goes (the
//!   1,001st item ends the parse), and a batch that is not a list of valid messages is taken
//!   apart as borrowed raw items, never as a tree of JSON values (a body of 8 MB of `[0,0,…]`
//!   made ~150 MB of `Value`s before: docs/explanation/security.md).

use crate::answer::{ApiError, Code};
use actix_web::http::header;
use actix_web::{web, HttpRequest};
use futures::StreamExt;
use metrics::{counter, gauge};
use pipeline_common::catalog;
use pipeline_common::NewMessage;
use serde::de::{DeserializeSeed, IgnoredAny, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The budget's unit: permits are kibibytes.
const UNIT: usize = 1024;

/// The process-wide budget of body bytes being read or parsed.
pub(crate) struct BodyBudget {
    permits: Arc<Semaphore>,
    total: usize,
    /// `ingest_body_bytes`, looked up once: `gauge!` per request hashed its key into the
    /// registry every time.
    in_use: metrics::Gauge,
}

impl BodyBudget {
    pub(crate) fn new(bytes: usize) -> BodyBudget {
        let units = bytes.div_ceil(UNIT).clamp(1, Semaphore::MAX_PERMITS);
        gauge!(catalog::INGEST_BODY_BUDGET_BYTES).set((units * UNIT) as f64);
        BodyBudget {
            permits: Arc::new(Semaphore::new(units)),
            total: units,
            in_use: gauge!(catalog::INGEST_BODY_BYTES),
        }
    }

    fn in_use(&self) -> usize {
        (self.total - self.permits.available_permits()) * UNIT
    }
}

/// A body and its share of the budget, given back when it is dropped.
pub(crate) struct Body {
    pub bytes: web::BytesMut,
    _held: Option<OwnedSemaphorePermit>,
}

/// How a body may be read.
pub(crate) struct Bounds<'a> {
    pub limit: usize,
    pub deadline: Duration,
    pub budget: &'a BodyBudget,
    pub retry_after: u64,
}

fn busy(retry_after: u64) -> ApiError {
    counter!(catalog::INGEST_BODY_REFUSALS_TOTAL, "reason" => "budget").increment(1);
    ApiError::retry(Code::Busy, "too many request bodies are being read; retry later", retry_after)
}

/// Checks the content type and reads the body up to `bounds.limit`, within the deadline and the
/// byte budget, without buffering past the limit.
pub(crate) async fn read_json(
    req: &HttpRequest,
    mut payload: web::Payload,
    bounds: Bounds<'_>,
) -> Result<Body, ApiError> {
    let ct = req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let mime = ct.split(';').next().unwrap_or("").trim();
    if !mime.eq_ignore_ascii_case("application/json") {
        return Err(ApiError::new(
            Code::UnsupportedMediaType,
            format!("Content-Type must be application/json, got `{ct}`"),
        ));
    }
    let limit = bounds.limit;
    let too_large = || ApiError::new(Code::PayloadTooLarge, format!("body over {limit} bytes"));
    let announced = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if announced.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let budget = bounds.budget;
    // The announced size is taken at once (a client cannot announce 8 MB and hold nothing).
    let mut held = match announced.filter(|n| *n > 0) {
        Some(n) => Some(
            budget
                .permits
                .clone()
                .try_acquire_many_owned(n.div_ceil(UNIT) as u32)
                .map_err(|_| busy(bounds.retry_after))?,
        ),
        None => None,
    };
    let read = async {
        let mut body = web::BytesMut::with_capacity(announced.unwrap_or(0).min(limit));
        while let Some(chunk) = payload.next().await {
            let chunk = chunk.map_err(|e| ApiError::new(Code::BadBody, e.to_string()))?;
            if body.len() + chunk.len() > limit {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
            let need = body.len().div_ceil(UNIT);
            let have = held.as_ref().map_or(0, |p| p.num_permits());
            if need > have {
                let more = budget
                    .permits
                    .clone()
                    .try_acquire_many_owned((need - have) as u32)
                    .map_err(|_| busy(bounds.retry_after))?;
                match held.as_mut() {
                    Some(p) => p.merge(more),
                    None => held = Some(more),
                }
            }
        }
        Ok(body)
    };
    let bytes = match tokio::time::timeout(bounds.deadline, read).await {
        Ok(body) => body?,
        Err(_) => {
            counter!(catalog::INGEST_BODY_REFUSALS_TOTAL, "reason" => "timeout").increment(1);
            return Err(ApiError::new(
                Code::RequestTimeout,
                format!("the body did not arrive within {} ms", bounds.deadline.as_millis()),
            )
            .closing());
        }
    };
    budget.in_use.set(budget.in_use() as f64);
    Ok(Body { bytes, _held: held })
}

/// Why a batch body is not a list of 1 to `max` valid messages.
#[derive(Debug)]
pub(crate) enum BatchError {
    /// Not JSON (or cut short).
    Syntax(serde_json::Error),
    NotArray,
    /// Empty, or more than the most allowed (`Count(None)`: more than `max`).
    Count(Option<usize>),
    /// Items that are not messages (index and why), and the ones that are (to check their
    /// fields too, so one answer names every bad item).
    Items {
        bad: Vec<(usize, String)>,
        parsed: Vec<(usize, NewMessage)>,
    },
}

const TOO_MANY: &str = "pipeline: too many items";

/// A JSON array of at most `max` items of `T`, deserialized one item at a time.
struct Bounded<T> {
    max: usize,
    _t: PhantomData<T>,
}

impl<'de, T: serde::Deserialize<'de>> DeserializeSeed<'de> for Bounded<T> {
    type Value = Vec<T>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Vec<T>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, T: serde::Deserialize<'de>> Visitor<'de> for Bounded<T> {
    type Value = Vec<T>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "an array of at most {} messages", self.max)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(self.max));
        while out.len() < self.max {
            match seq.next_element()? {
                Some(item) => out.push(item),
                None => return Ok(out),
            }
        }
        match seq.next_element::<IgnoredAny>()? {
            None => Ok(out),
            Some(_) => Err(serde::de::Error::custom(TOO_MANY)),
        }
    }
}

fn parse<'de, T: serde::Deserialize<'de>>(bytes: &'de [u8], max: usize) -> Result<Vec<T>, serde_json::Error> {
    let mut d = serde_json::Deserializer::from_slice(bytes);
    let items = Bounded { max, _t: PhantomData }.deserialize(&mut d)?;
    d.end()?;
    Ok(items)
}

/// Parses a batch body: one pass straight into messages when it is a list of 1 to `max` of them;
/// otherwise says why, item by item, from borrowed raw items (no JSON tree is built).
pub(crate) fn parse_batch(bytes: &[u8], max: usize) -> Result<Vec<NewMessage>, BatchError> {
    match parse::<NewMessage>(bytes, max) {
        Ok(items) if !items.is_empty() => return Ok(items),
        Ok(_) => return Err(BatchError::Count(Some(0))),
        Err(_) => {}
    }
    let raw: Vec<&RawValue> = match parse(bytes, max) {
        Ok(raw) => raw,
        Err(e) if e.to_string().starts_with(TOO_MANY) => return Err(BatchError::Count(None)),
        Err(e) if e.is_data() => return Err(BatchError::NotArray),
        Err(e) => return Err(BatchError::Syntax(e)),
    };
    if raw.is_empty() {
        return Err(BatchError::Count(Some(0)));
    }
    let (mut bad, mut parsed) = (Vec::new(), Vec::new());
    for (i, r) in raw.iter().enumerate() {
        match serde_json::from_str::<NewMessage>(r.get()) {
            Ok(m) => parsed.push((i, m)),
            Err(e) => bad.push((i, e.to_string())),
        }
    }
    // Each item parses alone, yet the whole did not: the array itself is malformed past them.
    Err(if bad.is_empty() { BatchError::NotArray } else { BatchError::Items { bad, parsed } })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(i: usize) -> String {
        format!(r#"{{"id":"m{i}","sender":"a","recipient":"b","body":"c"}}"#)
    }

    #[test]
    fn a_batch_is_parsed_within_its_count() {
        let ok = format!("[{},{}]", item(1), item(2));
        assert_eq!(parse_batch(ok.as_bytes(), 2).map(|v| v.len()).ok(), Some(2));
        assert!(
            matches!(parse_batch(ok.as_bytes(), 1), Err(BatchError::Count(None))),
            "the second item is one too many"
        );
        assert!(matches!(parse_batch(b"[]", 5), Err(BatchError::Count(Some(0)))));
        assert!(matches!(parse_batch(b"{}", 5), Err(BatchError::NotArray)));
        assert!(matches!(parse_batch(b"[1,", 5), Err(BatchError::Syntax(_))));
        let bad = format!(r#"[{},{{"id":"x"}},7]"#, item(1));
        match parse_batch(bad.as_bytes(), 5) {
            Err(BatchError::Items { bad, parsed }) => {
                assert_eq!(bad.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [1, 2]);
                assert_eq!(parsed.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [0]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_hostile_batch_stops_at_the_count_without_a_tree() {
        // 8 MB of zeros: refused at the 1,001st item, after 1,000 borrowed raw items at most.
        let mut zeros = String::with_capacity(8 << 20);
        zeros.push('[');
        while zeros.len() < (8 << 20) - 2 {
            zeros.push_str("0,");
        }
        zeros.push_str("0]");
        assert!(matches!(parse_batch(zeros.as_bytes(), 1000), Err(BatchError::Count(None))));
    }
}
