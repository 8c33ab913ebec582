//! Isolating the records a store refuses for good: a batch whose write fails permanently is
//! split in halves until the records that cause the failure are alone, so one bad record never
//! costs its neighbours. The writer's retry driver, `reconcile repair` and `reconcile dlq
//! replay` all write through this one rule; each brings its own attempt (how it retries
//! transient errors, what it counts).

use crate::Rejected;
use pipeline_common::Message;
use std::future::Future;

/// How one attempt at a part failed.
pub enum PartError<E> {
    /// The store refuses the part's data for good (its message): split, or refuse a lone record.
    Refused(String),
    /// Nothing more can be done with the batch (a panic, a store still down): stop.
    Fatal(E),
}

/// Writes `batch` part by part through `attempt`, which returns the store's own per-record
/// rejections; returns every record refused for good. `on_split` is told of each split. Parts
/// are taken depth first, so records are still written roughly in order.
pub async fn write_isolating<'a, E, Fut>(
    batch: &'a [Message],
    mut attempt: impl FnMut(&'a [Message]) -> Fut,
    mut on_split: impl FnMut(),
) -> Result<Vec<Rejected>, E>
where
    Fut: Future<Output = Result<Vec<Rejected>, PartError<E>>>,
{
    let mut refused = Vec::new();
    let mut todo: Vec<&'a [Message]> = vec![batch];
    while let Some(part) = todo.pop() {
        match attempt(part).await {
            Ok(rejected) => refused.extend(rejected),
            Err(PartError::Fatal(e)) => return Err(e),
            Err(PartError::Refused(reason)) => match part {
                [] => {}
                [one] => refused.push(Rejected { id: one.id.clone(), reason }),
                _ => {
                    on_split();
                    let (a, b) = part.split_at(part.len() / 2);
                    todo.push(b);
                    todo.push(a);
                }
            },
        }
    }
    Ok(refused)
}
