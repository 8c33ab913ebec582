//! `/readyz` from a state kept current in the background: a probe never makes a broker call of
//! its own (a flood of probes cannot become a flood of metadata requests, nor a blocked worker),
//! and its answer never carries librdkafka's error text to whoever asks (it is logged instead).

use crate::kafka::Publisher;
use actix_web::HttpResponse;
use arc_swap::ArcSwap;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the broker is asked.
const EVERY: Duration = Duration::from_secs(2);
/// An answer older than this counts as no answer (the asking itself hangs).
const STALE: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, Copy)]
struct State {
    /// The topic's partition count at the last answer, `None` when the broker did not say.
    partitions: Option<usize>,
    at: Instant,
}

pub(crate) struct Readiness(ArcSwap<State>);

impl Readiness {
    pub(crate) fn new() -> Arc<Readiness> {
        Arc::new(Readiness(ArcSwap::from_pointee(State { partitions: None, at: Instant::now() })))
    }

    /// Asks the broker for the topic every [`EVERY`], through the producer's own connection;
    /// the partition count it learns is also the one the producer's rotation uses
    /// (`crate::partitions`), so nothing asks the broker twice.
    pub(crate) async fn keep(self: Arc<Readiness>, publisher: Publisher) {
        let mut was_ready = None;
        loop {
            let p = publisher.clone();
            let found = tokio::task::spawn_blocking(move || p.partition_count()).await;
            let partitions = match found {
                Ok(Ok(Some(n))) => {
                    if n > 0 {
                        publisher.rotation().set_count(n);
                    }
                    Some(n)
                }
                Ok(Ok(None)) => {
                    log_change(&mut was_ready, false, "the topic does not exist");
                    None
                }
                Ok(Err(e)) => {
                    log_change(&mut was_ready, false, &e.to_string());
                    None
                }
                Err(e) => {
                    log_change(&mut was_ready, false, &e.to_string());
                    None
                }
            };
            if partitions.is_some() {
                log_change(&mut was_ready, true, "");
            }
            self.0.store(Arc::new(State { partitions, at: Instant::now() }));
            tokio::time::sleep(EVERY).await;
        }
    }

    pub(crate) fn answer(&self) -> HttpResponse {
        let s = **self.0.load();
        match s.partitions {
            Some(n) if s.at.elapsed() < STALE => HttpResponse::Ok().json(json!({ "status": "ready", "partitions": n })),
            _ => HttpResponse::ServiceUnavailable().json(json!({ "status": "not_ready" })),
        }
    }
}

fn log_change(was: &mut Option<bool>, ready: bool, why: &str) {
    if *was != Some(ready) {
        if ready {
            tracing::info!("ready: the broker answers and the topic exists");
        } else {
            tracing::warn!(reason = why, "not ready");
        }
        *was = Some(ready);
    }
}
