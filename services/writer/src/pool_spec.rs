//! A pool's shape, as the `--pool-*` flags write it: `core/max/queue/policy`, the parameters of
//! the reference experiment's Java `ThreadPoolExecutor`. Beside the configuration rather than in
//! `driver/`: the flags (`config.rs`) parse it and the driver's pools (`driver/pool.rs`) are built
//! from it, while the driver reads the configuration, so inside `driver/` it tied the two in a
//! circle.

use std::fmt;
use std::str::FromStr;

/// What happens to a submission when the queue is full and all `max` workers are busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// The submitting consumer runs the job itself (the reference experiment's `CallerRunsPolicy`).
    CallerRuns,
    /// The submitter waits until the queue has room.
    Block,
    /// The submission fails; the caller retries it later.
    Reject,
}

/// Pool shape, written `core/max/queue/policy`, e.g. the reference experiment's `12/24/1000/caller-runs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSpec {
    pub core: usize,
    pub max: usize,
    pub queue: usize,
    pub policy: Policy,
}

impl FromStr for PoolSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split('/').collect();
        let [core, max, queue, policy] = parts[..] else {
            return Err(format!("pool spec `{s}` is not core/max/queue/policy (e.g. 12/24/1000/caller-runs)"));
        };
        let num = |v: &str, what: &str| v.parse::<usize>().map_err(|_| format!("pool {what} `{v}` is not a number"));
        let policy = match policy {
            "caller-runs" => Policy::CallerRuns,
            "block" => Policy::Block,
            "reject" => Policy::Reject,
            other => return Err(format!("pool policy `{other}` is not caller-runs, block or reject")),
        };
        let spec = PoolSpec { core: num(core, "core")?, max: num(max, "max")?, queue: num(queue, "queue")?, policy };
        if spec.core == 0 || spec.max < spec.core {
            return Err(format!("pool `{s}`: need 1 <= core <= max"));
        }
        Ok(spec)
    }
}

impl fmt::Display for PoolSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = match self.policy {
            Policy::CallerRuns => "caller-runs",
            Policy::Block => "block",
            Policy::Reject => "reject",
        };
        write!(f, "{}/{}/{}/{p}", self.core, self.max, self.queue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(s: &str) -> PoolSpec {
        s.parse().unwrap()
    }

    #[test]
    fn parses_the_reference_shape() {
        assert_eq!(
            spec("12/24/1000/caller-runs"),
            PoolSpec { core: 12, max: 24, queue: 1000, policy: Policy::CallerRuns }
        );
        assert_eq!(spec("2/2/0/reject").to_string(), "2/2/0/reject");
        assert!("12/24/1000".parse::<PoolSpec>().is_err());
        assert!("3/2/10/block".parse::<PoolSpec>().is_err());
        assert!("1/1/1/drop".parse::<PoolSpec>().unwrap_err().contains("drop"));
    }
}
