//! The HTTP answers that are not a 202: every error is JSON `{"error": code, "detail": ...}`,
//! with `Retry-After` on a 503 or 504 and the request's `ids` on a 504 (docs/trust.md, "What an
//! answer means").

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};
use metrics::counter;
use pipeline_common::catalog;
use pipeline_common::Message;
use serde_json::{json, Value};
use std::fmt;

#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    code: &'static str,
    detail: Value,
    retry_after: Option<u64>,
    /// The request's message ids, for an `uncertain` answer.
    ids: Option<Vec<String>>,
    /// Close the connection after answering (a client that did not send its body in time).
    close: bool,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, detail: impl Into<Value>) -> Self {
        ApiError { status, code, detail: detail.into(), retry_after: None, ids: None, close: false }
    }
    /// The same answer, and the connection closed after it.
    pub(crate) fn closing(self) -> Self {
        ApiError { close: true, ..self }
    }
    /// 503: nothing was written.
    pub(crate) fn unavailable(code: &'static str, detail: &str, retry_after: u64) -> Self {
        ApiError { retry_after: Some(retry_after), ..Self::new(StatusCode::SERVICE_UNAVAILABLE, code, detail) }
    }
    /// 429: this key is past its rate; nothing was written.
    pub(crate) fn limited(detail: &str, retry_after: u64) -> Self {
        ApiError { retry_after: Some(retry_after), ..Self::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", detail) }
    }
    /// 504: the messages may or may not be stored.
    pub(crate) fn uncertain(detail: &str, retry_after: u64, msgs: &[Message]) -> Self {
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
        if self.close {
            resp.force_close();
        }
        if let Some(s) = self.retry_after {
            resp.insert_header((header::RETRY_AFTER, s.to_string()));
        }
        match &self.ids {
            Some(ids) => resp.json(json!({ "error": self.code, "detail": self.detail, "ids": ids })),
            None => resp.json(json!({ "error": self.code, "detail": self.detail })),
        }
    }
}
