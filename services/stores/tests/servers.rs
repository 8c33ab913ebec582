//! Each real server answers a round trip through the crate the services use: every store writes
//! a batch, writes it again (idempotent), counts, audits ids and resets; Kafka produces and
//! consumes a record; the migrations create the 16 shard tables.

use pipeline_common::kafka::{client_config, ensure_topic, group_lag, producer_config};
use pipeline_common::message::{shard_of, shard_table, Limits, NewMessage, SHARDS};
use pipeline_common::Message;
use pipeline_stores::mysql::MysqlStore;
use pipeline_stores::redis::{RedisArgs, RedisStore};
use pipeline_stores::Overwrite::Older;
use pipeline_stores::StoreKind;
use pipeline_stores::{Audit, Backend, Sink};
use pipeline_testkit::{exclusive, Namespace};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::Message as _;
use std::time::Duration;

fn messages(n: usize, tag: &str) -> Vec<Message> {
    (0..n)
        .map(|i| {
            NewMessage {
                id: Some(format!("{tag}-{i:05}")),
                sender: format!("sender-{i}"),
                recipient: "recipient-ü".into(),
                body: format!("body {i} ✓"),
                sent_at: Some("2026-11-29T10:00:00.123456Z".into()),
            }
            .into_message(Limits::default(), time::OffsetDateTime::now_utc(), 1000 + i as u64)
            .unwrap()
        })
        .collect()
}

#[tokio::test]
async fn every_store_round_trips_idempotently() {
    let _g = exclusive().await;
    let ns = Namespace::new("stores").await;
    let batch = messages(300, "rt");
    for store in ns.stores().await {
        let kind = store.kind();
        assert!(store.write(&batch, Older).await.unwrap().is_empty(), "{kind}: nothing rejected");
        store.write(&batch[..100], Older).await.unwrap(); // redelivery of a part
        assert_eq!(store.count().await.unwrap(), 300, "{kind}: exactly one copy each");
        let mut ids: Vec<String> = store.audit("").await.unwrap().into_iter().map(|s| s.id).collect();
        ids.sort();
        assert_eq!(ids, batch.iter().map(|m| m.id.clone()).collect::<Vec<_>>(), "{kind}: the same ids");
        store.reset().await.unwrap();
        assert_eq!(store.count().await.unwrap(), 0, "{kind}: empty after reset");
        store.write(&batch[..5], Older).await.unwrap();
        assert_eq!(store.count().await.unwrap(), 5, "{kind}: usable after reset");
    }
}

/// `audit(prefix)` lists exactly the ids that start with the prefix, in every store: `_` is a
/// LIKE wildcard in MySQL and case must count, so `p_1-` must not bring `pX1-` or `P_1-`.
#[tokio::test]
async fn every_store_audits_by_exact_prefix() {
    let _g = exclusive().await;
    let ns = Namespace::new("prefix").await;
    let batch: Vec<Message> = ["p_1", "pX1", "P_1", "p_10"].iter().flat_map(|tag| messages(40, tag)).collect();
    let want: Vec<String> = messages(40, "p_1").into_iter().map(|m| m.id).collect();
    for store in ns.stores().await {
        let kind = store.kind();
        assert!(store.write(&batch, Older).await.unwrap().is_empty(), "{kind}: nothing rejected");
        let mut ids: Vec<String> = store.audit("p_1-").await.unwrap().into_iter().map(|s| s.id).collect();
        ids.sort();
        assert_eq!(ids, want, "{kind}: exactly the ids starting p_1-");
        assert_eq!(store.audit("").await.unwrap().len(), batch.len(), "{kind}: \"\" is every id");
        assert!(store.audit("zz").await.unwrap().is_empty(), "{kind}: none start zz");
    }
}

