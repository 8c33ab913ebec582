//! How the consumer learns that every pooled write of a batch is done, or that one never will be.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;

/// What the consumer hears about one batch: all its writes are done (`ok`), or one of them
/// failed in a way that must stop the consumer (a panic): never both, and exactly once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Completion {
    pub batch: u64,
    pub ok: bool,
}

/// Counts down the asynchronous writes of one batch.
pub(crate) struct Ticket {
    batch: u64,
    remaining: AtomicUsize,
    reported: AtomicBool,
    /// `None`: nobody listens (`--commit after-submit`).
    done: Option<mpsc::UnboundedSender<Completion>>,
}

impl Ticket {
    pub(crate) fn new(batch: u64, writes: usize, done: mpsc::UnboundedSender<Completion>) -> Arc<Ticket> {
        Self::make(batch, writes, Some(done))
    }

    /// A ticket nobody listens to: the writes run, and what becomes of them is not reported
    /// (`--commit after-submit`, the reference experiment's ack before the writes).
    pub(crate) fn unobserved(batch: u64, writes: usize) -> Arc<Ticket> {
        Self::make(batch, writes, None)
    }

    fn make(batch: u64, writes: usize, done: Option<mpsc::UnboundedSender<Completion>>) -> Arc<Ticket> {
        let t = Arc::new(Ticket { batch, remaining: AtomicUsize::new(writes), reported: AtomicBool::new(false), done });
        if writes == 0 {
            t.report(true);
        }
        t
    }

    fn finish_one(&self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.report(true);
        }
    }

    /// The batch can never be reported stored.
    fn fail(&self) {
        self.report(false);
    }

    fn report(&self, ok: bool) {
        if let (false, Some(done)) = (self.reported.swap(true, Ordering::AcqRel), &self.done) {
            // The consumer may have stopped listening (shutdown after the grace): nothing to do.
            let _ = done.send(Completion { batch: self.batch, ok });
        }
    }
}

/// Held by a pool job: unless the job marks it finished, dropping it (a panic unwinding the job,
/// or the job being dropped unrun at exit) fails the batch, so a lost job can never look like a
/// slow one and stall commits in silence.
pub(super) struct JobGuard {
    pub(super) ticket: Arc<Ticket>,
    pub(super) finished: bool,
}

impl Drop for JobGuard {
    fn drop(&mut self) {
        if self.finished {
            self.ticket.finish_one();
        } else {
            self.ticket.fail();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_dropped_job_fails_its_batch_exactly_once() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let ticket = Ticket::new(7, 2, tx);
        drop(JobGuard { ticket: ticket.clone(), finished: true });
        assert!(rx.try_recv().is_err(), "one of two writes done: nothing yet");
        drop(JobGuard { ticket: ticket.clone(), finished: false });
        assert_eq!(rx.try_recv().unwrap(), Completion { batch: 7, ok: false });
        ticket.finish_one();
        assert!(rx.try_recv().is_err(), "reported once");
    }

    #[tokio::test]
    async fn all_writes_done_reports_ok() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let ticket = Ticket::new(3, 2, tx.clone());
        ticket.finish_one();
        ticket.finish_one();
        assert_eq!(rx.try_recv().unwrap(), Completion { batch: 3, ok: true });
        let _none = Ticket::new(4, 0, tx);
        assert_eq!(rx.try_recv().unwrap(), Completion { batch: 4, ok: true }, "no pooled write: done at once");
    }
}
