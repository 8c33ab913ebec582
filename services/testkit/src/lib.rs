//! Helpers for the integration tests of every crate. A dev-dependency only: nothing here is
//! compiled into the services.
//!
//! The tests talk to the real servers that `scripts/stack up` starts. A missing server is a
//! failed test with the server's name in the message, never a skipped one.
#![forbid(unsafe_code)]

use pipeline_common::config::KafkaArgs;
use pipeline_stores::StoreArgs;
use pipeline_stores::{Store, StoreKind};
use std::sync::Arc;
use tokio::sync::{Mutex, MutexGuard};

/// An async mutex: each `#[tokio::test]` has its own runtime, and tokio's mutex works across them.
static EXCLUSIVE: Mutex<()> = Mutex::const_new(());

/// Serialises the tests of one test binary that share Redis (its keyspace cannot be namespaced
/// without changing the `msg:` key format). Hold the guard for the whole test.
pub async fn exclusive() -> MutexGuard<'static, ()> {
    EXCLUSIVE.lock().await
}

/// Checks that every server answers a real request; panics naming each one that does not.
pub async fn require_servers() -> (StoreArgs, KafkaArgs) {
    let stores = StoreArgs::from_env();
    let kafka = KafkaArgs::from_env();
    let mut missing = Vec::new();
    match pipeline_stores::connect(&stores, &StoreKind::ALL).await {
        Ok(all) => {
            for s in all {
                if let Err(e) = s.prepare().await {
                    missing.push(format!("{} ({e})", s.kind()));
                }
            }
        }
        Err(e) => missing.push(format!("{} ({e})", e.store)),
    }
    let k = kafka.clone();
    let meta = tokio::task::spawn_blocking(move || pipeline_common::kafka::partition_count(&k, "__probe"))
        .await
        .expect("join");
    if let Err(e) = meta {
        missing.push(format!("kafka at {} ({e})", kafka.brokers));
    }
    if !missing.is_empty() {
        panic!(
            "integration servers not answering: {}. Start them with `scripts/stack up` \
             (addresses come from the environment, see .env.example; `. scripts/lib.sh` gives a \
             shell the native stack's, with its Redis password).",
            missing.join("; ")
        );
    }
    (stores, kafka)
}

/// A private namespace for one test: in every store what its fixture provides (its own MySQL
/// database, ES index, Mongo database; Redis database 1, emptied, so callers hold [`exclusive`]),
/// and its own Kafka topic and group, so tests and earlier runs never see each other's data.
pub struct Namespace {
    pub stores: StoreArgs,
    pub kafka: KafkaArgs,
    pub name: String,
}

impl Namespace {
    pub async fn new(label: &str) -> Namespace {
        let (mut stores, mut kafka) = require_servers().await;
        let name = format!("t_{label}_{}", &uuid::Uuid::now_v7().simple().to_string()[20..]);
        // Each store's fixture (services/stores/src/<store>/fixture.rs) makes its part private.
        pipeline_stores::isolate(&mut stores, &name).await.expect("a private namespace in every store");
        kafka.topic = name.clone();
        kafka.group = format!("{name}_group");
        pipeline_common::kafka::ensure_topic(&kafka, &kafka.topic, kafka.partitions).await.expect("create topic");
        Namespace { stores, kafka, name }
    }

    /// Connects to all four stores of this namespace without preparing them (a test that runs an
    /// older build's binaries lets them create the schema they know first).
    pub async fn connect_stores(&self) -> Vec<Arc<dyn Store>> {
        pipeline_stores::connect(&self.stores, &StoreKind::ALL).await.expect("connect stores")
    }

    /// Connects to all four stores of this namespace and prepares them.
    pub async fn stores(&self) -> Vec<Arc<dyn Store>> {
        let all = pipeline_stores::connect(&self.stores, &StoreKind::ALL).await.expect("connect stores");
        for s in &all {
            s.prepare().await.expect("prepare store");
        }
        all
    }
}

/// Produces messages to the namespace's topic (acks=all, lz4), keyed by id, and waits for all
/// delivery reports.
pub async fn produce(kafka: &KafkaArgs, msgs: &[pipeline_common::Message]) {
    produce_raw(kafka, &kafka.topic, msgs.iter().map(|m| (m.id.clone().into_bytes(), m.to_json().into_bytes()))).await
}

/// Produces raw key/payload pairs (for poison records) and waits for all delivery reports.
pub async fn produce_raw(kafka: &KafkaArgs, topic: &str, records: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>) {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let producer: FutureProducer =
        pipeline_common::kafka::producer_config(kafka).set("linger.ms", "5").create().expect("producer");
    let futs: Vec<_> = records
        .into_iter()
        .map(|(k, v)| {
            let p = producer.clone();
            let topic = topic.to_string();
            async move {
                p.send(FutureRecord::to(&topic).key(&k).payload(&v), std::time::Duration::from_secs(60))
                    .await
                    .map_err(|(e, _)| e)
                    .expect("delivered")
            }
        })
        .collect();
    futures::future::join_all(futs).await;
}

