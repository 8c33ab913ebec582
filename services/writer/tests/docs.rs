//! The writer's flags in docs/reference/configuration.md, generated from its clap definition.
//! `UPDATE_DOCS=1 cargo test -p writer --test docs` rewrites them.

use clap::CommandFactory;

#[test]
fn the_configuration_page_has_every_writer_flag() {
    let md = pipeline_common::reference::flags_markdown(&writer::config::WriterConfig::command());
    pipeline_testkit::docs::generated_block("docs/reference/configuration.md", "writer", &md);
}
