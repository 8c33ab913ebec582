//! The HTTP answers that are not a 202: every error is JSON `{"error": code, "detail": ...}`,
//! with `Retry-After` on a 429, 503 or 504 and the request's `ids` on a 504
//! (docs/explanation/trust.md, "What an answer means").
//!
//! [`Code`] is the one list of refusals: the handlers refuse through it, and the OpenAPI document
//! ([`crate::openapi`]), docs/reference/api.md and the README's table of answers are generated
//! from it, so a new refusal cannot be answered without being declared.

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};
use metrics::counter;
use pipeline_common::catalog;
use pipeline_common::Message;
use serde::Serialize;
use serde_json::Value;
use std::fmt;

/// Every refusal the ingest answers, each with one status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema, strum::EnumIter)]
#[serde(rename_all = "snake_case")]
pub enum Code {
    MalformedJson,
    BadBody,
    Unauthorized,
    NotFound,
    MethodNotAllowed,
    RequestTimeout,
    PayloadTooLarge,
    UnsupportedMediaType,
    InvalidMessage,
    InvalidBatch,
    RateLimited,
    RingFull,
    KafkaUnavailable,
    KeyBusy,
    Busy,
    Uncertain,
}

/// Which API route an answer is declared for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Message,
    Batch,
}

impl Code {
    /// Every code, in the order of their statuses (the order they are declared in).
    pub fn all() -> impl Iterator<Item = Code> {
        <Code as strum::IntoEnumIterator>::iter()
    }

    pub fn status(self) -> StatusCode {
        match self {
            Code::MalformedJson | Code::BadBody => StatusCode::BAD_REQUEST,
            Code::Unauthorized => StatusCode::UNAUTHORIZED,
            Code::NotFound => StatusCode::NOT_FOUND,
            Code::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Code::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Code::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Code::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Code::InvalidMessage | Code::InvalidBatch => StatusCode::UNPROCESSABLE_ENTITY,
            Code::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            Code::RingFull | Code::KafkaUnavailable | Code::KeyBusy | Code::Busy => StatusCode::SERVICE_UNAVAILABLE,
            Code::Uncertain => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    /// The code as it is written in the answer's `error` field.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::MalformedJson => "malformed_json",
            Code::BadBody => "bad_body",
            Code::Unauthorized => "unauthorized",
            Code::NotFound => "not_found",
            Code::MethodNotAllowed => "method_not_allowed",
            Code::RequestTimeout => "request_timeout",
            Code::PayloadTooLarge => "payload_too_large",
            Code::UnsupportedMediaType => "unsupported_media_type",
            Code::InvalidMessage => "invalid_message",
            Code::InvalidBatch => "invalid_batch",
            Code::RateLimited => "rate_limited",
            Code::RingFull => "ring_full",
            Code::KafkaUnavailable => "kafka_unavailable",
            Code::KeyBusy => "key_busy",
            Code::Busy => "busy",
            Code::Uncertain => "uncertain",
        }
    }

    /// What the answer means for the request's messages.
    pub fn meaning(self) -> &'static str {
        match self {
            Code::MalformedJson => "the body is not JSON (`detail` has the line and column); nothing was written",
            Code::BadBody => "the body could not be read off the connection; nothing was written",
            Code::Unauthorized => "no valid API key (`Authorization: Bearer <token>`); nothing was written",
            Code::NotFound => "no such route",
            Code::MethodNotAllowed => "the route takes only POST (`Allow: POST`); nothing was written",
            Code::RequestTimeout => {
                "the body did not arrive within `--read-timeout-ms`; the connection is closed; nothing was written"
            }
            Code::PayloadTooLarge => {
                "the body is over the request limit, or more than this key may send in one second; nothing was written"
            }
            Code::UnsupportedMediaType => "`Content-Type` is not `application/json`; nothing was written",
            Code::InvalidMessage => "a field is invalid (`detail` lists every one); nothing was written",
            Code::InvalidBatch => {
                "not an array of 1 to `--max-batch` valid messages (`detail` lists every bad item by index); nothing was written"
            }
            Code::RateLimited => "this key is past its rate; nothing was written",
            Code::RingFull => "the ingest's ring is full; nothing was written and nothing will be",
            Code::KafkaUnavailable => "Kafka refused or cannot be reached; nothing was written and nothing will be",
            Code::KeyBusy => "this key's share of the ingest is in use; nothing was written",
            Code::Busy => "too many request bodies are being read at once; nothing was written",
            Code::Uncertain => {
                "Kafka did not confirm in time: each message of `ids` may be stored, at most once, with the content sent"
            }
        }
    }

    /// What a client does about it.
    pub fn client_action(self) -> &'static str {
        match self {
            Code::Uncertain => "retry with the same ids (safe: every store writes by id)",
            Code::RateLimited | Code::RingFull | Code::KafkaUnavailable | Code::KeyBusy | Code::Busy => {
                "retry after `Retry-After` seconds"
            }
            Code::RequestTimeout => "send the body faster, on a new connection",
            Code::Unauthorized => "send a valid key",
            Code::NotFound | Code::MethodNotAllowed => "use `POST /v1/messages` or `POST /v1/messages/batch`",
            _ => "fix the request; retrying it as it is gets the same answer",
        }
    }

    /// Whether the answer carries `Retry-After`.
    pub fn retries_after(self) -> bool {
        matches!(self.status().as_u16(), 429 | 503 | 504)
    }

    /// The API routes that can give this answer (404 is for every other path).
    pub fn routes(self) -> &'static [Route] {
        match self {
            Code::NotFound | Code::MethodNotAllowed => &[],
            Code::InvalidBatch => &[Route::Batch],
            _ => &[Route::Message, Route::Batch],
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The body of every refusal, as the OpenAPI document declares it.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorBody<'a> {
    pub error: Code,
    /// What was wrong, and where: a sentence, or for 400 `malformed_json` an object with the
    /// message, line and column, or for 422 a list of `{index, field, reason}`.
    #[schema(value_type = Object)]
    pub detail: &'a Value,
    /// On 504 `uncertain` only: the ids of the request's messages, in order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ids: Option<&'a [String]>,
}

