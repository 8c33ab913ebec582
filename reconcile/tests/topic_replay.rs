//! `reconcile replay` against the real servers: a writer stores messages (some ids in two
//! versions, a batch request's array record, undecodable items), then MySQL loses rows and other
//! stores lose or damage others; the replay from the topic restores every store to exactly the
//! newest version of every id. Also: a dry run changes nothing, a start past some records
//! restores only those after it, a second replay writes nothing, the writers' consumer group is
//! never moved, and bad input is exit 2 without contacting anything.

use pipeline_common::digest::Digest;
use pipeline_common::kafka::{group_lag, producer_config, PartitionLag};
use pipeline_common::reconcile_report::{Answer, ErrorKind, ReplayStore, TopicReplayReport};
use pipeline_common::Message;
use pipeline_stores::Overwrite::{Older, OlderOrSame};
use pipeline_stores::{Store, StoreKind};
use pipeline_testkit::{
    assert_exact_ids, assert_same_content, exclusive, free_port, messages, wait_port, Child, Namespace,
};
use rdkafka::producer::{FutureProducer, FutureRecord};
use std::collections::{BTreeMap, HashMap};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn store(stores: &[Arc<dyn Store>], kind: StoreKind) -> &dyn Store {
    stores.iter().find(|s| s.kind() == kind).expect("store").as_ref()
}

fn replay(answer: &Answer) -> &TopicReplayReport {
    answer.topic_replay().unwrap_or_else(|| panic!("a topic replay report: {answer}"))
}

fn of<'a>(report: &'a Answer, kind: &str) -> &'a ReplayStore {
    replay(report).store(kind).expect("the store")
}

/// Each store's `to_write` by partition, and the total.
fn to_write(report: &Answer) -> HashMap<String, (BTreeMap<i32, u64>, u64)> {
    replay(report).stores.iter().map(|s| (s.store.clone(), (s.to_write.clone(), s.to_write_total))).collect()
}

/// Messages to write by partition.
fn by_partition<const N: usize>(counts: [(i32, u64); N]) -> BTreeMap<i32, u64> {
    BTreeMap::from(counts)
}

/// Produces one record to `partition`; returns its offset.
async fn send(producer: &FutureProducer, topic: &str, partition: i32, key: &str, payload: &[u8]) -> i64 {
    let record = FutureRecord::to(topic).partition(partition).key(key).payload(payload);
    let delivered = producer.send(record, Duration::from_secs(60)).await.map_err(|(e, _)| e).expect("delivered");
    assert_eq!(delivered.partition, partition);
    delivered.offset
}

async fn lag(ns: &Namespace) -> Vec<PartitionLag> {
    let k = ns.kafka.clone();
    tokio::task::spawn_blocking(move || group_lag(&k, &k.group, &k.topic)).await.expect("join").expect("group lag")
}

/// Asserts that every store holds exactly `newest`: each id once, at its newest version, with
/// that version's content.
async fn assert_newest(stores: &[Arc<dyn Store>], newest: &[Message]) {
    let ids: Vec<String> = newest.iter().map(|m| m.id.clone()).collect();
    assert_exact_ids(stores, &ids).await;
    let want: HashMap<&str, Digest> = newest.iter().map(|m| (m.id.as_str(), Digest::of_message(m))).collect();
    for s in stores {
        let held = s.fetch(&ids).await.expect("fetch");
        let wrong: Vec<&str> = held
            .iter()
            .filter(|m| want.get(m.id.as_str()) != Some(&Digest::of_message(m)))
            .map(|m| m.id.as_str())
            .collect();
        assert!(wrong.is_empty(), "{}: not the newest version: {wrong:?}", s.kind());
    }
    assert_same_content(stores).await;
}

async fn counts(stores: &[Arc<dyn Store>]) -> Vec<(StoreKind, u64)> {
    let mut c = Vec::new();
    for s in stores {
        c.push((s.kind(), s.count().await.expect("count")));
    }
    c
}

