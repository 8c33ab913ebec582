//! Every metric the services export, declared once with its help text.
//!
//! Code records metrics through these constants (`counter!(catalog::WRITER_RECORDS_TOTAL)`), and
//! [`describe_all`] gives each its `# HELP` line, so a dashboard or a reader of `/metrics` learns
//! what a series means from the service itself. A test keeps string-literal metric names out of
//! the rest of the code, so nothing is exported without a line here.

macro_rules! catalog {
    ($($kind:ident $name:ident = $text:literal: $help:literal;)*) => {
        $(#[doc = $help] pub const $name: &str = $text;)*

        /// Registers the help text of every metric with the installed recorder.
        pub fn describe_all() {
            $(catalog!(@describe $kind $text, $help);)*
        }

        /// (kind, name, help) of every metric, for tests and generated docs.
        pub const ALL: &[(&str, &str, &str)] = &[$((stringify!($kind), $text, $help),)*];
    };
    (@describe counter $text:literal, $help:literal) => { metrics::describe_counter!($text, $help) };
    (@describe gauge $text:literal, $help:literal) => { metrics::describe_gauge!($text, $help) };
    (@describe histogram $text:literal, $help:literal) => { metrics::describe_histogram!($text, $help) };
}

catalog! {
    gauge PIPELINE_PROCESS_INFO = "pipeline_process_info":
        "Always 1; labels: service, version, and boot_id, new at every process start (a run must see one value throughout).";
    gauge PROCESS_START_TIME_SECONDS = "process_start_time_seconds":
        "Start time of the process since the Unix epoch, in seconds.";

    counter INGEST_REQUESTS_TOTAL = "ingest_requests_total":
        "HTTP requests answered, by route pattern, status code and API key name (none: no key was needed or given).";
    counter INGEST_AUTH_RELOADS_TOTAL = "ingest_auth_reloads_total":
        "Reloads of the API keys file, by result (ok; refused: it did not parse and the keys in force were kept).";
    counter INGEST_TLS_RELOADS_TOTAL = "ingest_tls_reloads_total":
        "Reloads of the API listener's TLS certificate and key (--tls-cert-file), by result (ok; refused: unreadable, unparsable, mismatched or out of date, and the pair in force was kept).";
    counter INGEST_ACCEPTED_MESSAGES_TOTAL = "ingest_accepted_messages_total":
        "Messages answered 202, by API key name.";
    counter INGEST_KEY_REFUSALS_TOTAL = "ingest_key_refusals_total":
        "Requests refused for their API key's limits, by key and reason (rate, bytes: 429 or 413; share: 503 key_busy).";
    gauge INGEST_BODY_BUDGET_BYTES = "ingest_body_budget_bytes":
        "Most bytes of request bodies being read or parsed at once (--body-budget-bytes).";
    gauge INGEST_BODY_BYTES = "ingest_body_bytes":
        "Bytes of request bodies being read or parsed, as of the last body read.";
    counter INGEST_BODY_REFUSALS_TOTAL = "ingest_body_refusals_total":
        "Requests refused while their body was read, by reason (budget: 503 busy, the body budget was spent; timeout: 408, the body did not arrive within --read-timeout-ms).";
    histogram INGEST_REQUEST_SECONDS = "ingest_request_seconds":
        "Time from request to answer, by route pattern, in seconds.";
    gauge INGEST_RING_CAPACITY = "ingest_ring_capacity":
        "Slots in the ingest ring.";
    gauge INGEST_RING_CAPACITY_BYTES = "ingest_ring_capacity_bytes":
        "Most bytes of records the ring may hold (--ring-max-bytes).";
    gauge INGEST_RING_OCCUPANCY = "ingest_ring_occupancy":
        "Request records in the ring (one per single POST, one per batch POST up to --record-max-bytes), published and not yet taken by its consumer.";
    gauge INGEST_RING_BYTES = "ingest_ring_bytes":
        "Bytes of records in the ring.";
    counter INGEST_RING_REJECTIONS_TOTAL = "ingest_ring_rejections_total":
        "Requests refused with 503 ring_full, by reason (slots or bytes).";
    histogram INGEST_RING_DRAIN_BATCH_RECORDS = "ingest_ring_drain_batch_records":
        "Request records (one per single POST, one or more per batch POST) the ring consumer took in one drain, before it gathers them into Kafka records.";
    histogram INGEST_RING_WAIT_SECONDS = "ingest_ring_wait_seconds":
        "Time a request record waited in the ring before its consumer took it, in seconds.";
    histogram INGEST_GATHER_SECONDS = "ingest_gather_seconds":
        "Time from the first request record of a Kafka record leaving the ring to the record being handed to the producer (the gathering window, and any wait for room in the producer), in seconds.";
    histogram INGEST_KAFKA_DELIVERY_SECONDS = "ingest_kafka_delivery_seconds":
        "Time from a record being handed to the producer to Kafka's delivery report, in seconds.";
    counter INGEST_KAFKA_ERRORS_TOTAL = "ingest_kafka_errors_total":
        "Messages the Kafka producer refused or reported failed.";
    counter INGEST_UNCERTAIN_MESSAGES_TOTAL = "ingest_uncertain_messages_total":
        "Messages answered 504 uncertain: Kafka may or may not have them.";

    counter WRITER_RECORDS_TOTAL = "writer_records_total":
        "Kafka records taken into a batch (a batch POST's record holds many messages; writer_store_records_total counts messages).";
    gauge WRITER_ASSIGNED_PARTITIONS = "writer_assigned_partitions":
        "Partitions assigned to each consumer of this process, by consumer (a rebalance shows as a change).";
    counter WRITER_RECORDS_DROPPED_ON_REBALANCE_TOTAL = "writer_records_dropped_on_rebalance_total":
        "Records dropped unwritten because their partition was revoked while their batch was collected (re-read by the owner).";
    gauge WRITER_PARTITION_COMMITTED_OFFSET = "writer_partition_committed_offset":
        "Offset the writers' group has committed, by partition: set when Kafka acknowledges a commit of this writer, and sampled from the broker every 5 s.";
    gauge WRITER_PARTITION_HIGH_WATERMARK = "writer_partition_high_watermark":
        "Offset of the next record to be produced, by partition, sampled every few seconds (lag = this minus the committed offset).";
    counter WRITER_GROUP_REJOINS_TOTAL = "writer_group_rejoins_total":
        "Times a consumer of this process left and rejoined the group because a partition with records waiting made no progress for --rejoin-stalled-secs while every store answered and no consumer here owned it (a broker that lost the partition's assignment).";
    counter WRITER_COMMIT_FAILURES_TOTAL = "writer_commit_failures_total":
        "Offset commits that failed (asked again).";
    counter WRITER_CONSUMER_FAILURES_TOTAL = "writer_consumer_failures_total":
        "Consumers that could not continue; the process exits non-zero after one.";
    counter WRITER_PANICS_TOTAL = "writer_panics_total":
        "Panics caught, by where (store_write, pool_job).";
    counter WRITER_DLQ_RECORDS_TOTAL = "writer_dlq_records_total":
        "Records sent to the dead-letter topic, by the store that refused them (or decode).";
    counter WRITER_DLQ_ERRORS_TOTAL = "writer_dlq_errors_total":
        "Failed attempts to produce a dead letter (retried).";
    histogram WRITER_STORE_BATCH_RECORDS = "writer_store_batch_records":
        "Messages in one batch written to a store, by store.";
    histogram WRITER_STORE_WRITE_SECONDS = "writer_store_write_seconds":
        "Time of one successful store write, by store, in seconds.";
    counter WRITER_STORE_RECORDS_TOTAL = "writer_store_records_total":
        "Messages stored, by store.";
    counter WRITER_STORE_ERRORS_TOTAL = "writer_store_errors_total":
        "Failed store writes, by store and kind (transient or permanent).";
    counter WRITER_STORE_RETRIES_TOTAL = "writer_store_retries_total":
        "Store writes retried after a transient error, by store.";
    counter WRITER_STORE_SPLITS_TOTAL = "writer_store_splits_total":
        "Batches split in halves to isolate records a store refuses for good, by store.";
    gauge WRITER_POOL_QUEUE_CAPACITY = "writer_pool_queue_capacity":
        "Jobs a pool's queue holds, by pool.";
    gauge WRITER_POOL_QUEUE_CAPACITY_BYTES = "writer_pool_queue_capacity_bytes":
        "Bytes of batches a pool's queue holds, by pool.";
    gauge WRITER_POOL_MAX_WORKERS = "writer_pool_max_workers":
        "Most workers of a pool, by pool.";
    gauge WRITER_POOL_CONCURRENCY_LIMIT = "writer_pool_concurrency_limit":
        "Writes an adaptive pool lets run at once now (--pool-adaptive; between 1 and its max workers), by pool.";
    gauge WRITER_POOL_JOB_SECONDS = "writer_pool_job_seconds":
        "An adaptive pool's past round trip: one job's duration (one batch into one store, retries included), as the moving average its limit is judged against, by pool.";
    gauge WRITER_POOL_QUEUE_DEPTH = "writer_pool_queue_depth":
        "Jobs waiting in a pool's queue, by pool.";
    gauge WRITER_POOL_QUEUE_DEPTH_PEAK = "writer_pool_queue_depth_peak":
        "Highest queue depth since start, by pool.";
    gauge WRITER_POOL_QUEUE_BYTES = "writer_pool_queue_bytes":
        "Bytes of batches waiting in a pool's queue, by pool.";
    gauge WRITER_POOL_ACTIVE_WORKERS = "writer_pool_active_workers":
        "Workers running a job, by pool.";
    gauge WRITER_POOL_ACTIVE_WORKERS_PEAK = "writer_pool_active_workers_peak":
        "Highest number of active workers since start, by pool.";
    counter WRITER_POOL_COMPLETED_TOTAL = "writer_pool_completed_total":
        "Jobs a pool finished, by pool.";
    counter WRITER_POOL_REJECTED_TOTAL = "writer_pool_rejected_total":
        "Submissions refused by a full pool with policy reject (retried by the consumer), by pool.";
    counter WRITER_POOL_CALLER_RUNS_TOTAL = "writer_pool_caller_runs_total":
        "Jobs a full pool with policy caller-runs made the consumer run itself (async turned sync), by pool.";
    counter WRITER_POOL_PANICS_TOTAL = "writer_pool_panics_total":
        "Jobs that panicked in a pool, by pool.";
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() && !p.ends_with("target") {
                sources(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    /// No metric is recorded under a name spelled outside this file, and no name is declared twice.
    #[test]
    fn every_metric_is_declared_here_once() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = Vec::new();
        for dir in ["services", "reconcile"] {
            sources(&root.join(dir), &mut files);
        }
        let mut offenders = Vec::new();
        for f in files.iter().filter(|f| !f.ends_with("catalog.rs")) {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            for mac in ["counter!(\"", "gauge!(\"", "histogram!(\""] {
                if text.contains(mac) {
                    offenders.push(format!("{} uses {mac}…", f.display()));
                }
            }
        }
        assert!(offenders.is_empty(), "metric names spelled outside the catalog: {offenders:#?}");
        let mut names: Vec<_> = ALL.iter().map(|(_, n, _)| *n).collect();
        names.sort();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "a metric declared twice");
    }
}
