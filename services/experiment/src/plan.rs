//! The plan of an experiment: which write policies, how many rounds, what load, which gate
//! thresholds and which deliberate faults. It comes from flags or a TOML file and is written back
//! whole as `plan.toml` into the evidence, so a run can be repeated exactly and audited later.

use crate::duration::seconds;
use crate::duration::BadDuration;
use crate::faults::RoundFault;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub(crate) use crate::policies::{builtin, PolicyDef, BUILTIN_NAMES};

#[derive(Debug, thiserror::Error)]
pub(crate) enum PlanError {
    #[error(transparent)]
    Duration(#[from] BadDuration),
    #[error("warm-up `{0}` is not like 3x10s (rounds x duration), 10s or 0")]
    Warmup(String),
    #[error("unknown policy `{0}`: built in are {1}; others are defined in the plan's [policy.NAME] tables")]
    UnknownPolicy(String, String),
    #[error("the open loop needs --rates (requests per second), e.g. --rates 500,1000")]
    NoRates,
    #[error("fault `{0}` is not ROUND:KIND with KIND one of {kinds}", kinds = RoundFault::ALL.map(|f| f.name()).join(", "))]
    Fault(String),
    #[error("fault names round {0}, but the plan has {1} rounds in all")]
    FaultRound(u32, u32),
    #[error("the plan needs at least one policy and one round")]
    Empty,
    #[error("a batch load needs at least one message per request")]
    EmptyBatch,
    #[error("keep-stores leaves the stores as they are, but the servers' warm-up empties them: add no-warm-servers")]
    KeepStoresWarmed,
    #[error("cannot read the plan: {0}")]
    Toml(#[from] toml::de::Error),
    #[error(transparent)]
    StoreDelay(#[from] crate::condition::spec::SpecError),
    #[error("a plan sweeps `conditions` or sets one `store_delay`, not both")]
    ConditionsAndDelay,
    #[error("windows (`window = \"{0}\"`) need the open loop and one rate, a window of at least 1 s and at least two windows in the measured phase")]
    Window(String),
    #[error("the sampler needs at least one second between samples")]
    SampleEvery,
}

/// Closed loop (a fixed number of virtual users, the reference's load), open loop (a fixed arrival
/// rate, free of coordinated omission; a list of rates makes a gradient), or batch (a closed loop
/// of `vus` users each posting `batch` messages per request to `/v1/messages/batch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum LoadKind {
    Closed,
    Open,
    Batch,
}

/// A deliberate fault in one round (the catalogue's [`RoundFault`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Fault {
    /// The round, counted 1.. across the whole experiment in the order the rounds run.
    pub round: u32,
    pub kind: RoundFault,
}

impl std::str::FromStr for Fault {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Fault, PlanError> {
        let bad = || PlanError::Fault(s.to_string());
        let (n, kind) = s.split_once(':').ok_or_else(bad)?;
        let round = n.trim().parse().map_err(|_| bad())?;
        let kind = RoundFault::from_name(kind.trim()).ok_or_else(bad)?;
        Ok(Fault { round, kind })
    }
}

/// What makes a round invalid. Defaults are the issue's: < 0.1 % errors, ≥ 95 % of the target
/// rate, ≤ 1 % dropped iterations; "fast errors" as in k6/lib/summary.js.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct Gates {
    pub max_error_rate: f64,
    pub min_rate_ratio: f64,
    pub max_dropped_ratio: f64,
    /// p99 latency limit in ms; none by default (a closed loop's p99 only says how full it is).
    pub max_p99_ms: Option<f64>,
    /// A median latency below this, with non-202 answers, means a dead app answering errors.
    pub fast_error_ms: f64,
    /// Share of one core above which k6 itself is suspected (a warning, not an invalid round).
    pub k6_cpu_warn: f64,
    /// Whether the timing gates (open-loop rate, dropped iterations, p99) decide a round's
    /// validity. Off they are still computed and shown, as warnings: for a run that checks the
    /// orchestration and the stores, not figures (CI's debug build on a shared machine), where
    /// they would make a timed assertion of a test.
    pub judge_timing: bool,
}

