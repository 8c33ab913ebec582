//! docs/reference/metrics.md equal to the catalog (services/common/src/catalog.rs).
//! `UPDATE_DOCS=1 cargo test -p compose-check --test compose metrics_page` rewrites it.

use pipeline_common::catalog;

fn metric_table() -> String {
    let mut s = String::from("| metric | type | meaning |\n|---|---|---|\n");
    for (kind, name, help) in catalog::ALL {
        s.push_str(&format!("| `{name}` | {kind} | {} |\n", help.replace('|', "\\|")));
    }
    s
}

#[test]
fn the_metrics_page_is_the_catalog() {
    let page = format!(
        "# Metrics: every series the ingest and the writer export\n\n\
         <!-- Generated from services/common/src/catalog.rs by compose/check/tests/compose/readme.rs; do not \
         edit. UPDATE_DOCS=1 cargo test -p compose-check --test compose metrics_page rewrites it. -->\n\n\
         Both services export Prometheus text on `/metrics` (the ingest on its admin listener, or its API port \
         without one; the writer on `--metrics-addr`), every series with a `# HELP` line. Every metric is \
         declared once, with its help, in the catalog; a test refuses metric names spelled anywhere else. \
         How to scrape and chart them: [the observability guide](../guides/observability.md).\n\n{}",
        metric_table()
    );
    pipeline_testkit::docs::generated_file("docs/reference/metrics.md", &page);
}