#[derive(Debug)]
pub(crate) struct ApiError {
    code: Code,
    detail: Value,
    retry_after: Option<u64>,
    /// The request's message ids, for an `uncertain` answer.
    ids: Option<Vec<String>>,
    /// Close the connection after answering (a client that did not send its body in time).
    close: bool,
}

impl ApiError {
    pub(crate) fn new(code: Code, detail: impl Into<Value>) -> Self {
        ApiError { code, detail: detail.into(), retry_after: None, ids: None, close: false }
    }
    /// The same answer, and the connection closed after it.
    pub(crate) fn closing(self) -> Self {
        ApiError { close: true, ..self }
    }
    /// 429 or 503: nothing was written; ask again after `retry_after` seconds.
    pub(crate) fn retry(code: Code, detail: &str, retry_after: u64) -> Self {
        debug_assert!(code.retries_after());
        ApiError { retry_after: Some(retry_after), ..Self::new(code, detail) }
    }
    /// 504: the messages may or may not be stored.
    pub(crate) fn uncertain(detail: &str, retry_after: u64, msgs: &[Message]) -> Self {
        counter!(catalog::INGEST_UNCERTAIN_MESSAGES_TOTAL).increment(msgs.len() as u64);
        ApiError {
            retry_after: Some(retry_after),
            ids: Some(msgs.iter().map(|m| m.id.clone()).collect()),
            ..Self::new(Code::Uncertain, detail)
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
        self.code.status()
    }
    fn error_response(&self) -> HttpResponse {
        let mut resp = HttpResponse::build(self.code.status());
        if self.close {
            resp.force_close();
        }
        if let Some(s) = self.retry_after {
            resp.insert_header((header::RETRY_AFTER, s.to_string()));
        }
        match self.code {
            Code::Unauthorized => {
                resp.insert_header((header::WWW_AUTHENTICATE, "Bearer realm=\"pipeline\""));
            }
            Code::MethodNotAllowed => {
                resp.insert_header((header::ALLOW, "POST"));
            }
            _ => {}
        }
        resp.json(ErrorBody { error: self.code, detail: &self.detail, ids: self.ids.as_deref() })
    }
}

/// The table of answers, generated from [`Code`]: the README's and docs/reference/api.md's.
pub fn answers_table() -> String {
    let mut s = String::from(
        "| status | `error` | means | a client |\n|---|---|---|---|\n\
         | 202 | — | Kafka has every message of the request (acks=all); each will be in all four stores exactly once, \
         with the same content in each (the last version of its id accepted, named in `version` / `versions`) | done |\n",
    );
    for c in Code::all() {
        s.push_str(&format!(
            "| {} | `{}` | {} | {} |\n",
            c.status().as_u16(),
            c.as_str(),
            c.meaning().replace('|', "\\|"),
            c.client_action()
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_listed_once_and_spelled_as_serde_writes_it() {
        let mut seen = std::collections::HashSet::new();
        for c in Code::all() {
            assert!(seen.insert(c.as_str()), "{c} twice");
            assert_eq!(serde_json::to_value(c).ok(), Some(Value::String(c.as_str().into())), "{c:?}");
        }
    }

    #[test]
    fn statuses_are_in_order() {
        let statuses: Vec<u16> = Code::all().map(|c| c.status().as_u16()).collect();
        let mut sorted = statuses.clone();
        sorted.sort_unstable();
        assert_eq!(statuses, sorted);
    }
}