#[tokio::test]
async fn migrations_create_sixteen_tables_and_rows_land_in_their_shard() {
    let _g = exclusive().await;
    let ns = Namespace::new("mig").await;
    let store = MysqlStore::connect(&ns.stores.mysql).await.unwrap();
    use pipeline_stores::Sink;
    store.prepare().await.unwrap();
    store.prepare().await.unwrap(); // idempotent
    let tables: Vec<(String,)> = sqlx::query_as(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE 'messages\\_%' ORDER BY 1",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    let expected: Vec<String> = (0..SHARDS).map(shard_table).collect();
    assert_eq!(tables.into_iter().map(|t| t.0).collect::<Vec<_>>(), expected);
    let batch = messages(64, "sh");
    store.write(&batch, Older).await.unwrap();
    for m in &batch {
        // MySQL's own CRC32 agrees with shard_of, so placement can be checked in SQL.
        let (crc,): (u64,) = sqlx::query_as("SELECT CRC32(?) % 16").bind(&m.id).fetch_one(store.pool()).await.unwrap();
        assert_eq!(crc as u32, shard_of(&m.id));
    }
    for (table, n) in store.count_per_table().await.unwrap() {
        let want = batch.iter().filter(|m| shard_table(m.shard()) == table).count() as u64;
        assert_eq!(n, want, "{table}");
    }
    let (sent_at,): (time::PrimitiveDateTime,) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT sent_at FROM {} WHERE id = ?",
        shard_table(batch[0].shard())
    )))
    .bind(&batch[0].id)
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!(sent_at.assume_utc(), batch[0].sent_at, "milliseconds survive (the edge keeps no more)");
}

/// Writers (and test processes) started together on a new database migrate it together: each
/// must wait for the one that runs the migrations, not stop on a migration it sees half applied.
/// sqlx's own lock is `GET_LOCK(name, -1)`, which MariaDB answers at once with NULL.
#[tokio::test]
async fn processes_that_migrate_a_new_database_at_once_all_succeed() {
    use pipeline_stores::Sink;
    let ns = Namespace::new("migrace").await;
    let mut stores = Vec::new();
    for _ in 0..4 {
        stores.push(MysqlStore::connect(&ns.stores.mysql).await.expect("connect"));
    }
    let results = futures::future::join_all(stores.iter().map(|s| s.prepare())).await;
    let failed: Vec<String> = results.iter().filter_map(|r| r.as_ref().err()).map(ToString::to_string).collect();
    assert!(failed.is_empty(), "{} of 4 concurrent migrations failed: {failed:?}", failed.len());
}

#[tokio::test]
async fn kafka_produces_and_consumes_with_lz4() {
    let _g = exclusive().await;
    let ns = Namespace::new("kafka").await;
    let k = &ns.kafka;
    ensure_topic(k, &k.topic, 4).await.unwrap();
    ensure_topic(k, &k.topic, 4).await.unwrap(); // idempotent
    let producer: FutureProducer = producer_config(k).create().unwrap();
    let m = &messages(1, "k")[0];
    let payload = m.to_json();
    producer.send(FutureRecord::to(&k.topic).key(&m.id).payload(&payload), Duration::from_secs(10)).await.unwrap();
    let consumer: StreamConsumer = client_config(k)
        .set("group.id", &k.group)
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    consumer.subscribe(&[&k.topic]).unwrap();
    let got =
        tokio::time::timeout(Duration::from_secs(30), consumer.recv()).await.expect("a record within 30 s").unwrap();
    assert_eq!(Message::decode(got.payload().unwrap(), Limits::default()).unwrap(), *m);
    consumer.commit_message(&got, rdkafka::consumer::CommitMode::Sync).unwrap();
    let (kk, t, g) = (k.clone(), k.topic.clone(), k.group.clone());
    let lag = tokio::task::spawn_blocking(move || group_lag(&kk, &g, &t)).await.unwrap().unwrap();
    assert_eq!(lag.len(), 4);
    assert_eq!(lag.iter().map(|p| p.lag()).sum::<i64>(), 0, "{lag:?}");
    assert_eq!(lag.iter().map(|p| p.high).sum::<i64>(), 1);
    assert_eq!(StoreKind::ALL.len(), 4);
}

#[tokio::test]
async fn opensearch_index_gets_the_configured_refresh_interval() {
    let _g = exclusive().await;
    let mut ns = Namespace::new("esrefresh").await;
    ns.stores.es.refresh_interval = "7s".into();
    let store = pipeline_stores::es::EsStore::connect(&ns.stores.es).await.unwrap();
    use pipeline_stores::{Audit, Sink};
    store.reset().await.unwrap(); // deletes and creates the index with the settings
    let url = format!("{}/{}/_settings", ns.stores.es.url, ns.stores.es.index);
    let settings: serde_json::Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
    let got = &settings[&ns.stores.es.index]["settings"]["index"]["refresh_interval"];
    assert_eq!(got, "7s", "{settings}");
    // Written records count at once: count refreshes first, whatever the interval.
    store.write(&messages(3, "esr"), Older).await.unwrap();
    assert_eq!(store.count().await.unwrap(), 3);
}