/// A Redis server of this test's own (no persistence), its namespace's Redis: the shared
/// server's test database is emptied and written by every test binary that runs at the same
/// time, which `exclusive()` (one process) cannot prevent. Stopped when dropped.
fn private_redis(ns: &mut Namespace) -> Child {
    let port = free_port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("redis-server");
    assert!(wait_port(port, 20), "the private redis-server never listened on {port}");
    ns.stores.redis.url = format!("redis://127.0.0.1:{port}/0");
    Child(child)
}

#[tokio::test]
async fn a_replay_from_the_topic_restores_what_mysql_and_the_other_stores_lost() {
    let _g = exclusive().await;
    let mut ns = Namespace::new("topicreplay").await;
    let _redis = private_redis(&mut ns);
    let stores = ns.stores().await;
    let topic = ns.kafka.topic.clone();
    let id = |i: usize| format!("lr-{i:06}");

    // 40 messages, message i alone in a record on partition i % 4; then ids 0-9 again, newer and
    // with other content, in one batch record (an array) on partition 1 with an item that is not
    // a message; and a record that is not JSON on partition 2.
    let mut first = messages(40, "lr");
    for (i, m) in first.iter_mut().enumerate() {
        m.version = 100 + i as u64;
    }
    let second: Vec<Message> = first[..10]
        .iter()
        .map(|m| Message { version: m.version + 900, body: format!("the second version of {}", m.id), ..m.clone() })
        .collect();
    let mut newest = first.clone();
    newest[..10].clone_from_slice(&second);

    let producer: FutureProducer = producer_config(&ns.kafka).create().expect("producer");
    let mut offset = Vec::new();
    for (i, m) in first.iter().enumerate() {
        offset.push(send(&producer, &topic, (i % 4) as i32, &m.id, m.to_json().as_bytes()).await);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let between = time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let batch = pipeline_common::record::encode(&second, 1 << 20);
    assert_eq!(batch.len(), 1, "one array record");
    let mut array = batch[0].clone();
    array.pop();
    array.extend_from_slice(br#",{"not":"a message"}]"#);
    send(&producer, &topic, 1, "batch", &array).await;
    send(&producer, &topic, 2, "poison", b"\xff not json").await;

    let metrics = free_port();
    let mut writer = ns.spawn(
        "writer",
        &[],
        &[("WRITER_METRICS_ADDR", format!("127.0.0.1:{metrics}")), ("WRITER_DLQ_TOPIC", format!("{}.dlq", ns.name))],
    );
    let deadline = Instant::now() + Duration::from_secs(240);
    let committed = loop {
        let l = lag(&ns).await;
        if l.iter().map(|p| p.high).sum::<i64>() == 42 && l.iter().all(|p| p.lag() == 0) {
            break l;
        }
        assert!(Instant::now() < deadline, "the writer never caught up: {l:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    writer.signal("TERM");
    assert!(writer.wait_exit(Duration::from_secs(60)).is_some_and(|s| s.success()), "the writer stopped cleanly");
    assert_newest(&stores, &newest).await;

    // The losses: ten rows of MySQL (four of them ids with two versions) and four ids of Redis;
    // MongoDB holds one id damaged (its version with other content) and one at its older version.
    // (Elasticsearch loses nothing here: see the end of the test.)
    let gone = |is: &[usize]| is.iter().map(|&i| id(i)).collect::<Vec<_>>();
    store(&stores, StoreKind::Mysql).delete(&gone(&[0, 1, 2, 3, 20, 24, 28, 32, 21, 22])).await.unwrap();
    store(&stores, StoreKind::Redis).delete(&gone(&[5, 13, 30, 39])).await.unwrap();
    let mongo = store(&stores, StoreKind::Mongo);
    let damaged = Message { body: "damaged".into(), ..second[7].clone() };
    mongo.write(&[damaged], OlderOrSame).await.unwrap();
    mongo.delete(&gone(&[9])).await.unwrap();
    mongo.write(&first[9..10], Older).await.unwrap();
    let damaged_counts = counts(&stores).await;

    // Bad input the broker has to answer: a partition the topic does not have.
    let (code, bad) = ns.reconcile(60, &["replay", "--from-offset", "7:0"]);
    assert_eq!((code, bad.error().map(|e| e.error)), (2, Some(ErrorKind::BadInput)), "{bad}");

    // A dry run says what it would write, per store and partition, and writes nothing. MySQL's
    // ids 0-3 come from the batch record on partition 1: the newest version is what is written.
    let (code, dry) = ns.reconcile(60, &["replay", "--from-offset", "earliest", "--dry-run"]);
    assert_eq!(code, 1, "something to write: {dry}");
    let want = HashMap::from([
        ("mysql".to_string(), (by_partition([(0, 4), (1, 5), (2, 1)]), 10)),
        ("redis".to_string(), (by_partition([(1, 2), (2, 1), (3, 1)]), 4)),
        ("es".to_string(), (by_partition([]), 0)),
        ("mongo".to_string(), (by_partition([(1, 2)]), 2)),
    ]);
    assert_eq!(to_write(&dry), want, "{dry}");
    assert_eq!((replay(&dry).records, replay(&dry).messages), (42, 50), "{dry}");
    assert_eq!(replay(&dry).undecodable.total, 2, "the item and the record that are not messages: {dry}");
    assert_eq!(counts(&stores).await, damaged_counts, "the dry run wrote nothing");
    assert!(mongo.fetch(&[id(7)]).await.unwrap()[0].body == "damaged", "the dry run wrote nothing");

    // From a time: only the records produced after it (the batch record and the poison).
    let (code, since) = ns.reconcile(60, &["replay", "--from-time", &between, "--stores", "mysql", "--dry-run"]);
    assert_eq!((code, replay(&since).records), (1, 2), "{since}");
    assert_eq!(to_write(&since).remove("mysql"), Some((by_partition([(1, 4)]), 4)), "{since}");

    // Up to that time: the first versions only, every partition (on partitions 0 and 3 every
    // record is older than the time, which tansu answers with offset 0, not with the end).
    let (code, until) = ns.reconcile(
        60,
        &["replay", "--from-offset", "earliest", "--to-time", &between, "--stores", "mysql", "--dry-run"],
    );
    assert_eq!((code, replay(&until).records, replay(&until).undecodable.total), (1, 40, 0), "{until}");
    let mysql = Some((by_partition([(0, 5), (1, 2), (2, 2), (3, 1)]), 10));
    assert_eq!(to_write(&until).remove("mysql"), mysql, "{until}");

    // From an offset past some records of partition 0: only ids 28 and 32 come back, not 20, 24.
    let from = format!("0:{}", offset[28]);
    let (code, part) = ns.reconcile(60, &["replay", "--from-offset", &from, "--stores", "mysql"]);
    assert_eq!(code, 0, "{part}");
    assert_eq!(to_write(&part).remove("mysql"), Some((by_partition([(0, 2)]), 2)), "{part}");
    assert_eq!(of(&part, "mysql").written, 2, "{part}");
    assert_eq!(replay(&part).partitions.len(), 1, "partition 0 only: {part}");
    let mysql = store(&stores, StoreKind::Mysql);
    let mut back: Vec<String> =
        mysql.fetch(&gone(&[20, 24, 28, 32])).await.unwrap().into_iter().map(|m| m.id).collect();
    back.sort();
    assert_eq!(back, gone(&[28, 32]), "only the records after the start were replayed");

    // The whole topic into every store: exact again, at the newest version everywhere.
    let (code, done) = ns.reconcile(60, &["replay", "--from-offset", "earliest"]);
    assert_eq!(code, 0, "{done}");
    let mut want = want;
    want.insert("mysql".into(), (by_partition([(0, 2), (1, 5), (2, 1)]), 8));
    assert_eq!(to_write(&done), want, "{done}");
    for s in &replay(&done).stores {
        assert_eq!(s.written, s.to_write_total, "{done}");
        let v = s.verify.as_ref().unwrap_or_else(|| panic!("a read-back: {done}"));
        assert_eq!(v.checked, 40, "every replayed id read back: {done}");
        for (class, c) in [("missing", &v.missing), ("older", &v.older), ("different", &v.different)] {
            assert_eq!(c.total, 0, "{class}: {done}");
        }
    }
    assert_newest(&stores, &newest).await;

    // A second replay writes nothing.
    let (code, again) = ns.reconcile(60, &["replay", "--from-offset", "earliest"]);
    assert_eq!(code, 0, "{again}");
    assert!(again.message().unwrap_or_default().starts_with("NOTHING TO DO"), "{again}");
    for s in &replay(&again).stores {
        assert_eq!((s.to_write_total, s.written), (0, 0), "{again}");
    }
    assert_newest(&stores, &newest).await;

    // Elasticsearch keeps a deleted id's tombstone, one version above the document's, for
    // `index.gc_deletes` (60 s): a write of that version right after a delete is answered 409,
    // which the store takes for "a newer version is held", and nothing is written. The read-back
    // is not fooled: the report says what the store holds, whichever way it answered.
    let es = store(&stores, StoreKind::Es);
    es.delete(&gone(&[17])).await.unwrap();
    let (code, report) = ns.reconcile(60, &["replay", "--from-offset", "1:0", "--stores", "es"]);
    let held = !es.fetch(&[id(17)]).await.unwrap().is_empty();
    let missing = of(&report, "es").verify.as_ref().map(|v| v.missing.total);
    assert_eq!((code, missing), if held { (0, Some(0)) } else { (1, Some(1)) }, "held: {held}; {report}");

    // The writers' group never moved: the replays neither joined it nor committed.
    assert_eq!(lag(&ns).await, committed, "the writers' committed offsets are as the writer left them");
}

/// Bad input is exit 2 before anything is contacted: every server's address here is a closed
/// port, where contacting one would end in exit 4 (the last command shows it does).
#[test]
fn bad_input_is_refused_before_anything_is_contacted() {
    let run = |args: &[&str]| {
        let started = Instant::now();
        let out = Command::new(pipeline_testkit::bin_path("reconcile"))
            .args(args)
            .env("KAFKA_BROKERS", "127.0.0.1:1")
            .env("MYSQL_URL", "mysql://nobody:none@127.0.0.1:1/none")
            .env("REDIS_URL", "redis://127.0.0.1:1/0")
            .env("ES_URL", "http://127.0.0.1:1")
            .env("MONGO_URL", "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=2000")
            .output()
            .expect("run reconcile");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.code(), text, started.elapsed())
    };
    let t = "2026-12-01T00:00:00Z";
    let cases: &[(&[&str], &str)] = &[
        (&["replay", "--from-offset", "x"], "--from-offset"),
        (&["replay", "--from-offset", "0:5,0:6"], "twice"),
        (&["replay", "--from-offset", "0", "--from-time", t], "--from-time"),
        (&["replay", "--to-offset", "9"], "--from-offset"),
        (&["replay", "--from-time", "yesterday"], "RFC 3339"),
        (&["replay", "--from-offset", "0:5", "--to-offset", "0:3"], "after --to-offset"),
        (&["replay", "--from-time", "2026-12-02T00:00:00Z", "--to-time", t], "after --to-time"),
        (&["replay", "--from-offset", "0", "--to-offset", "1", "--to-time", t], "--to-time"),
    ];
    for (args, says) in cases {
        let (code, text, took) = run(args);
        assert_eq!(code, Some(2), "{args:?}: {text}");
        assert!(text.contains(says), "{args:?} names what is wrong ({says}): {text}");
        assert!(took < Duration::from_secs(2), "{args:?} took {took:?}: it must not wait for any server");
    }
    let (code, text) = {
        let out = Command::new(pipeline_testkit::bin_path("reconcile"))
            .args(["--json", "replay", "--from-offset", "0:5", "--to-offset", "0:3"])
            .env("KAFKA_BROKERS", "127.0.0.1:1")
            .output()
            .expect("run reconcile");
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let answer = Answer::parse(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let error = answer.error().map(|e| e.error);
    assert_eq!((code, error), (Some(2), Some(ErrorKind::BadInput)), "JSON in --json mode: {text}");
    // The same environment with valid flags does contact the broker, and cannot reach it.
    let (code, text, _) = run(&["replay", "--from-offset", "0"]);
    assert_eq!(code, Some(4), "a closed port is unreachable: {text}");
}
