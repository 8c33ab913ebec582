//! How big each chaos scenario is: a full run and a short (CI) one.

/// How big each scenario is: `--short` is the CI version (one kill, one join/leave, 5 s freezes,
/// small loads, ~12 min in all, 5 of them the partition scenarios), the full one ~26 min on 2
/// cores (13 of them the partition scenarios; measured 2026-12-07).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sizes {
    pub kills: u32,
    pub joins: u32,
    pub ingest_kills: u32,
    /// Seconds a server stays frozen.
    pub freeze_s: u64,
    /// Open-loop requests per second of the live load.
    pub rate: u32,
    pub backlog_s: u64,
    pub backlog_vus: u32,
    /// Seconds of load between two faults.
    pub run_between_s: u64,
    /// Seconds of load before the first fault and after the last.
    pub pre_s: u64,
    pub post_s: u64,
    /// Longest wait for recovery between a rebalance's joins and leaves.
    pub rebalance_wait_s: u64,
    /// Seconds of live load during the rebalance.
    pub rebalance_live_s: u64,
    /// Partition scenarios: seconds a writer's host is cut from everything, or from the broker
    /// (longer than the group's 10 s session, and than the stall watch needs to move its
    /// partitions: the session, `stall_watch_s` or the writer's 30 s, up to half that again of
    /// jitter, its 5 s sampling and a rebalance).
    pub cut_s: u64,
    /// How many writer cuts partition-writer and zombie-writer make (each of another writer
    /// when it owns partitions).
    pub writer_cuts: u32,
    /// The writers' `--rejoin-stalled-secs` in partition-writer and zombie-writer; `None`: the
    /// writer's default (30 s). The short version shortens it so that its cut can be short, but
    /// not below the group's 10 s session plus the zombie's second of held MySQL before its cut:
    /// a rejoin before the broker has dropped the cut member starts a rebalance that waits for
    /// it (and tansu can then form the group with nothing assigned).
    pub stall_watch_s: Option<u64>,
    /// Seconds an ingest's host is cut from the broker (longer than its 5 s deadline).
    pub ingest_cut_s: u64,
    /// Seconds a writer's host is cut from one store (shorter than the stall watch, so the
    /// writer keeps its partitions and must wait for the store).
    pub store_cut_s: u64,
    /// partition-store cuts every store in turn (else Elasticsearch only).
    pub store_cuts_all: bool,
    /// zombie-writer: seconds of a batch burst just before the cut, so that the writer holds
    /// fetched records when it loses the broker.
    pub burst_s: u64,
}

impl Sizes {
    pub(crate) fn new(short: bool, kills: Option<u32>) -> Sizes {
        let s = if short {
            Sizes {
                kills: 1,
                joins: 1,
                ingest_kills: 1,
                freeze_s: 5,
                rate: 60,
                backlog_s: 4,
                backlog_vus: 2,
                run_between_s: 4,
                pre_s: 4,
                post_s: 6,
                rebalance_wait_s: 10,
                rebalance_live_s: 45,
                cut_s: 40,
                writer_cuts: 1,
                stall_watch_s: Some(15),
                ingest_cut_s: 12,
                store_cut_s: 12,
                store_cuts_all: false,
                burst_s: 3,
            }
        } else {
            Sizes {
                kills: 10,
                joins: 3,
                ingest_kills: 3,
                freeze_s: 10,
                rate: 150,
                backlog_s: 20,
                backlog_vus: 4,
                run_between_s: 6,
                pre_s: 6,
                post_s: 12,
                rebalance_wait_s: 15,
                rebalance_live_s: 150,
                cut_s: 75,
                writer_cuts: 2,
                stall_watch_s: None,
                ingest_cut_s: 20,
                store_cut_s: 20,
                store_cuts_all: true,
                burst_s: 6,
            }
        };
        Sizes { kills: kills.unwrap_or(s.kills), ..s }
    }
}