/// A MongoDB document is the message, field for field, with `sent_at` a BSON date (to the
/// millisecond, BSON's precision and the edge's), the id as `_id` and the version an int64.
#[tokio::test]
async fn a_mongo_document_is_the_message_with_a_bson_date() {
    use mongodb::bson::{doc, Bson, Document};
    use pipeline_stores::mongo::MongoStore;
    use pipeline_stores::Sink;
    let _g = exclusive().await;
    let ns = Namespace::new("mdoc").await;
    let args = &ns.stores.mongo;
    let store = MongoStore::connect(args).await.unwrap();
    let batch = messages(3, "md");
    assert!(store.write(&batch, Older).await.unwrap().is_empty());
    let client = mongodb::Client::with_uri_str(&args.url).await.unwrap();
    let coll = client.database(&args.db).collection::<Document>(&args.collection);
    let m = &batch[1];
    let mut d = coll.find_one(doc! { "_id": &m.id }).await.unwrap().expect("the document");
    // An int64 (nx-27017 hands small ones back as int32).
    let version = d.remove("version").and_then(|v| v.as_i64().or(v.as_i32().map(i64::from)));
    assert_eq!(version, Some(m.version as i64));
    let millis = (m.sent_at.unix_timestamp_nanos() / 1_000_000) as i64;
    let want = doc! {
        "_id": &m.id, "sender": &m.sender, "recipient": &m.recipient, "body": &m.body,
        "sent_at": Bson::DateTime(mongodb::bson::DateTime::from_millis(millis)),
    };
    assert_eq!(d, want);
}

/// Mongo's audit reads the collection through a cursor of several batches: every document comes
/// back once, and a document whose `_id` is not a string (not ours) is reported too.
#[tokio::test]
async fn the_mongo_audit_reads_every_document_once() {
    use mongodb::bson::{doc, oid::ObjectId, Document};
    use pipeline_stores::mongo::MongoStore;
    use pipeline_stores::{Audit, Sink};
    let _g = exclusive().await;
    let ns = Namespace::new("mpage").await;
    let args = &ns.stores.mongo;
    let store = MongoStore::connect(args).await.unwrap();
    store.prepare().await.unwrap();
    store.reset().await.unwrap();
    let batch = messages(23_456, "mp");
    for part in batch.chunks(2_000) {
        assert!(store.write(part, Older).await.unwrap().is_empty());
    }
    let want: Vec<String> = batch.iter().map(|m| m.id.clone()).collect();
    let audited = store.audit("").await.unwrap();
    let mut ids: Vec<String> = audited.iter().map(|a| a.id.clone()).collect();
    ids.sort();
    assert_eq!(ids.len(), want.len(), "every document once");
    assert_eq!(ids, want);
    assert!(audited.iter().all(|a| a.digest.is_some()), "every document read as a message");
    let client = mongodb::Client::with_uri_str(&args.url).await.unwrap();
    let coll = client.database(&args.db).collection::<Document>(&args.collection);
    let foreign = ObjectId::new();
    coll.insert_one(doc! { "_id": foreign, "note": "not ours" }).await.unwrap();
    let audited = store.audit("").await.unwrap();
    assert_eq!(audited.len(), want.len() + 1, "the foreign document is reported too");
    let odd: Vec<_> = audited.iter().filter(|a| a.digest.is_none()).collect();
    assert_eq!(odd.len(), 1, "and only it is not a message");
    store.reset().await.unwrap();
}

/// A Redis user that may run every command but SCAN (`ACL SETUSER`), for the database `url`
/// names: a store connected as it fails loudly (NoPerm) on any SCAN, whoever else uses the server.
async fn redis_without_scan(conn: &mut redis::aio::MultiplexedConnection, url: &str) -> RedisArgs {
    let (user, pass) = ("t-no-scan", "t-no-scan-pass");
    redis::cmd("ACL")
        .arg(&["SETUSER", user, "reset", "on", &format!(">{pass}"), "~*", "&*", "+@all", "-scan"][..])
        .query_async::<()>(conn)
        .await
        .unwrap();
    let mut url = url::Url::parse(url).unwrap();
    url.set_username(user).unwrap();
    url.set_password(Some(pass)).unwrap();
    RedisArgs { url: url.to_string(), url_file: None, ca_file: None }
}

