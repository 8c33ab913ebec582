//! The API routes' key check, as middleware: it reads the shared [`Edge`] for the keys in force.
//! Apart from `auth.rs` because the edge holds the keys (`Auth`): what decides who may write
//! knows nothing of the state the routes share, and only this wrapper reads both.

use crate::answer::{ApiError, Code};
use crate::auth::KeyName;
use crate::edge::Edge;
use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage, ResponseError};
use std::sync::Arc;

/// Middleware on the API routes: a request without a valid key gets 401 and goes no further.
pub(crate) async fn require_key(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let edge = req.app_data::<web::Data<Edge>>().cloned();
    let key = match edge.as_deref().map(|e| &*e.auth) {
        Some(auth) if auth.required() => auth.key_of(&req),
        Some(auth) => Some(KeyName(Arc::from("none"), auth.defaults)),
        None => None,
    };
    match key {
        Some(key) => {
            req.extensions_mut().insert(key);
            Ok(next.call(req).await?.map_into_boxed_body())
        }
        None => {
            let resp = ApiError::new(Code::Unauthorized, "a valid API key is required (Authorization: Bearer ...)")
                .error_response();
            Ok(req.into_response(resp))
        }
    }
}