/// `n` valid messages with ids `<tag>-<i>`.
pub fn messages(n: usize, tag: &str) -> Vec<pipeline_common::Message> {
    let now = time::OffsetDateTime::now_utc();
    (0..n)
        .map(|i| pipeline_common::Message {
            id: format!("{tag}-{i:06}"),
            sender: format!("user-{}", i % 97),
            recipient: format!("user-{}", i % 89),
            body: format!("message {i} of {n}: {}", "lorem ipsum ".repeat(8)),
            sent_at: pipeline_common::message::normalize_sent_at(now),
            version: 1,
        })
        .collect()
}

/// The body a client posts for `m`: its fields without the version (the ingest stamps it).
pub fn request_json(m: &pipeline_common::Message) -> String {
    let sent_at = m.sent_at.format(&time::format_description::well_known::Rfc3339).expect("a valid date");
    serde_json::json!({ "id": m.id, "sender": m.sender, "recipient": m.recipient, "body": m.body, "sent_at": sent_at })
        .to_string()
}

/// Polls every store until each holds `n` messages (or the timeout passes) and returns the
/// last counts, in store order.
pub async fn wait_for_counts(stores: &[Arc<dyn Store>], n: u64, timeout: std::time::Duration) -> Vec<(StoreKind, u64)> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let mut counts = Vec::new();
        for s in stores {
            counts.push((s.kind(), s.count().await.unwrap_or(u64::MAX)));
        }
        if counts.iter().all(|(_, c)| *c == n) || std::time::Instant::now() > deadline {
            return counts;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// Asserts that every store holds exactly `expected` ids (as sets, and no id twice), and that
/// MySQL rows sit in their shard tables.
pub async fn assert_exact_ids(stores: &[Arc<dyn Store>], expected: &[String]) {
    let mut want: Vec<&String> = expected.iter().collect();
    want.sort();
    for s in stores {
        let got = s.audit().await.expect("audit");
        for sid in &got {
            if let Some(place) = sid.place {
                assert_eq!(place, pipeline_common::message::shard_of(&sid.id), "{} in wrong table", sid.id);
            }
        }
        let mut ids: Vec<&String> = got.iter().map(|s| &s.id).collect();
        ids.sort();
        let missing = want.iter().filter(|w| ids.binary_search(w).is_err()).count();
        let dup = ids.windows(2).filter(|w| w[0] == w[1]).count();
        assert!(
            missing == 0 && dup == 0 && ids.len() == want.len(),
            "{}: {} ids, want {}, {missing} missing, {dup} duplicated",
            s.kind(),
            ids.len(),
            want.len()
        );
    }
}

/// Asserts that every store holds the same content as MySQL (the first store) for every id,
/// compared by fingerprint (`pipeline_common::digest`: version, sender, recipient, body,
/// `sent_at`); returns MySQL's fingerprints by id.
pub async fn assert_same_content(
    stores: &[Arc<dyn Store>],
) -> std::collections::HashMap<String, pipeline_common::digest::Digest> {
    let mut reference = std::collections::HashMap::new();
    for (i, s) in stores.iter().enumerate() {
        let mut differ = Vec::new();
        for a in s.audit().await.expect("audit") {
            let d = a.digest.unwrap_or_else(|| panic!("{}: {} is not a message", s.kind(), a.id));
            if i == 0 {
                reference.insert(a.id, d);
            } else if reference.get(&a.id) != Some(&d) {
                differ.push(a.id);
            }
        }
        differ.sort();
        assert!(
            differ.is_empty(),
            "{}: {} ids hold other content than in MySQL, e.g. {:?}",
            s.kind(),
            differ.len(),
            &differ[..differ.len().min(5)]
        );
    }
    reference
}

/// A child process killed (SIGKILL) when dropped, so a failing test leaves nothing running.
pub struct Child(pub std::process::Child);

impl Child {
    pub fn pid(&self) -> i32 {
        self.0.id() as i32
    }
    /// Sends a signal (e.g. `libc`-free: "TERM", "KILL", "STOP", "CONT") with the kill command.
    pub fn signal(&self, sig: &str) {
        let ok = std::process::Command::new("kill").arg(format!("-{sig}")).arg(self.pid().to_string()).status();
        assert!(ok.map(|s| s.success()).unwrap_or(false), "kill -{sig} {}", self.pid());
    }
    /// Waits for the process to exit, up to `timeout`; returns its exit status.
    pub fn wait_exit(&mut self, timeout: std::time::Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(st)) = self.0.try_wait() {
                return Some(st);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// This test process's API key: a random token, and a keys file (in the temp directory) that
/// holds its hash under the name `tests`. Every ingest a test starts reads that file
/// ([`Namespace::env`], [`auth_args`]); every client sends the token ([`client`]).
pub struct ApiKey {
    pub token: String,
    pub keys_file: std::path::PathBuf,
    /// The token alone, for k6 (`INGEST_KEY_FILE`).
    pub token_file: std::path::PathBuf,
}

pub fn api_key() -> &'static ApiKey {
    static KEY: std::sync::OnceLock<ApiKey> = std::sync::OnceLock::new();
    KEY.get_or_init(|| {
        let token = format!("pk_test_{}", uuid::Uuid::now_v7().simple());
        let keys_file = std::env::temp_dir().join(format!("pipeline-test-{}.keys", std::process::id()));
        let hash = <sha2::Sha256 as sha2::Digest>::digest(token.as_bytes());
        let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
        std::fs::write(&keys_file, format!("tests sha256:{hex}\n")).expect("write the test keys file");
        let token_file = std::env::temp_dir().join(format!("pipeline-test-{}.key", std::process::id()));
        std::fs::write(&token_file, format!("{token}\n")).expect("write the test token file");
        ApiKey { token, keys_file, token_file }
    })
}

/// The arguments that give an in-process ingest the test key.
pub fn auth_args() -> Vec<String> {
    vec!["--auth-keys".into(), api_key().keys_file.display().to_string()]
}

/// An HTTP client that sends the test key with every request.
pub fn client_builder() -> reqwest::ClientBuilder {
    let mut headers = reqwest::header::HeaderMap::new();
    let value = format!("Bearer {}", api_key().token);
    headers.insert(reqwest::header::AUTHORIZATION, value.parse().expect("a header value"));
    reqwest::Client::builder().default_headers(headers)
}

pub fn client() -> reqwest::Client {
    client_builder().build().expect("HTTP client")
}

/// A free TCP port on loopback (bound and released; good enough for tests).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// Path of a workspace binary (`ingest`, `writer`, `reconcile`), built by `cargo test --workspace`.
/// `PIPELINE_BIN_DIR` points the black-box tests at other builds of the binaries (release ones,
/// or an older commit's, to watch a new test fail on the old code).
pub fn bin_path(name: &str) -> std::path::PathBuf {
    let dir = match std::env::var_os("PIPELINE_BIN_DIR") {
        Some(dir) => std::path::PathBuf::from(dir),
        None => {
            let exe = std::env::current_exe().expect("current exe");
            exe.parent().and_then(|d| d.parent()).expect("target/<profile>").to_path_buf()
        }
    };
    let p = dir.join(name);
    assert!(p.exists(), "{} not built: run `cargo build --workspace` (or `cargo test --workspace`)", p.display());
    p
}

/// The environment that points a service at this namespace.
impl Namespace {
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("KAFKA_BROKERS", self.kafka.brokers.clone()),
            ("KAFKA_TOPIC", self.kafka.topic.clone()),
            ("KAFKA_GROUP", self.kafka.group.clone()),
            ("KAFKA_PARTITIONS", self.kafka.partitions.to_string()),
            ("INGEST_AUTH", "keys".to_string()),
            ("INGEST_AUTH_KEYS", api_key().keys_file.display().to_string()),
            ("INGEST_KEY_FILE", api_key().token_file.display().to_string()),
        ]
        .into_iter()
        .chain(self.stores.env())
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// Starts a workspace binary with this namespace's environment and extra arguments.
    pub fn spawn(&self, bin: &str, args: &[&str], extra_env: &[(&str, String)]) -> Child {
        let mut cmd = std::process::Command::new(bin_path(bin));
        cmd.args(args).envs(self.env()).env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()));
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        Child(cmd.spawn().unwrap_or_else(|e| panic!("spawn {bin}: {e}")))
    }
}

