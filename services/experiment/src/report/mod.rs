//! The report of an evidence folder, in layers: the model (`view.rs`: each round with its
//! statistics and gates; `crossover.rs`: a sweep's policies × conditions), how its numbers read
//! (`format.rs`), and what is written from it (`markdown/`, `charts/`, `verdicts.rs`), put
//! together by `write.rs`. Rendering reads the model and never the reverse, and no two
//! renderings read each other, so a table or a chart can change without touching the others.

pub(crate) mod charts;
pub(crate) mod crossover;
pub(crate) mod format;
pub(crate) mod markdown;
pub(crate) mod verdicts;
pub(crate) mod view;
mod write;

pub(crate) use write::write_report;

#[cfg(test)]
mod crossover_tests;
