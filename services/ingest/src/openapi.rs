//! The ingest's OpenAPI 3.1 document, built from its types: the request from
//! [`pipeline_common::NewMessage`], the 202 bodies from the handlers' answer types, and every
//! refusal from [`Code`], the one list the handlers refuse through. Served on the admin listener
//! (`GET /openapi.json`) and committed as docs/reference/openapi.json, which a test keeps equal
//! to this and schemathesis runs against the real ingest (`tests/openapi.rs`).

use crate::answer::{Code, Route};
use pipeline_common::NewMessage;
use std::collections::BTreeMap;
use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{HttpMethod, OperationBuilder, PathItem};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::response::{ResponseBuilder, ResponsesBuilder};
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Schema, SchemaType, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ComponentsBuilder, InfoBuilder, OpenApi, OpenApiBuilder, PathsBuilder, Ref, RefOr, Required};
use utoipa::ToSchema;

/// A single message's 202.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct Accepted<'a> {
    /// The message's id (the client's, or the UUIDv7 the ingest gave it).
    pub id: &'a str,
    /// The version it was accepted as: of two messages with one id, every store keeps the
    /// higher version.
    pub version: u64,
}

/// A batch's 202: the ids and, in the same order, the versions they were accepted as.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct AcceptedBatch<'a> {
    pub ids: Vec<&'a str>,
    pub versions: Vec<u64>,
}

const SECURITY: &str = "api_key";

fn string() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(SchemaType::new(Type::String))
}

/// The body of the refusals `codes` (all of one status): `error` is one of them.
fn error_schema(codes: &[Code]) -> Schema {
    let uncertain = codes.contains(&Code::Uncertain);
    let mut o = ObjectBuilder::new()
        .schema_type(SchemaType::new(Type::Object))
        .property("error", string().enum_values(Some(codes.iter().map(|c| c.as_str()))))
        .required("error")
        .property(
            "detail",
            ObjectBuilder::new().schema_type(SchemaType::AnyValue).description(Some(
                "What was wrong and where: a sentence; for malformed_json {message, line, column}; for \
                 invalid_message and invalid_batch a list of {index, field, reason}.",
            )),
        )
        .required("detail");
    if uncertain {
        o = o
            .property("ids", ArrayBuilder::new().items(string()).description(Some("The request's ids, in order.")))
            .required("ids");
    }
    o.into()
}

fn responses(route: Route) -> utoipa::openapi::Responses {
    let json = |schema: RefOr<Schema>| ContentBuilder::new().schema(Some(schema)).build();
    let accepted = match route {
        Route::Message => Accepted::name(),
        Route::Batch => AcceptedBatch::name(),
    };
    let mut out = ResponsesBuilder::new().response(
        "202",
        ResponseBuilder::new()
            .description(
                "Kafka has every message of the request (acks=all); each will be in all four stores exactly \
                 once, with the same content in each.",
            )
            .content("application/json", json(Ref::from_schema_name(accepted).into())),
    );
    // One response per status, its codes together.
    let mut by_status: BTreeMap<u16, Vec<Code>> = BTreeMap::new();
    for c in Code::all().filter(|c| c.routes().contains(&route)) {
        by_status.entry(c.status().as_u16()).or_default().push(c);
    }
    for (status, codes) in by_status {
        let description: Vec<String> = codes.iter().map(|c| format!("`{c}`: {}.", c.meaning())).collect();
        let mut r = ResponseBuilder::new()
            .description(description.join(" "))
            .content("application/json", json(error_schema(&codes).into()));
        if codes.iter().any(|c| c.retries_after()) {
            r = r.header(
                "Retry-After",
                HeaderBuilder::new()
                    .schema(ObjectBuilder::new().schema_type(SchemaType::new(Type::Integer)))
                    .description(Some("Seconds to wait before asking again."))
                    .build(),
            );
        }
        out = out.response(status.to_string(), r);
    }
    out.build()
}

fn operation(route: Route) -> PathItem {
    let (id, summary, body): (&str, &str, RefOr<Schema>) = match route {
        Route::Message => ("post_message", "Post one message", Ref::from_schema_name(NewMessage::name()).into()),
        Route::Batch => (
            "post_batch",
            "Post a batch of 1 to --max-batch messages (1,000 by default), all or none",
            ArrayBuilder::new().items(Ref::from_schema_name(NewMessage::name())).min_items(Some(1)).into(),
        ),
    };
    let op = OperationBuilder::new()
        .operation_id(Some(id))
        .summary(Some(summary))
        .request_body(Some(
            RequestBodyBuilder::new()
                .content("application/json", ContentBuilder::new().schema(Some(body)).build())
                .required(Some(Required::True))
                .build(),
        ))
        .responses(responses(route))
        .security(SecurityRequirement::new(SECURITY, Vec::<String>::new()));
    PathItem::new(HttpMethod::Post, op)
}

/// The whole document.
pub fn document() -> OpenApi {
    let mut components = ComponentsBuilder::new()
        .schema_from::<NewMessage>()
        .schema_from::<Accepted>()
        .schema_from::<AcceptedBatch>()
        .security_scheme(SECURITY, SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()));
    let mut schemas = Vec::new();
    <NewMessage as ToSchema>::schemas(&mut schemas);
    for (name, schema) in schemas {
        components = components.schema(name, schema);
    }
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("pipeline ingest")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "HTTP ingest of the write pipeline: a 202 means Kafka has the messages and every one will be in \
                     every store of the pipeline exactly once, with the same content in each. Every refusal is JSON \
                     {error, detail}; nothing refused is ever written.",
                ))
                .build(),
        )
        .paths(
            PathsBuilder::new()
                .path("/v1/messages", operation(Route::Message))
                .path("/v1/messages/batch", operation(Route::Batch)),
        )
        .components(Some(components.build()))
        .build()
}

/// The document as it is served and committed.
pub fn json() -> String {
    let mut s = document().to_pretty_json().unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}
