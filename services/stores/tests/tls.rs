//! Encrypted links to the stores, against real servers with a throwaway CA: each link works with
//! TLS and the right CA, and is refused with a clear error when the CA is wrong or when
//! plaintext is tried against a TLS-only server.
//!
//! Redis: a private redis-server listening on its TLS port only. Kafka: a private tansu behind
//! stunnel, advertising the TLS port. MySQL: the stack's MariaDB, which has a certificate of the
//! stack's own CA, as a user that must use TLS. Elasticsearch: the stack's OpenSearch behind
//! stunnel.

use pipeline_stores::redis::{RedisArgs, RedisStore};
use pipeline_stores::{Audit, Backend, Overwrite, Sink};
use pipeline_testkit::{free_port, messages, pki, wait_port, Child};
use std::time::Duration;

fn redis_tls(pki: &pipeline_testkit::Pki) -> (Child, u16) {
    let port = free_port();
    let child = std::process::Command::new("redis-server")
        .args([
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--tls-auth-clients",
            "no",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--tls-cert-file")
        .arg(&pki.cert)
        .arg("--tls-key-file")
        .arg(&pki.key)
        .arg("--dir")
        .arg(&pki.dir)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("redis-server (apt: redis-server)");
    assert!(wait_port(port, 10), "redis-server on its TLS port {port}");
    (Child(child), port)
}

async fn connect(url: String, ca: Option<&std::path::Path>) -> Result<RedisStore, String> {
    let args = RedisArgs { url, url_file: None, ca_file: ca.map(|p| p.to_path_buf()) };
    match tokio::time::timeout(Duration::from_secs(15), RedisStore::connect(&args)).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err("timed out".into()),
    }
}

#[tokio::test]
async fn redis_over_tls_works_with_its_ca_and_is_refused_otherwise() {
    let pki = pki();
    let (_server, port) = redis_tls(&pki);
    let store = connect(format!("rediss://localhost:{port}/0"), Some(&pki.ca)).await.expect("TLS with the right CA");
    store.prepare().await.expect("PING over TLS");
    let batch = messages(5, "tls");
    assert!(store.write(&batch, Overwrite::Older).await.unwrap().is_empty());
    assert_eq!(store.count().await.unwrap(), 5, "written and counted over TLS");
    let wrong = connect(format!("rediss://localhost:{port}/0"), Some(&pki.other_ca)).await;
    let e = wrong.err().expect("a certificate from another CA is refused");
    assert!(e.to_lowercase().contains("certificate") || e.contains("UnknownIssuer"), "a clear error: {e}");
    let plain = connect(format!("redis://localhost:{port}/0"), None).await;
    assert!(plain.is_err(), "plaintext against a TLS-only port is refused");
}

/// stunnel on `tls`, forwarding to `plain`: TLS in front of a server that has none.
fn terminator(pki: &pipeline_testkit::Pki, tls: u16, plain: u16) -> Child {
    let conf = pki.dir.join(format!("stunnel-{tls}.conf"));
    let text = format!(
        "foreground = yes\npid =\n[tls]\naccept = 127.0.0.1:{tls}\nconnect = 127.0.0.1:{plain}\ncert = {}\n",
        pki.cert_and_key.display()
    );
    std::fs::write(&conf, text).unwrap();
    let stunnel = std::process::Command::new("stunnel4")
        .arg(&conf)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("stunnel4 (apt: stunnel4; scripts/stack installs it)");
    assert!(wait_port(tls, 10), "stunnel on {tls}");
    Child(stunnel)
}

/// A private tansu (its own SQLite file) that advertises the TLS port, and stunnel in front of
/// it: tansu has no TLS of its own, so the terminator is what clients see.
struct TlsBroker {
    _tansu: Child,
    _stunnel: Child,
    port: u16,
}

fn kafka_tls(pki: &pipeline_testkit::Pki) -> TlsBroker {
    let (plain, tls) = (free_port(), free_port());
    let cache = std::env::var("PIPELINE_CACHE")
        .unwrap_or_else(|_| format!("{}/.cache/pipeline", std::env::var("HOME").unwrap_or_default()));
    let tansu = std::process::Command::new(format!("{cache}/tansu-0.6.0/bin/tansu"))
        .args(["broker", "--storage-engine", "sqlite://tansu.db"])
        .args(["--listener-url", &format!("tcp://127.0.0.1:{plain}")])
        .args(["--advertised-listener-url", &format!("tcp://localhost:{tls}")])
        .current_dir(&pki.dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("tansu (scripts/stack up builds it)");
    let tansu = Child(tansu);
    assert!(wait_port(plain, 30), "tansu on {plain}");
    let stunnel = terminator(pki, tls, plain);
    TlsBroker { _tansu: tansu, _stunnel: stunnel, port: tls }
}

fn kafka_args(port: u16, options: &str) -> pipeline_common::config::KafkaArgs {
    use clap::Parser;
    #[derive(clap::Parser)]
    struct P {
        #[command(flatten)]
        k: pipeline_common::config::KafkaArgs,
    }
    let brokers = format!("localhost:{port}");
    P::parse_from(["t", "--kafka-brokers", &brokers, "--kafka-options", options]).k
}

#[tokio::test]
async fn kafka_over_tls_works_with_its_ca_and_is_refused_otherwise() {
    use pipeline_common::kafka::{ensure_topic, partition_count};
    let pki = pki();
    let broker = kafka_tls(&pki);
    let good = kafka_args(broker.port, &format!("security.protocol=SSL,ssl.ca.location={}", pki.ca.display()));
    ensure_topic(&good, "tls_topic", 2).await.expect("a topic over TLS");
    let k = good.clone();
    let n = tokio::task::spawn_blocking(move || partition_count(&k, "tls_topic")).await.unwrap();
    assert_eq!(n.expect("metadata over TLS"), Some(2));
    // A record produced and read back through the one client configuration every binary uses.
    use rdkafka::consumer::{Consumer, StreamConsumer};
    use rdkafka::producer::{FutureProducer, FutureRecord};
    use rdkafka::Message as _;
    let producer: FutureProducer = pipeline_common::kafka::producer_config(&good).create().unwrap();
    producer
        .send(FutureRecord::to("tls_topic").key("k").payload("over tls"), Duration::from_secs(20))
        .await
        .expect("produced");
    let consumer: StreamConsumer = pipeline_common::kafka::client_config(&good)
        .set("group.id", "tls_reader")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&["tls_topic"]).unwrap();
    let m = tokio::time::timeout(Duration::from_secs(30), consumer.recv()).await.expect("a record").unwrap();
    assert_eq!(m.payload(), Some(&b"over tls"[..]));
    for (what, options) in [
        ("another CA", format!("security.protocol=SSL,ssl.ca.location={}", pki.other_ca.display())),
        ("plaintext", String::new()),
    ] {
        let k = kafka_args(broker.port, &options);
        let got = tokio::task::spawn_blocking(move || partition_count(&k, "tls_topic")).await.unwrap();
        let e = got.expect_err(what).to_string();
        println!("{what}: {e}");
        assert!(!e.is_empty(), "{what} is refused with an error");
    }
}

/// The stack's own folder (`$STACK_DIR`, default `<checkout>/.stack`), where `scripts/stack up`
/// keeps MariaDB's CA.
fn stack_dir() -> std::path::PathBuf {
    std::env::var_os("STACK_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.stack"))
}

