//! How big each chaos scenario is: a full run and a short (CI) one.

/// How big each scenario is: `--short` is the CI version (one kill, one join/leave, 5 s freezes,
/// small loads, ~5 min in all), the full one ~15-20 min on 2 cores.
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
            }
        };
        Sizes { kills: kills.unwrap_or(s.kills), ..s }
    }
}