impl Default for Gates {
    fn default() -> Gates {
        Gates {
            max_error_rate: 0.001,
            min_rate_ratio: 0.95,
            max_dropped_ratio: 0.01,
            max_p99_ms: None,
            fast_error_ms: 0.3,
            k6_cpu_warn: 0.8,
            judge_timing: true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct Plan {
    /// Policy names, in the order each round runs them.
    pub policies: Vec<String>,
    pub rounds: u32,
    pub load: LoadKind,
    /// Closed loop and batch: virtual users.
    pub vus: u32,
    /// Batch: messages per request.
    pub batch: u32,
    /// Open loop: target requests per second, one load point each.
    pub rates: Vec<u32>,
    /// Open loop: most virtual users k6 may use to keep the rate.
    pub max_vus: u32,
    /// The measured phase, as k6 takes it (`60s`).
    pub duration: String,
    /// Warm-up rounds × length (`3x10s`), run by k6 before the measured phase; `0` for none.
    pub warmup: String,
    /// Shuffle the policy order of each round with this seed (interleaved A B C otherwise).
    pub shuffle_seed: Option<u64>,
    /// Flags added to every policy's writer command.
    pub writer_args: Vec<String>,
    /// Flags of every ingest.
    pub ingest_args: Vec<String>,
    /// Longest wait for the pipeline to drain before reconcile gives up, in seconds. Reconcile
    /// returns as soon as the pipeline is drained, so this only has to cover the backlog: with
    /// batches the ingest accepts faster than the stores write, and the writer stores the rest
    /// after k6 stops (over 100 s after a 100 s batch run, bench-20261201-032120).
    pub drain_timeout_s: u64,
    pub gates: Gates,
    pub faults: Vec<Fault>,
    /// A condition of every round: stores made slow by a proxy in front of each
    /// (`es=20ms±5ms`, see `condition::spec`). Not a fault: the rounds stay valid.
    pub store_delay: Vec<String>,
    /// A sweep over conditions: each entry a `store_delay` value (comma separated, `""` for
    /// none); every policy runs under each, interleaved within a condition. Rounds are labelled
    /// `POLICY@dN` (N counted 1.. in this list) in the report.
    pub conditions: Vec<String>,
    /// Policies beyond the built-in ones.
    pub policy: BTreeMap<String, PolicyDef>,
    /// A soak (open loop): the measured phase is split into windows of this length (`1m`), each
    /// with its own latency, throughput and resource figures, and judged flat or not; the
    /// servers' data on disk is sampled too. Empty: no windows.
    pub window: String,
    /// Seconds between the sampler's samples (1; a soak of hours takes 10).
    pub sample_every_s: u64,
    /// Before the first round, write to every store straight through its sink until its
    /// server's CPU per message is steady (`warm.rs`), so a freshly started stack and a warm
    /// one give the same figures.
    pub warm_servers: bool,
    /// Leave the stores as they are before each round instead of emptying them (a store
    /// pre-filled by `experiment prefill`, to measure the cost as the stores grow); each
    /// round's reconcile then judges only that round's ids (`reconcile --only-prefix`).
    pub keep_stores: bool,
    /// A probe of the broker's acknowledgement beside each round's measured phase, at this many
    /// one-message records per second (`beside.rs`): what any producer of the same broker on the
    /// same machine waits under the round's load. None: no probe.
    pub broker_beside: Option<u32>,
}

impl Default for Plan {
    /// The reference's protocol: A, B, C with the reference's pool, 3 rounds, 250 VUs × 60 s after 3 × 10 s.
    fn default() -> Plan {
        Plan {
            policies: vec!["A".into(), "B".into(), "C".into()],
            rounds: 3,
            load: LoadKind::Closed,
            vus: 250,
            batch: 100,
            rates: Vec::new(),
            max_vus: 500,
            duration: "60s".into(),
            warmup: "3x10s".into(),
            shuffle_seed: None,
            writer_args: Vec::new(),
            ingest_args: Vec::new(),
            drain_timeout_s: 600,
            gates: Gates::default(),
            faults: Vec::new(),
            store_delay: Vec::new(),
            conditions: Vec::new(),
            policy: BTreeMap::new(),
            window: String::new(),
            sample_every_s: 1,
            warm_servers: true,
            keep_stores: false,
            broker_beside: None,
        }
    }
}

/// `3x10s` → (3, "10s"); `10s` → (1, "10s"); `0` or `none` → (0, "0s").
pub(crate) fn warmup(text: &str) -> Result<(u32, String), PlanError> {
    let t = text.trim();
    if t == "0" || t == "none" || t.is_empty() {
        return Ok((0, "0s".into()));
    }
    let (n, d) = match t.split_once('x') {
        Some((n, d)) => (n.parse::<u32>().map_err(|_| PlanError::Warmup(text.into()))?, d),
        None => (1, t),
    };
    seconds(d).map_err(|_| PlanError::Warmup(text.into()))?;
    Ok((n, d.to_string()))
}

impl Plan {
    pub(crate) fn from_toml(text: &str) -> Result<Plan, PlanError> {
        Ok(toml::from_str(text)?)
    }

    /// The plan as evidence keeps it: arguments that hold a secret (a URL's password, a secret
    /// option) are masked, so evidence can be shared; secrets belong in files (`--…-file`).
    pub(crate) fn to_toml(&self) -> String {
        let redact = |args: &[String]| args.iter().map(|a| pipeline_common::secret::redact_arg(a)).collect::<Vec<_>>();
        let mut shown = self.clone();
        shown.writer_args = redact(&self.writer_args);
        shown.ingest_args = redact(&self.ingest_args);
        for def in shown.policy.values_mut() {
            def.writer_args = redact(&def.writer_args);
        }
        toml::to_string_pretty(&shown).unwrap_or_else(|e| format!("# plan not serialisable: {e}\n"))
    }

    /// A policy's definition: the plan's own table first, then the built-in ones.
    pub(crate) fn policy_def(&self, name: &str) -> Result<PolicyDef, PlanError> {
        self.policy
            .get(name)
            .cloned()
            .or_else(|| builtin(name))
            .ok_or_else(|| PlanError::UnknownPolicy(name.into(), BUILTIN_NAMES.into()))
    }

    /// The condition of every round, parsed.
    pub(crate) fn store_delays(&self) -> Result<Vec<crate::condition::spec::StoreDelay>, PlanError> {
        Ok(crate::condition::spec::parse_all(&self.store_delay)?)
    }

    /// The condition of one round: its swept condition, else the plan's store delay.
    pub(crate) fn delays_of(&self, slot: &Slot) -> Result<Vec<crate::condition::spec::StoreDelay>, PlanError> {
        match slot.condition.and_then(|n| self.conditions.get(n as usize - 1)) {
            Some(c) => Ok(crate::condition::spec::parse_all(std::slice::from_ref(c))?),
            None => self.store_delays(),
        }
    }

    /// The names the report groups rounds by, in plan order: the policies, or under a condition
    /// sweep each policy under each condition (`C@d1`, `C-adaptive@d1`, ..., `C@d2`, ...).
    pub(crate) fn labels(&self) -> Vec<String> {
        if self.conditions.is_empty() {
            return self.policies.clone();
        }
        (1..=self.conditions.len()).flat_map(|n| self.policies.iter().map(move |p| format!("{p}@d{n}"))).collect()
    }

    /// How the report names a swept condition: its text, or `none` for the servers as they are.
    pub(crate) fn condition_name(c: &str) -> &str {
        if c.is_empty() {
            "none"
        } else {
            c
        }
    }

    /// How the report names a round's policy: `C`, or `C@d2` under the second swept condition.
    pub(crate) fn label(slot: &Slot) -> String {
        match slot.condition {
            Some(n) => format!("{}@d{n}", slot.policy),
            None => slot.policy.clone(),
        }
    }

    /// Load points: the VU count for a closed loop, each rate for an open one.
    pub(crate) fn points(&self) -> Vec<u32> {
        match self.load {
            LoadKind::Closed | LoadKind::Batch => vec![self.vus],
            LoadKind::Open => self.rates.clone(),
        }
    }

    /// Whether a whole unmeasured round of the pipeline runs before the first measured one
    /// (after the servers' warm-up): yes for rounds of a minute, so that every measured round
    /// follows one; not for a soak, whose own warm-up (`--warmup`, minutes at the soak's rate)
    /// already is that round. Before this rule a soak of an hour first ran a whole unmeasured
    /// soak of an hour (2026-12-06: killed 15 minutes into it).
    pub(crate) fn warming_round(&self) -> bool {
        self.warm_servers && self.window.is_empty()
    }

    /// The soak's window in seconds, when the plan has windows.
    pub(crate) fn window_s(&self) -> Option<f64> {
        (!self.window.is_empty()).then(|| seconds(&self.window).ok()).flatten()
    }

    pub(crate) fn total_rounds(&self) -> u32 {
        self.rounds * self.policies.len() as u32 * self.points().len() as u32 * self.conditions.len().max(1) as u32
    }

    /// Checks everything that can be checked before a server is touched.
    pub(crate) fn validate(&self) -> Result<(), PlanError> {
        if self.policies.is_empty() || self.rounds == 0 {
            return Err(PlanError::Empty);
        }
        for p in &self.policies {
            self.policy_def(p)?;
        }
        if self.load == LoadKind::Open && self.rates.is_empty() {
            return Err(PlanError::NoRates);
        }
        if self.load == LoadKind::Batch && self.batch == 0 {
            return Err(PlanError::EmptyBatch);
        }
        if self.keep_stores && self.warm_servers {
            return Err(PlanError::KeepStoresWarmed);
        }
        let measured = seconds(&self.duration)?;
        warmup(&self.warmup)?;
        if !self.window.is_empty() {
            let w = seconds(&self.window)?;
            if self.load != LoadKind::Open || self.rates.len() != 1 || w < 1.0 || measured < 2.0 * w {
                return Err(PlanError::Window(self.window.clone()));
            }
        }
        if self.sample_every_s == 0 {
            return Err(PlanError::SampleEvery);
        }
        self.store_delays()?;
        for c in &self.conditions {
            crate::condition::spec::parse_all(std::slice::from_ref(c))?;
        }
        if !self.conditions.is_empty() && !self.store_delay.is_empty() {
            return Err(PlanError::ConditionsAndDelay);
        }
        for f in &self.faults {
            if f.round == 0 || f.round > self.total_rounds() {
                return Err(PlanError::FaultRound(f.round, self.total_rounds()));
            }
        }
        Ok(())
    }

    /// The rounds in the order they run: repetition by repetition, load point by load point, every
    /// policy once (the reference's interleaving, A B C, A B C, ...), shuffled per repetition when a
    /// seed is given.
    pub(crate) fn schedule(&self) -> Vec<Slot> {
        let mut out = Vec::new();
        let mut rng = self.shuffle_seed.map(SplitMix);
        let conditions: Vec<Option<u32>> = if self.conditions.is_empty() {
            vec![None]
        } else {
            (1..=self.conditions.len() as u32).map(Some).collect()
        };
        for rep in 1..=self.rounds {
            for &point in &self.points() {
                for &condition in &conditions {
                    let mut order = self.policies.clone();
                    if let Some(r) = rng.as_mut() {
                        for i in (1..order.len()).rev() {
                            let j = (r.next() % (i as u64 + 1)) as usize;
                            order.swap(i, j);
                        }
                    }
                    for policy in order {
                        let index = out.len() as u32 + 1;
                        let fault = self.faults.iter().find(|f| f.round == index).map(|f| f.kind);
                        out.push(Slot { index, rep, point, policy, fault, condition });
                    }
                }
            }
        }
        out
    }
}

/// One round of the schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Slot {
    /// 1.. in run order across the experiment.
    pub index: u32,
    /// Which repetition of its policy and load point (1..=rounds).
    pub rep: u32,
    /// VUs (closed loop) or requests/s (open loop).
    pub point: u32,
    pub policy: String,
    pub fault: Option<RoundFault>,
    /// Which of the plan's swept `conditions` (1..), if it sweeps any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<u32>,
}

/// A tiny deterministic generator for the optional shuffle (no dependency for one shuffle).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