/// Redis counts and audits from its id index, never with a SCAN (which walks the whole keyspace
/// on the server: 9.4 s for one round's prefix at five million messages): a store connected as a
/// user that may not SCAN counts, audits, deletes and resets. A Redis written before the index,
/// or flushed under a writer, is still counted exactly (by SCAN) until `prepare` rebuilds it.
#[tokio::test]
async fn redis_counts_and_audits_from_its_index_without_a_scan() {
    let _g = exclusive().await;
    let ns = Namespace::new("ridx").await;
    let store = RedisStore::connect(&ns.stores.redis).await.unwrap();
    let mut conn =
        redis::Client::open(ns.stores.redis.url.as_str()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let no_scan = RedisStore::connect(&redis_without_scan(&mut conn, &ns.stores.redis.url).await).await.unwrap();
    // Keys as a writer from before the index wrote them: plain SETs, no index.
    for m in messages(3, "old") {
        redis::cmd("SET").arg(format!("msg:{}", m.id)).arg(m.to_json()).query_async::<()>(&mut conn).await.unwrap();
    }
    assert_eq!(store.count().await.unwrap(), 3, "no index yet: counted by SCAN");
    let refused = no_scan.count().await.expect_err("without the index a count needs SCAN");
    assert!(refused.to_string().contains("permissions to run the 'scan' command"), "{refused}");
    store.prepare().await.unwrap();

    let batch = messages(1500, "rt"); // more than one page of the index (1,000)
    no_scan.write(&batch, Older).await.unwrap();
    no_scan.write(&batch[..200], Older).await.unwrap(); // a redelivery adds nothing
    let mut newer = batch[7].clone();
    newer.version += 1;
    newer.body = "a newer version".into();
    no_scan.write(&[newer.clone()], Older).await.unwrap();
    assert_eq!(no_scan.count().await.unwrap(), 1503);
    let mut ids: Vec<String> = no_scan.audit("rt-").await.unwrap().into_iter().map(|a| a.id).collect();
    ids.sort();
    assert_eq!(ids, batch.iter().map(|m| m.id.clone()).collect::<Vec<_>>(), "exactly the rt- ids, once each");
    assert_eq!(no_scan.audit("old-").await.unwrap().len(), 3);
    assert_eq!(no_scan.audit("").await.unwrap().len(), 1503);
    let tail = no_scan.audit("rt-0149").await.unwrap();
    assert_eq!(tail.len(), 10);
    assert!(tail.iter().all(|a| a.id.starts_with("rt-0149")));
    no_scan.delete(&[batch[0].id.clone(), "never-written".into()]).await.unwrap();
    assert_eq!(no_scan.count().await.unwrap(), 1502, "a delete leaves the index");
    assert_eq!(no_scan.fetch(&[newer.id.clone()]).await.unwrap(), vec![newer], "the newer version is held");

    // A key the index does not name (a writer from before it, still running): not trusted.
    redis::cmd("SET").arg("msg:stray").arg("{}").query_async::<()>(&mut conn).await.unwrap();
    assert_eq!(store.count().await.unwrap(), 1503, "counted by SCAN once the index is not whole");
    store.prepare().await.unwrap();
    assert_eq!(no_scan.count().await.unwrap(), 1503, "rebuilt by prepare");

    store.reset().await.unwrap();
    assert_eq!(no_scan.count().await.unwrap(), 0, "empty after reset, and the index trusted");
    no_scan.write(&batch[..5], Older).await.unwrap();
    assert_eq!(no_scan.count().await.unwrap(), 5);

    // Flushed under a writer: the keys written next are counted by SCAN until prepare rebuilds.
    redis::cmd("FLUSHDB").query_async::<()>(&mut conn).await.unwrap();
    store.write(&batch[..4], Older).await.unwrap();
    assert_eq!(store.count().await.unwrap(), 4, "flushed: counted by SCAN");
    store.prepare().await.unwrap();
    assert_eq!(no_scan.count().await.unwrap(), 4);
    assert_eq!(no_scan.audit("").await.unwrap().len(), 4);
    redis::cmd("ACL").arg(&["DELUSER", "t-no-scan"][..]).query_async::<()>(&mut conn).await.unwrap();
}