/// Reads the topic from the start with a fresh group: at least `at_least` messages (or until
/// `timeout`), then on until nothing new arrives for 2 s, so extra records are seen too.
pub async fn consume_messages(
    kafka: &KafkaArgs,
    at_least: usize,
    timeout: std::time::Duration,
) -> Vec<pipeline_common::Message> {
    use rdkafka::consumer::{Consumer, StreamConsumer};
    use rdkafka::Message as _;
    let c: StreamConsumer = pipeline_common::kafka::client_config(kafka)
        .set("group.id", format!("{}-reader-{}", kafka.topic, uuid::Uuid::now_v7().simple()))
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    c.subscribe(&[&kafka.topic]).expect("subscribe");
    let deadline = std::time::Instant::now() + timeout;
    let mut out = Vec::new();
    while std::time::Instant::now() < deadline {
        let wait = if out.len() >= at_least { 2 } else { 1 };
        match tokio::time::timeout(std::time::Duration::from_secs(wait), c.recv()).await {
            Ok(Ok(m)) => {
                let d = pipeline_common::record::decode(
                    m.payload().unwrap_or_default(),
                    pipeline_common::Limits::default(),
                );
                assert!(d.bad.is_empty(), "every item a valid message: {:?}", d.bad);
                out.extend(d.messages);
            }
            Ok(Err(e)) => panic!("consume: {e}"),
            Err(_) if out.len() >= at_least => break,
            Err(_) => {}
        }
    }
    out
}

