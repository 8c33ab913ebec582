//! What a scenario records as it runs (`scenario.json`): its events, checks and notes, beside
//! the reconcile and monitor files the verdict also reads.

use serde::{Deserialize, Serialize};

/// Which progress ends the recovery after a fault: the writers' committed offsets, or new
/// records from the ingest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum Progress {
    Consume,
    Produce,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum EventKind {
    FaultStart,
    /// The fault is over; `progress` says what recovery means.
    FaultEnd,
    FreezeStart,
    FreezeEnd,
    /// The group must lag at this moment (a rebalance without a backlog proves nothing).
    NeedBacklog,
    /// Note the lag at this moment.
    Lag,
    /// A link of one host cut (`cut` says which host and what); [`EventKind::CutEnd`] heals it.
    CutStart,
    CutEnd,
}

/// What a cut took from one host (a network namespace of the partition scenarios).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct CutInfo {
    /// The process on the host: `w1`, `ingest-a`, ...
    pub host: String,
    /// The writer's metrics port, when the host runs a writer (the key of its monitor samples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_port: Option<u16>,
    /// `all` (every packet), `kafka`, or a store's name: the one server the host lost.
    pub what: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Event {
    /// Seconds since the epoch, as the monitor's samples.
    pub t: f64,
    pub kind: EventKind,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<CutInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Check {
    pub ok: bool,
    pub check: String,
    #[serde(default)]
    pub detail: String,
}

/// What a scenario did (`scenario.json`), beside its reconcile and monitor files.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Record {
    pub scenario: String,
    pub faults: String,
    pub events: Vec<Event>,
    pub checks: Vec<Check>,
    pub notes: Vec<String>,
    /// Reconcile ran (its exit code; `None` when the scenario was aborted before it could).
    pub reconciled: Option<Option<i32>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Recovery {
    pub fault: String,
    pub progress: Progress,
    pub recover_s: Option<f64>,
    /// The next fault came before the recovery.
    pub next_fault_first: bool,
}
