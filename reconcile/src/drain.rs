//! Waiting for the pipeline to drain before anything is counted or reset.
//!
//! Drained means: the writers' group has committed every partition up to its high watermark
//! (so every produced record is in all four stores: the writer commits only after that), and the
//! store counts did not move between two consecutive polls. Counting earlier is how the reference experiment
//! once reset stores that late writes then filled again.

use indicatif::{ProgressBar, ProgressStyle};
use pipeline_common::config::KafkaArgs;
use pipeline_common::kafka::{GroupProbe, PartitionLag};
use pipeline_stores::{Store, StoreKind};
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Store counts in [`StoreKind::ALL`] order.
pub(crate) type Counts = Vec<(StoreKind, u64)>;

pub(crate) async fn count_all(stores: &[Arc<dyn Store>]) -> anyhow::Result<Counts> {
    let mut out = Vec::with_capacity(stores.len());
    for s in stores {
        out.push((s.kind(), crate::patient::count(s.as_ref()).await?));
    }
    Ok(out)
}

/// The writers' lag, sampled through one client kept for the whole wait (librdkafka calls, so on
/// the blocking pool).
async fn lag(probe: &Arc<GroupProbe>) -> anyhow::Result<Vec<PartitionLag>> {
    let p = probe.clone();
    Ok(tokio::task::spawn_blocking(move || p.sample()).await??)
}

/// Why the wait ended without a drain.
#[derive(Debug)]
pub(crate) struct NotDrained {
    pub lagging: Vec<PartitionLag>,
    pub counts: Counts,
}

/// Progress: a spinner on a terminal, plain lines (every 5 s) otherwise.
struct Progress {
    bar: Option<ProgressBar>,
    last_line: Instant,
}

impl Progress {
    fn new() -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::new_spinner();
            b.set_style(ProgressStyle::with_template("{spinner} {elapsed} {msg}").expect("static template"));
            b.enable_steady_tick(Duration::from_millis(200));
            b
        });
        Progress { bar, last_line: Instant::now() - Duration::from_secs(10) }
    }

    fn show(&mut self, lag: &[PartitionLag], counts: &Counts) {
        let total: i64 = lag.iter().map(|p| p.lag()).sum();
        let c: Vec<String> = counts.iter().map(|(k, n)| format!("{k}={n}")).collect();
        let msg = format!("waiting for drain: lag {total} ({} partitions) · {}", lag.len(), c.join(" "));
        match &self.bar {
            Some(b) => b.set_message(msg),
            None if self.last_line.elapsed() >= Duration::from_secs(5) => {
                eprintln!("{msg}");
                self.last_line = Instant::now();
            }
            None => {}
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// What one poll decides.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    Drained,
    NotDrained,
    PollAgain,
}

/// Drained once the writers have caught up and the counts held still since the last poll. At
/// the deadline, a pipeline that has caught up but whose counts were not yet seen twice gets one
/// more poll: without it, catching up on the last poll before the deadline read as "not
/// drained" with no partition lagging (a bench run's reconcile did exactly that, with every
/// message stored).
fn step(caught_up: bool, stable: bool, past_deadline: bool, last_chance_used: bool) -> Step {
    match (caught_up && stable, past_deadline) {
        (true, _) => Step::Drained,
        (false, false) => Step::PollAgain,
        (false, true) if caught_up && !last_chance_used => Step::PollAgain,
        (false, true) => Step::NotDrained,
    }
}

/// Polls lag and counts every `interval` until the pipeline is drained or `timeout` passes.
pub(crate) async fn wait(
    kafka: &KafkaArgs,
    stores: &[Arc<dyn Store>],
    timeout: Duration,
    interval: Duration,
) -> anyhow::Result<Result<Counts, NotDrained>> {
    let deadline = Instant::now() + timeout;
    let probe = Arc::new(GroupProbe::new(kafka, &kafka.group, &kafka.topic)?);
    let mut progress = Progress::new();
    let mut previous: Option<Counts> = None;
    let mut last_chance_used = false;
    loop {
        let lag = lag(&probe).await?;
        let caught_up = lag.iter().all(|p| p.lag() == 0);
        // Count only once the writers have caught up: counting is expensive on some stores
        // (nx-27017's count_documents scans), and polling it every second slows the very writes
        // we are waiting for.
        let counts = if caught_up || Instant::now() >= deadline { count_all(stores).await? } else { Vec::new() };
        progress.show(&lag, &counts);
        let past_deadline = Instant::now() >= deadline;
        match step(caught_up, previous.as_ref() == Some(&counts), past_deadline, last_chance_used) {
            Step::Drained => {
                progress.finish();
                return Ok(Ok(counts));
            }
            Step::NotDrained => {
                progress.finish();
                let lagging = lag.into_iter().filter(|p| p.lag() > 0).collect();
                return Ok(Err(NotDrained { lagging, counts }));
            }
            Step::PollAgain => last_chance_used |= past_deadline,
        }
        previous = Some(counts);
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::{step, Step};

    #[test]
    fn caught_up_at_the_deadline_gets_one_more_poll() {
        // (caught up, counts stable, past the deadline, last chance used)
        assert_eq!(step(true, true, false, false), Step::Drained);
        assert_eq!(step(true, true, true, true), Step::Drained, "stable on the extra poll");
        assert_eq!(step(true, false, false, false), Step::PollAgain, "counts not seen twice yet");
        assert_eq!(step(false, false, false, false), Step::PollAgain);
        assert_eq!(step(true, false, true, false), Step::PollAgain, "caught up on the last poll");
        assert_eq!(step(true, false, true, true), Step::NotDrained, "still moving after the extra poll");
        assert_eq!(step(false, false, true, false), Step::NotDrained, "lagging at the deadline");
    }
}