/// Sum of every sample of a metric (name, optionally with its opening labels, as a prefix of the
/// exposition line) on a service's `/metrics` at `port`.
pub async fn metric(port: u16, name_and_labels: &str) -> f64 {
    let body = reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
        .await
        .and_then(|r| r.error_for_status())
        .unwrap_or_else(|e| panic!("GET /metrics on :{port}: {e}"));
    let text = body.text().await.unwrap_or_else(|e| panic!("reading /metrics on :{port}: {e}"));
    text.lines()
        .filter(|l| l.starts_with(name_and_labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The ids of the flags of `cmd` that have no help text (`--help`/`--version` aside).
pub fn flags_without_help(cmd: &clap::Command) -> Vec<String> {
    cmd.get_arguments()
        .filter(|a| a.get_help().is_none() && !["help", "version"].contains(&a.get_id().as_str()))
        .map(|a| a.get_id().to_string())
        .collect()
}

/// The k6 binary: `K6_BIN` (scripts/test sets it to the stack's venv), else the first venv under
/// `$PIPELINE_CACHE` that has one.
pub fn k6_bin() -> String {
    if let Ok(p) = std::env::var("K6_BIN") {
        return p;
    }
    let cache = std::env::var("PIPELINE_CACHE")
        .unwrap_or_else(|_| format!("{}/.cache/pipeline", std::env::var("HOME").unwrap_or_default()));
    std::fs::read_dir(&cache)
        .ok()
        .and_then(|d| d.flatten().map(|e| e.path().join("bin/k6")).find(|p| p.exists()))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|| panic!("k6 not found: set K6_BIN or run scripts/stack up (installs it under {cache})"))
}

/// Copies the MySQL row of `id` into a second, wrong shard table of the namespace (a placement
/// error reconcile must report).
pub async fn copy_into_wrong_shard(ns: &Namespace, id: &str) {
    use pipeline_common::message::{shard_of, shard_table};
    let wrong = shard_table((shard_of(id) + 1) % 16);
    let pool = sqlx::mysql::MySqlPoolOptions::new().connect(&ns.stores.mysql.url).await.expect("mysql");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO {wrong} (id, sender, recipient, body, sent_at, version) SELECT id, sender, recipient, body, sent_at, version FROM {} WHERE id = ?",
        shard_table(shard_of(id))
    )))
    .bind(id)
    .execute(&pool)
    .await
    .expect("copy the row into a wrong shard table");
}

/// A throwaway PKI for the TLS tests, made with the openssl command in a temporary folder: a CA,
/// a server certificate it signs for `localhost` and 127.0.0.1, and a second, unrelated CA (the
/// "wrong CA" a client must refuse).
pub struct Pki {
    pub dir: std::path::PathBuf,
    pub ca: std::path::PathBuf,
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
    /// The certificate and its key in one file (stunnel's form).
    pub cert_and_key: std::path::PathBuf,
    pub other_ca: std::path::PathBuf,
}

pub fn pki() -> Pki {
    let dir = std::env::temp_dir().join(format!("pipeline-pki-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir).expect("pki dir");
    let run = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("openssl (apt: openssl)");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    for ca in ["ca", "other-ca"] {
        run(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN=pipeline test {ca}"),
        ]
        .iter()
        .copied()
        .chain(["-keyout", &format!("{ca}.key"), "-out", &format!("{ca}.pem")])
        .collect::<Vec<_>>());
    }
    std::fs::write(dir.join("san.ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n").expect("san");
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
    ]);
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "san.ext",
        "-out",
        "server.pem",
    ]);
    let both =
        [std::fs::read(dir.join("server.pem")).expect("cert"), std::fs::read(dir.join("server.key")).expect("key")]
            .concat();
    std::fs::write(dir.join("server-both.pem"), both).expect("cert and key");
    Pki {
        ca: dir.join("ca.pem"),
        cert: dir.join("server.pem"),
        key: dir.join("server.key"),
        cert_and_key: dir.join("server-both.pem"),
        other_ca: dir.join("other-ca.pem"),
        dir,
    }
}

/// Waits until something listens on `port` (loopback), at most `secs` seconds.
pub fn wait_port(port: u16, secs: u64) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    false
}