/// MariaDB with TLS (the stack starts it with a certificate from its own CA); `pipeline_tls`
/// is a user that must use TLS (`REQUIRE SSL`).
#[tokio::test]
async fn mysql_over_tls_works_with_its_ca_and_is_refused_otherwise() {
    use pipeline_stores::mysql::{MysqlArgs, MysqlStore};
    let ca = stack_dir().join("tls/ca.pem");
    assert!(ca.exists(), "{} (scripts/stack up makes it)", ca.display());
    let base = url::Url::parse(&pipeline_stores::StoreArgs::from_env().mysql.url).expect("MYSQL_URL");
    let url = |mode: &str, ca: &std::path::Path| {
        let mut u = base.clone();
        let _ = u.set_username("pipeline_tls");
        u.set_query(Some(&format!("ssl-mode={mode}&ssl-ca={}", ca.display())));
        u.to_string()
    };
    let connect = |u: String| async move {
        let args = MysqlArgs { url: u, url_file: None, admin_url: None, admin_url_file: None, pool: 1 };
        match MysqlStore::connect(&args).await {
            Ok(s) => sqlx::query_as::<_, (String, String)>("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
                .fetch_one(s.pool())
                .await
                .map(|(_, cipher)| cipher)
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        }
    };
    let cipher = connect(url("VERIFY_IDENTITY", &ca)).await.expect("TLS with the stack's CA");
    assert!(!cipher.is_empty(), "the session is encrypted");
    let e = connect(url("VERIFY_CA", &pki().other_ca)).await.expect_err("another CA is refused");
    println!("another CA: {e}");
    let e = connect(url("DISABLED", &ca)).await.expect_err("plaintext is refused");
    assert!(e.contains("1045") || e.contains("Access denied"), "the server refuses a TLS-only user in plaintext: {e}");
}

#[tokio::test]
async fn elasticsearch_over_tls_works_with_its_ca_and_is_refused_otherwise() {
    use pipeline_stores::es::EsStore;
    let pki = pki();
    let es = url::Url::parse(&pipeline_stores::StoreArgs::from_env().es.url).expect("ES_URL");
    let tls = free_port();
    let _stunnel = terminator(&pki, tls, es.port().unwrap_or(9200));
    let count = |scheme: &str, ca: Option<&std::path::Path>| {
        let mut args = pipeline_stores::StoreArgs::from_env().es;
        args.url = format!("{scheme}://localhost:{tls}");
        args.ca_file = ca.map(|p| p.to_path_buf());
        args.index = format!("t_tls_{tls}");
        args.timeout_ms = 5000;
        async move {
            let store: EsStore = <EsStore as Backend>::connect(&args).await.map_err(|e| e.to_string())?;
            store.prepare().await.map_err(|e| e.to_string())?;
            store.count().await.map_err(|e| e.to_string())
        }
    };
    assert_eq!(count("https", Some(&pki.ca)).await.expect("https with the right CA"), 0);
    let e = count("https", Some(&pki.other_ca)).await.expect_err("another CA is refused");
    println!("another CA: {e}");
    assert!(count("http", None).await.is_err(), "plaintext against the TLS port is refused");
}
