//! The ingest's reference pages, generated from its code and kept equal to it: the OpenAPI
//! document (docs/reference/openapi.json), the API page rendered from it
//! (docs/reference/api.md), the README's table of answers, and the ingest's flags
//! (docs/reference/configuration.md). `UPDATE_DOCS=1 cargo test -p ingest --test docs` rewrites them.

use clap::CommandFactory;
use ingest::answer::{answers_table, Code, Route};
use ingest::config::IngestConfig;
use pipeline_testkit::docs::{generated_block, generated_file};
use serde_json::Value;

#[test]
fn the_openapi_document_is_the_code() {
    generated_file("docs/reference/openapi.json", &ingest::openapi::json());
}

#[test]
fn the_readme_answers_table_is_the_code() {
    generated_block("README.md", "answers", &answers_table());
}

#[test]
fn the_configuration_page_has_every_ingest_flag() {
    let md = pipeline_common::reference::flags_markdown(&IngestConfig::command());
    generated_block("docs/reference/configuration.md", "ingest", &md);
}

/// The fields of the message schema, from the document itself.
fn fields(doc: &Value) -> String {
    let schema = &doc["components"]["schemas"]["NewMessage"];
    let required: Vec<&str> =
        schema["required"].as_array().map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let mut s = String::from("| field | required | type and limits | meaning |\n|---|---|---|---|\n");
    for (name, p) in schema["properties"].as_object().into_iter().flatten() {
        let mut kind = vec![p["type"].as_str().unwrap_or("string").to_string()];
        for (k, label) in
            [("minLength", "min length"), ("maxLength", "max length"), ("pattern", "pattern"), ("format", "format")]
        {
            if let Some(v) = p.get(k) {
                kind.push(format!("{label} `{}`", v.as_str().map_or(v.to_string(), str::to_string)));
            }
        }
        let desc = p["description"].as_str().unwrap_or("").replace('\n', " ").replace('|', "\\|");
        let req = if required.contains(&name.as_str()) { "yes" } else { "no" };
        s.push_str(&format!("| `{name}` | {req} | {} | {desc} |\n", kind.join(", ")));
    }
    s
}

fn route_answers(route: Route) -> String {
    let mut s = String::from("| status | `error` |\n|---|---|\n| 202 | — |\n");
    for c in Code::all().filter(|c| c.routes().contains(&route)) {
        s.push_str(&format!("| {} | `{}` |\n", c.status().as_u16(), c.as_str()));
    }
    s
}

#[test]
fn the_api_page_is_the_document_rendered() {
    let doc: Value = serde_json::from_str(&ingest::openapi::json()).expect("the document is JSON");
    let info = &doc["info"];
    let page = format!(
        "# The ingest's HTTP API\n\n\
         <!-- Generated from the code by services/ingest/tests/docs.rs; do not edit. \
         UPDATE_DOCS=1 cargo test -p ingest --test docs rewrites it. -->\n\n\
         {description}\n\n\
         The machine-readable contract is [openapi.json](openapi.json) (OpenAPI {openapi}), also served by a \
         running ingest at `GET /openapi.json` on its admin listener (`--admin-listen`, or the API's port \
         without one). Every request to `/v1` needs `Authorization: Bearer <token>` (a key of the keys file, \
         [configuration](configuration.md#ingest)).\n\n\
         ## `POST /v1/messages`\n\n{single}.\n\nThe body is one message:\n\n{fields}\n\
         The 202's body is `{{\"id\": ..., \"version\": ...}}`.\n\n{single_answers}\n\
         ## `POST /v1/messages/batch`\n\n{batch}. The body is a JSON array of messages as above; the 202's body \
         is `{{\"ids\": [...], \"versions\": [...]}}`, in the order posted. Items are stamped in order, so a \
         later item with the id of an earlier one is its newer version.\n\n{batch_answers}\n\
         ## Every answer\n\n\
         Every refusal is `{{\"error\": code, \"detail\": ...}}` with `Content-Type: application/json`; 429, \
         503 and 504 carry `Retry-After`, and a 504 carries the request's `ids`. Nothing refused is ever \
         written, except that a 504's messages may be (at most once).\n\n{table}",
        description = info["description"].as_str().unwrap_or(""),
        openapi = doc["openapi"].as_str().unwrap_or("3.1"),
        single = doc["paths"]["/v1/messages"]["post"]["summary"].as_str().unwrap_or(""),
        batch = doc["paths"]["/v1/messages/batch"]["post"]["summary"].as_str().unwrap_or(""),
        fields = fields(&doc),
        single_answers = route_answers(Route::Message),
        batch_answers = route_answers(Route::Batch),
        table = answers_table(),
    );
    generated_file("docs/reference/api.md", &page);
}

#[test]
fn every_declared_answer_is_a_status_of_its_operation() {
    let doc: Value = serde_json::from_str(&ingest::openapi::json()).expect("the document is JSON");
    for (path, route) in [("/v1/messages", Route::Message), ("/v1/messages/batch", Route::Batch)] {
        let responses = &doc["paths"][path]["post"]["responses"];
        for c in Code::all().filter(|c| c.routes().contains(&route)) {
            let codes =
                &responses[c.status().as_str()]["content"]["application/json"]["schema"]["properties"]["error"]["enum"];
            assert!(
                codes.as_array().is_some_and(|a| a.iter().any(|v| v == c.as_str())),
                "{path}: {c} not declared under {}",
                c.status()
            );
        }
    }
}
