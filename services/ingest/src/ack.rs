//! The acknowledgement contract between the HTTP side and the producer: what became of a
//! request's Kafka records ([`Delivery`]) and the one channel a request waits on for the worst of
//! them ([`RequestAck`]). Routes create it, the ring and the gatherer carry it, the producer's
//! delivery reports fill it; each of them imports it from here, none from the step after it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// What became of one record, as far as the ingest can know. The difference between the two
/// failures is the HTTP contract: a 503 promises the message was not and will not be written; a
/// 504 says it may have been (a retry with the same id is safe: every store writes by id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// Kafka acknowledged it (acks=all): durable in the topic, not yet in the stores.
    Acknowledged,
    /// It never reached librdkafka (its queue stayed full, or the producer refused it).
    NotSent(String),
    /// librdkafka had it and then reported a failure: it may have reached the broker.
    Uncertain(String),
}

impl Delivery {
    /// How bad an outcome is for the request: one uncertain record makes the request uncertain.
    fn severity(&self) -> u8 {
        match self {
            Delivery::Acknowledged => 0,
            Delivery::NotSent(_) => 1,
            Delivery::Uncertain(_) => 2,
        }
    }
}

/// One request's acknowledgement, shared by all its records: the request waits on one channel
/// for the worst of their outcomes (the first error of that kind), sent when the last record
/// has its report: one wake-up of the request's worker, not one per record.
/// `NotSent` is the answer only when no record was sent: a request whose other records may be
/// stored is `Uncertain`.
///
/// If records are dropped without a report (only when the producer itself goes away), the last
/// drop drops the sender and the request reads that as "report lost", i.e. uncertain.
pub(crate) struct RequestAck {
    remaining: AtomicUsize,
    /// Some record entered librdkafka (stored, or reported failed after it may have been sent).
    sent_any: AtomicBool,
    state: Mutex<AckState>,
}

struct AckState {
    worst: Delivery,
    tx: Option<oneshot::Sender<Delivery>>,
}

/// Where a record's [`Delivery`] is reported: its request's acknowledgement.
pub(crate) type Ack = Arc<RequestAck>;

impl RequestAck {
    /// An acknowledgement for `records` records, and where the request reads its outcome.
    pub(crate) fn new(records: usize) -> (Ack, oneshot::Receiver<Delivery>) {
        let (tx, rx) = oneshot::channel();
        let state = Mutex::new(AckState { worst: Delivery::Acknowledged, tx: Some(tx) });
        let sent_any = AtomicBool::new(false);
        (Arc::new(RequestAck { remaining: AtomicUsize::new(records), sent_any, state }), rx)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, AckState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One record's outcome. Failures are recorded before the count goes down, so the record
    /// that brings it to zero sees every earlier failure.
    pub(crate) fn report(&self, outcome: Delivery) {
        if !matches!(outcome, Delivery::NotSent(_)) {
            self.sent_any.store(true, Ordering::Release);
        }
        if outcome.severity() > 0 {
            let mut st = self.state();
            if outcome.severity() > st.worst.severity() {
                st.worst = outcome;
            }
        }
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            let mut st = self.state();
            let worst = match std::mem::replace(&mut st.worst, Delivery::Acknowledged) {
                Delivery::NotSent(e) if self.sent_any.load(Ordering::Acquire) => {
                    Delivery::Uncertain(format!("some records were not sent ({e}), others may be stored"))
                }
                worst => worst,
            };
            if let Some(tx) = st.tx.take() {
                // The request may have given up (deadline) and dropped the receiver: fine.
                let _ = tx.send(worst);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome_of(reports: Vec<Delivery>) -> Result<Delivery, oneshot::error::TryRecvError> {
        let (ack, mut rx) = RequestAck::new(reports.len());
        let n = reports.len();
        for (i, d) in reports.into_iter().enumerate() {
            assert!(rx.try_recv().is_err(), "no answer before report {} of {n}", i + 1);
            ack.report(d);
        }
        rx.try_recv()
    }

    #[test]
    fn the_request_hears_once_every_record_is_reported() {
        let (ack, mut rx) = RequestAck::new(3);
        ack.report(Delivery::Acknowledged);
        ack.report(Delivery::Acknowledged);
        assert!(rx.try_recv().is_err(), "one record still unreported");
        ack.report(Delivery::Acknowledged);
        assert_eq!(rx.try_recv(), Ok(Delivery::Acknowledged));
    }

    #[test]
    fn the_worst_outcome_wins_and_keeps_its_first_error() {
        let got = outcome_of(vec![
            Delivery::NotSent("full".into()),
            Delivery::Uncertain("timed out".into()),
            Delivery::Uncertain("later".into()),
            Delivery::Acknowledged,
        ]);
        assert_eq!(got, Ok(Delivery::Uncertain("timed out".into())));
        // Not sent, but another record may be stored: uncertain. None sent: nothing written.
        assert!(matches!(
            outcome_of(vec![Delivery::Acknowledged, Delivery::NotSent("full".into())]),
            Ok(Delivery::Uncertain(e)) if e.contains("full")
        ));
        assert_eq!(
            outcome_of(vec![Delivery::NotSent("full".into()), Delivery::NotSent("later".into())]),
            Ok(Delivery::NotSent("full".into()))
        );
    }

    #[test]
    fn records_dropped_without_a_report_close_the_channel() {
        let (ack, mut rx) = RequestAck::new(2);
        let other = ack.clone();
        ack.report(Delivery::Acknowledged);
        drop(ack);
        drop(other);
        assert_eq!(rx.try_recv(), Err(oneshot::error::TryRecvError::Closed));
    }
}
