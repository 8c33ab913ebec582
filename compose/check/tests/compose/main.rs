//! compose/ without a Docker engine: the compose file against the compose-spec JSON schema
//! (vendored in compose/schema/), every variable the programs read set in their services, every
//! image pinned, a healthcheck on every service the programs wait for, host ports equal to
//! .env.example's, the k6 service's output in a folder every clone has; the Prometheus rules and
//! the Grafana dashboard querying only metrics of the catalog (services/common/src/catalog.rs),
//! and those metrics present in a real scrape of a running writer and ingest (this one needs the
//! servers of `scripts/stack up`, and fails naming the missing one); the metrics reference page
//! equal to the catalog.
//!
//! The programs' variables come from their own `--help` (clap prints `[env: NAME=]` and
//! `[default: ...]` for each flag): the binaries `cargo test --workspace` builds.

mod dashboard;
mod env;
mod health;
mod images;
mod k8s;
mod ports;
mod promql;
mod readme;
mod schema;
mod scrape;
mod stores;

// Helpers shared with the Docker test (tests/shared/mod.rs).
#[path = "../shared/mod.rs"]
mod shared;
pub(crate) use shared::*;
