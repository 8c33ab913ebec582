//! Black-box tests of the writer binary against the real MariaDB, Redis, tansu, nx-27017 and
//! OpenSearch: what is produced to the topic ends up exactly once in every store, whatever the
//! write policy, across redelivery, a SIGKILL, a store outage and a poison record.

mod support;

use pipeline_testkit::{exclusive, produce_raw};
use std::time::{Duration, Instant};
use support::{Run, DRAIN};

/// 20,000 records through one write policy; `check` looks at the metrics before the stop.
async fn policy_run(label: &str, args: &[&str], check: &[(&str, f64)]) {
    let _g = exclusive().await;
    let run = Run::new(label).await;
    let ids = run.produce(20_000, label).await;
    let mut w = run.writer(args);
    run.assert_stored(&ids).await;
    run.wait_committed(20_000).await;
    for (metric, at_least) in check {
        let v = run.metric(metric).await;
        assert!(v >= *at_least, "{metric} = {v}, want >= {at_least}");
    }
    w.signal("TERM");
    let st = w.wait_exit(Duration::from_secs(30)).expect("writer exits on SIGTERM");
    assert!(st.success(), "clean exit, got {st:?}");
}

#[tokio::test]
async fn policy_c_mysql_sync_per_store_pools() {
    policy_run("c_per", &["--sync-stores", "mysql", "--pool", "per-store"], &[]).await;
}

#[tokio::test]
async fn policy_c_mysql_sync_shared_pool() {
    policy_run("c_sh", &["--sync-stores", "mysql", "--pool", "shared"], &[]).await;
}

#[tokio::test]
async fn policy_a_es_sync_shared_pool() {
    policy_run("a_sh", &["--sync-stores", "es", "--pool", "shared"], &[]).await;
}

#[tokio::test]
async fn policy_a_es_sync_per_store_pools() {
    policy_run("a_per", &["--sync-stores", "es", "--pool", "per-store"], &[]).await;
}

#[tokio::test]
async fn policy_b_all_async_shared_pool() {
    policy_run(
        "b_sh",
        &["--sync-stores", "none", "--pool", "shared"],
        &[("writer_pool_completed_total{pool=\"shared\"}", 1.0)],
    )
    .await;
}

#[tokio::test]
async fn policy_c_with_the_references_job_shape_caller_runs_and_loses_nothing() {
    // One pool job per 7 messages and store (the reference's was 1; 7 leaves a short last slice)
    // through a pool small enough that caller-runs fires: 20,000 messages make at least
    // 3 x 20,000 / 7 = 8,571 jobs, where whole-batch jobs would make a few hundred.
    policy_run(
        "c_jobs",
        &["--sync-stores", "mysql", "--pool", "shared", "--pool-shared", "2/4/8/caller-runs", "--pool-job-max", "7"],
        &[
            ("writer_pool_completed_total{pool=\"shared\"}", 8_571.0),
            ("writer_pool_caller_runs_total{pool=\"shared\"}", 1.0),
        ],
    )
    .await;
}

#[tokio::test]
async fn policy_b_all_async_per_store_reject_policy() {
    // Tiny pools with the `reject` policy: rejections happen, and nothing is lost to them.
    policy_run(
        "b_rej",
        &[
            "--sync-stores",
            "none",
            "--pool-mysql",
            "1/1/1/reject",
            "--pool-redis",
            "1/1/1/reject",
            "--pool-es",
            "1/1/1/reject",
            "--pool-mongo",
            "1/1/1/reject",
        ],
        &[("writer_pool_rejected_total", 1.0), ("writer_pool_completed_total{pool=\"mysql\"}", 1.0)],
    )
    .await;
}

#[tokio::test]
async fn all_sync() {
    policy_run("all", &["--sync-stores", "all"], &[]).await;
}

#[tokio::test]
async fn redelivery_leaves_one_copy() {
    let _g = exclusive().await;
    let run = Run::new("redeliver").await;
    let ids = run.produce(5_000, "rd").await;
    let mut w = run.writer(&[]);
    run.assert_stored(&ids).await;
    run.wait_committed(5_000).await;
    w.signal("TERM");
    w.wait_exit(Duration::from_secs(30)).expect("exit");
    // Rewind the group to the start: every record is delivered again.
    let k = run.ns.kafka.clone();
    tokio::task::spawn_blocking(move || rewind(&k)).await.unwrap();
    assert_eq!(run.committed_and_high().await.0, 0);
    let _w = run.writer(&[]);
    run.wait_committed(5_000).await;
    run.assert_stored(&ids).await;
}

/// Commits offset 0 on every partition for the namespace's group (no member is running).
fn rewind(k: &pipeline_common::config::KafkaArgs) {
    use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
    let c: BaseConsumer = pipeline_common::kafka::client_config(k).set("group.id", &k.group).create().unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..k.partitions {
        tpl.add_partition_offset(&k.topic, p, rdkafka::Offset::Offset(0)).unwrap();
    }
    c.commit(&tpl, CommitMode::Sync).unwrap();
}

#[tokio::test]
async fn sigkill_mid_run_loses_and_duplicates_nothing() {
    let _g = exclusive().await;
    let run = Run::new("crash").await;
    let ids = run.produce(50_000, "cr").await;
    let mut w = run.writer(&[]);
    // Let it get well into the run, then kill it without warning.
    let deadline = Instant::now() + DRAIN;
    while run.stores[0].count().await.unwrap() < 10_000 {
        assert!(Instant::now() < deadline, "no progress before the kill");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    w.signal("KILL");
    w.wait_exit(Duration::from_secs(10)).expect("killed");
    let (committed, _) = run.committed_and_high().await;
    assert!(committed < 50_000, "killed mid-run (committed {committed})");
    // Restarted at once, while the killed member's session still holds its partitions: tansu
    // 0.6.0 then forms the group without them, and the writer's stall watch rejoins it
    // (docs/explanation/architecture.md, "Known server quirks"). Before that watch this test slept 15 s here.
    let _w2 = run.writer(&[]);
    run.assert_stored(&ids).await;
    run.wait_committed(50_000).await;
}

#[tokio::test]
async fn a_store_outage_holds_commits_and_recovers() {
    let _g = exclusive().await;
    let mut run = Run::new("outage").await;
    // A private Redis that this test may stop (and restart with every key).
    let mut redis = run.with_private_redis().await;
    let mut ids = run.produce(2_000, "before").await;
    let _w = run.writer(&[]);
    run.assert_stored(&ids).await;
    run.wait_committed(2_000).await;

    redis.stop();
    ids.extend(run.produce(3_000, "during").await);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(run.committed_and_high().await.0, 2_000, "nothing committed past records Redis does not hold");
    assert!(run.metric("writer_store_errors_total{store=\"redis\"").await > 0.0, "the outage shows in metrics");
    assert!(run.metric("writer_store_retries_total{store=\"redis\"}").await > 0.0);

    redis.start();
    run.assert_stored(&ids).await;
    run.wait_committed(5_000).await;
}

#[tokio::test]
async fn a_poison_record_is_dead_lettered_and_does_not_block() {
    let _g = exclusive().await;
    let run = Run::new("poison").await;
    pipeline_common::kafka::ensure_topic(&run.ns.kafka, &run.ns.kafka.topic, 4).await.unwrap();
    let dlq = format!("{}.dlq", run.ns.name);
    let mut ids = run.produce(100, "p1").await;
    produce_raw(&run.ns.kafka, &run.ns.kafka.topic, [(b"bad".to_vec(), b"{not json".to_vec())]).await;
    ids.extend(run.produce(100, "p2").await);
    let w = run.writer(&["--dlq-topic", &dlq]);
    run.assert_stored(&ids).await;
    run.wait_committed(201).await;
    assert_eq!(dead_letter_pollers(w.pid()), 1, "the first dead letter started the producer");
    // At least once: if the group rebalanced before the poison record's offset was committed,
    // the next owner dead-letters it again (same key, "partition:offset" of the original).
    assert!(run.metric("writer_dlq_records_total{store=\"decode\"}").await >= 1.0);
    // The dead letter is on its topic, with the reason in the `error` header.
    use rdkafka::consumer::{Consumer, StreamConsumer};
    use rdkafka::message::Headers;
    use rdkafka::Message as _;
    let c: StreamConsumer = pipeline_common::kafka::client_config(&run.ns.kafka)
        .set("group.id", format!("{dlq}-reader"))
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    c.subscribe(&[&dlq]).unwrap();
    let m = tokio::time::timeout(Duration::from_secs(30), c.recv()).await.expect("a dead letter").unwrap();
    assert_eq!(m.payload(), Some(&b"{not json"[..]));
    assert!(m.key().is_some_and(|k| k.contains(&b':')), "keyed by the original partition:offset");
    let h = m.headers().expect("headers").iter().find(|h| h.key == "error").expect("error header");
    assert!(String::from_utf8_lossy(h.value.unwrap()).contains("decode"));
    let store = m.headers().expect("headers").iter().find(|h| h.key == "store").expect("store header");
    assert_eq!(store.value, Some(&b"decode"[..]));
}

/// A batch record (an array, as the ingest writes a batch POST) with a poison item: the item
/// alone is dead-lettered, keyed `partition:offset:index` and with its id when it has one, and
/// its neighbours are stored.
#[tokio::test]
async fn a_poison_item_of_a_batch_record_costs_only_itself() {
    let _g = exclusive().await;
    let run = Run::new("poison_item").await;
    pipeline_common::kafka::ensure_topic(&run.ns.kafka, &run.ns.kafka.topic, 4).await.unwrap();
    let dlq = format!("{}.dlq", run.ns.name);
    let good = pipeline_testkit::messages(4, "pi");
    let mut items: Vec<serde_json::Value> = good.iter().map(|m| serde_json::to_value(m).unwrap()).collect();
    let mut invalid = items[0].clone();
    invalid["id"] = "pi-invalid".into();
    invalid["sent_at"] = "0000-01-01T00:00:00+00:01".into(); // parses, fails validation
    items.insert(1, invalid);
    items.insert(3, serde_json::json!({ "not": "a message" }));
    let record = serde_json::Value::Array(items).to_string().into_bytes();
    produce_raw(&run.ns.kafka, &run.ns.kafka.topic, [(b"batch".to_vec(), record)]).await;
    let _w = run.writer(&["--dlq-topic", &dlq]);
    run.assert_stored(&good.iter().map(|m| m.id.clone()).collect::<Vec<_>>()).await;
    run.wait_committed(1).await;

    use rdkafka::consumer::{Consumer, StreamConsumer};
    use rdkafka::message::Headers;
    use rdkafka::Message as _;
    let c: StreamConsumer = pipeline_common::kafka::client_config(&run.ns.kafka)
        .set("group.id", format!("{dlq}-reader"))
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    c.subscribe(&[&dlq]).unwrap();
    let mut dead = std::collections::BTreeMap::new();
    while dead.len() < 2 {
        let m = tokio::time::timeout(Duration::from_secs(30), c.recv()).await.expect("two dead letters").unwrap();
        let key = String::from_utf8_lossy(m.key().unwrap_or_default()).to_string();
        let index = key.rsplit(':').next().unwrap_or_default().to_string();
        assert_eq!(key.matches(':').count(), 2, "keyed partition:offset:index, got {key}");
        let id = m.headers().and_then(|h| h.iter().find(|h| h.key == "id").and_then(|h| h.value.map(<[u8]>::to_vec)));
        dead.insert(index, (id, m.payload().unwrap_or_default().to_vec()));
    }
    assert_eq!(dead["1"].0.as_deref(), Some(&b"pi-invalid"[..]), "the invalid message, with its id");
    assert_eq!(dead["3"], (None, br#"{"not":"a message"}"#.to_vec()), "the item that is no message");
    // At least once, as for whole records: a rebalance before the commit dead-letters them again.
    assert!(run.metric("writer_dlq_records_total{store=\"decode\"}").await >= 2.0);
}

/// Threads of `pid` that are a `FutureProducer`'s polling thread (named "producer polling
/// thread", which the kernel cuts to 15 bytes).
fn dead_letter_pollers(pid: i32) -> usize {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the writer's threads");
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == "producer pollin")
        .count()
}

/// The dead-letter producer is started by the first dead letter, not at startup: an idle
/// `FutureProducer`'s polling thread busy-waits through part of every 100 ms poll.
#[tokio::test]
async fn a_writer_without_dead_letters_runs_no_dead_letter_producer() {
    let _g = exclusive().await;
    let run = Run::new("nodlq").await;
    let ids = run.produce(200, "n").await;
    let w = run.writer(&[]);
    run.assert_stored(&ids).await;
    run.wait_committed(200).await;
    assert_eq!(dead_letter_pollers(w.pid()), 0, "no dead letter, no producer thread");
}
