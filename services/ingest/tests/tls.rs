//! HTTPS at the ingest, black-box: the ingest binary spawned with `INGEST_TLS_CERT_FILE` and
//! `INGEST_TLS_KEY_FILE` (as compose and Kubernetes set them), a throwaway PKI per test
//! (`pipeline_testkit::pki`: openssl), the real broker, and a rustls client that trusts what the
//! test says and nothing else (no system roots). The admin listener stays plain HTTP, so a test
//! knows the ingest is up without TLS.
//!
//! A client that trusts the CA posts and gets 202, and the message is on the topic; plaintext HTTP
//! to the TLS port is refused and writes nothing; a client that trusts another CA fails the
//! handshake; an expired certificate, one not valid yet, a key that is not the certificate's and
//! one file without the other each stop the ingest at start, naming the problem; files replaced
//! by a pair of another CA reach new connections without a restart, and a broken pair after them
//! leaves the one in force.
//!
//! Each client connection is made with a fresh client configuration, so no TLS session is ever
//! resumed: every handshake shows the certificate the ingest serves at that moment.

use pipeline_common::kafka::group_lag;
use pipeline_testkit::{api_key, exclusive, free_port, pki, Namespace, Pki, Service};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Ingest {
    _child: Service,
    port: u16,
    admin: u16,
}

fn tls_env(cert: &Path, key: &Path) -> Vec<(&'static str, String)> {
    vec![("INGEST_TLS_CERT_FILE", cert.display().to_string()), ("INGEST_TLS_KEY_FILE", key.display().to_string())]
}

/// An ingest serving HTTPS on its API port with `cert` and `key`, once its (plain) admin
/// listener answers /healthz.
async fn ingest(ns: &Namespace, cert: &Path, key: &Path) -> Ingest {
    let (port, admin) = (free_port(), free_port());
    let mut env =
        vec![("INGEST_LISTEN", format!("127.0.0.1:{port}")), ("INGEST_ADMIN_LISTEN", format!("127.0.0.1:{admin}"))];
    env.extend(tls_env(cert, key));
    let child = ns.start("ingest", &[], &env, admin, "/healthz").await;
    Ingest { _child: child, port, admin }
}

/// A TLS client configuration that trusts the certificates of `ca` (PEM) only.
fn trusting(ca: &Path) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).expect("the CA file") {
        roots.add(cert.expect("a CA certificate")).expect("a usable CA");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

/// What one HTTPS request on a new connection got: the status, the body, and the certificate
/// the server presented (DER).
#[derive(Debug)]
struct Answer {
    status: u16,
    body: String,
    served: Vec<u8>,
}

/// POSTs `body` to `path` over HTTPS on a new connection to `localhost:port`, trusting `ca`
/// only; `Err` with rustls's or the socket's words when the handshake or the request fails.
/// Blocking (std's socket and rustls's `Stream`): run it off the runtime's threads.
fn post_https(port: u16, ca: &Path, path: &str, body: &str) -> Result<Answer, String> {
    let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
    let mut conn = rustls::ClientConnection::new(trusting(ca), name).map_err(|e| e.to_string())?;
    let mut sock = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    sock.set_read_timeout(Some(Duration::from_secs(20))).map_err(|e| e.to_string())?;
    let mut tls = rustls::Stream::new(&mut conn, &mut sock);
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        api_key().token,
        body.len()
    );
    // The first write runs the handshake: a certificate the client does not trust fails here.
    tls.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tls.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            // A peer that closes without TLS's close_notify: what arrived is the answer.
            Err(_) if !raw.is_empty() => break,
            Err(e) => return Err(e.to_string()),
        }
    }
    let served = conn.peer_certificates().and_then(|c| c.first()).map(|c| c.to_vec()).unwrap_or_default();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| format!("not HTTP: {text:?}"))?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok(Answer { status, body, served })
}

async fn post(port: u16, ca: &Path, id: &str) -> Result<Answer, String> {
    let (ca, body) = (ca.to_path_buf(), msg(id));
    tokio::task::spawn_blocking(move || post_https(port, &ca, "/v1/messages", &body)).await.expect("join")
}

fn msg(id: &str) -> String {
    json!({ "id": id, "sender": "alice", "recipient": "bob", "body": "over TLS" }).to_string()
}

fn der(cert: &Path) -> Vec<u8> {
    CertificateDer::from_pem_file(cert).expect("a PEM certificate").to_vec()
}

/// Records on the namespace's topic (the sum of its high watermarks).
async fn records_on_topic(ns: &Namespace) -> i64 {
    let k = ns.kafka.clone();
    let lag = tokio::task::spawn_blocking(move || group_lag(&k, "nobody", &k.topic)).await.expect("join");
    lag.expect("the topic's watermarks").iter().map(|p| p.high).sum()
}

#[tokio::test]
async fn a_client_that_trusts_the_ca_gets_202_and_the_message_reaches_kafka() {
    let _g = exclusive().await;
    let ns = Namespace::new("tls").await;
    let pki = pki();
    let app = ingest(&ns, &pki.cert, &pki.key).await;
    let answer = post(app.port, &pki.ca, "over-tls-1").await.expect("a client that trusts the CA");
    assert_eq!(answer.status, 202, "{}", answer.body);
    assert!(answer.body.contains("over-tls-1"), "{}", answer.body);
    assert_eq!(answer.served, der(&pki.cert), "the configured certificate is served");
    // A 202 means Kafka has it (acks=all).
    let got = pipeline_testkit::consume_messages(&ns.kafka, 1, Duration::from_secs(30)).await;
    let ids: Vec<&str> = got.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["over-tls-1"]);
    assert_eq!(got[0].body, "over TLS");
}

#[tokio::test]
async fn plaintext_http_to_the_tls_listener_is_refused_and_writes_nothing() {
    let _g = exclusive().await;
    let ns = Namespace::new("tlsplain").await;
    let pki = pki();
    let app = ingest(&ns, &pki.cert, &pki.key).await;
    // A valid request with a valid key, in plaintext, on the API port.
    let port = app.port;
    let answer = tokio::task::spawn_blocking(move || {
        let body = msg("in-plaintext");
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
        let request = format!(
            "POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            api_key().token,
            body.len()
        );
        let _ = s.write_all(request.as_bytes());
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer);
        answer
    })
    .await
    .expect("join");
    let text = String::from_utf8_lossy(&answer);
    println!("a plaintext request got {} bytes: {text:?}", answer.len());
    // Closed, a TLS alert, or at most a 400: never an HTTP success.
    let status = text.strip_prefix("HTTP/1.1 ").and_then(|s| s.get(..3)).and_then(|s| s.parse::<u16>().ok());
    assert!(status.is_none() || status == Some(400), "plaintext was answered as HTTP: {text:?}");
    // Nothing of it reached Kafka: after a request over TLS, that one message is all the topic holds.
    let ok = post(app.port, &pki.ca, "over-tls-after").await.expect("TLS still works");
    assert_eq!(ok.status, 202, "{}", ok.body);
    let got = pipeline_testkit::consume_messages(&ns.kafka, 1, Duration::from_secs(30)).await;
    assert_eq!(got.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), ["over-tls-after"]);
    assert_eq!(records_on_topic(&ns).await, 1, "only the request over TLS was produced");
}

#[tokio::test]
async fn a_client_that_does_not_trust_the_ca_fails_the_handshake() {
    let _g = exclusive().await;
    let ns = Namespace::new("tlsca").await;
    let pki = pki();
    let app = ingest(&ns, &pki.cert, &pki.key).await;
    let e = post(app.port, &pki.other_ca, "untrusted").await.expect_err("a handshake refused by the client");
    assert!(e.contains("UnknownIssuer"), "refused for its issuer: {e}");
    // The ingest is fine and nothing was written.
    assert_eq!(post(app.port, &pki.ca, "trusted").await.map(|a| a.status), Ok(202));
    let got = pipeline_testkit::consume_messages(&ns.kafka, 1, Duration::from_secs(30)).await;
    assert_eq!(got.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), ["trusted"]);
}

/// Runs the ingest with `env` and expects it to exit non-zero at start; returns its standard
/// error. No servers are needed: the TLS files are checked before anything else.
fn refused_at_start(env: &[(&str, String)]) -> String {
    let mut all = vec![
        ("INGEST_LISTEN", "127.0.0.1:0".to_string()),
        ("INGEST_AUTH_KEYS", api_key().keys_file.display().to_string()),
        ("KAFKA_BROKERS", "127.0.0.1:9".to_string()),
        ("RUST_LOG", "warn".to_string()),
    ];
    all.extend(env.iter().cloned());
    let mut child = Service::launch("ingest", &[], &all);
    let status = child.wait_exit(Duration::from_secs(30));
    let stderr = child.logs();
    match status {
        Some(st) => assert!(!st.success(), "the ingest started: {stderr}"),
        None => panic!("the ingest did not stop within 30 s: it took the files ({stderr})"),
    }
    stderr
}

/// openssl in `dir`, panicking with its words when it fails.
fn openssl(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("openssl").args(args).current_dir(dir).output().expect("openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A certificate for localhost with the key of `pki`'s server, signed by `pki`'s CA, valid from
/// `start` to `end` (openssl's `YYYYMMDDHHMMSSZ`): `openssl ca` is the openssl 3.0 command that
/// takes both dates.
fn dated_cert(pki: &Pki, name: &str, start: &str, end: &str) -> PathBuf {
    let dir = pki.dir.join(name);
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(
        dir.join("ca.cnf"),
        "[ca]\ndefault_ca = lab\n[lab]\ndatabase = index.txt\nnew_certs_dir = .\nserial = serial\n\
         default_md = sha256\npolicy = any\n[any]\ncommonName = supplied\n\
         [server]\nsubjectAltName = DNS:localhost,IP:127.0.0.1\n",
    )
    .expect("config");
    std::fs::write(dir.join("index.txt"), "").expect("index");
    std::fs::write(dir.join("serial"), "01\n").expect("serial");
    let key = pki.key.display().to_string();
    openssl(&dir, &["req", "-new", "-key", &key, "-subj", "/CN=localhost", "-out", "server.csr"]);
    let (ca, ca_key) = (pki.ca.display().to_string(), pki.dir.join("ca.key").display().to_string());
    openssl(
        &dir,
        &[
            "ca",
            "-batch",
            "-config",
            "ca.cnf",
            "-cert",
            &ca,
            "-keyfile",
            &ca_key,
            "-in",
            "server.csr",
            "-out",
            "server.pem",
            "-startdate",
            start,
            "-enddate",
            end,
            "-extensions",
            "server",
            "-notext",
        ],
    );
    dir.join("server.pem")
}

#[test]
fn an_expired_or_not_yet_valid_certificate_stops_the_ingest_at_start() {
    let pki = pki();
    let expired = dated_cert(&pki, "expired", "20200101000000Z", "20200102000000Z");
    let e = refused_at_start(&tls_env(&expired, &pki.key));
    assert!(e.contains(&expired.display().to_string()), "names the file: {e}");
    assert!(e.contains("expired at 2020-01-02T00:00:00Z"), "says it expired, and when: {e}");
    let early = dated_cert(&pki, "early", "21000101000000Z", "21000102000000Z");
    let e = refused_at_start(&tls_env(&early, &pki.key));
    assert!(e.contains(&early.display().to_string()) && e.contains("is not valid before 2100-01-01"), "{e}");
}

#[test]
fn a_key_that_is_not_the_certificates_stops_the_ingest_at_start() {
    let (pki, other) = (pki(), pki());
    let e = refused_at_start(&tls_env(&pki.cert, &other.key));
    assert!(e.contains(&other.key.display().to_string()), "names the key file: {e}");
    assert!(e.contains("the key does not match the certificate of"), "{e}");
    // A file with no certificate, and one that cannot be read, likewise.
    let e = refused_at_start(&tls_env(&pki.key, &pki.key));
    assert!(e.contains("holds no certificate"), "{e}");
    let e = refused_at_start(&tls_env(&pki.dir.join("absent.pem"), &pki.key));
    assert!(e.contains("absent.pem: cannot read it"), "{e}");
}

#[test]
fn one_tls_file_without_the_other_is_refused_at_start() {
    let pki = pki();
    let e = refused_at_start(&[("INGEST_TLS_CERT_FILE", pki.cert.display().to_string())]);
    assert!(e.contains("--tls-key-file"), "names the missing one: {e}");
    let e = refused_at_start(&[("INGEST_TLS_KEY_FILE", pki.key.display().to_string())]);
    assert!(e.contains("--tls-cert-file"), "names the missing one: {e}");
}

#[tokio::test]
async fn replaced_files_reach_new_connections_without_a_restart() {
    let _g = exclusive().await;
    let ns = Namespace::new("tlsrot").await;
    let (a, b) = (pki(), pki());
    // The files the ingest is told to read, as a secret volume holds them.
    let live = a.dir.join("live");
    std::fs::create_dir_all(&live).expect("dir");
    let (cert, key) = (live.join("ingest.crt"), live.join("ingest.key"));
    // Each file replaced whole (written beside it, then renamed), key first: the ingest sees the
    // pair half-replaced for a moment, as it would from an operator's two `cp`s.
    let replace = |from: &Path, to: &Path| {
        let tmp = to.with_extension("new");
        std::fs::copy(from, &tmp).expect("copy");
        std::fs::rename(&tmp, to).expect("rename");
    };
    replace(&a.key, &key);
    replace(&a.cert, &cert);
    let app = ingest(&ns, &cert, &key).await;
    let first = post(app.port, &a.ca, "under-a").await.expect("a's CA is trusted");
    assert_eq!((first.status, &first.served), (202, &der(&a.cert)));
    let e = post(app.port, &b.ca, "under-a-untrusted").await.expect_err("b's CA does not sign a's certificate");
    // Both throwaway CAs have one name: rustls finds b's CA by name, then its signature fails.
    assert!(e.contains("invalid peer certificate"), "{e}");

    replace(&b.key, &key);
    replace(&b.cert, &cert);
    let deadline = Instant::now() + Duration::from_secs(20);
    let second = loop {
        match post(app.port, &b.ca, "under-b").await {
            Ok(answer) => break answer,
            Err(e) => assert!(Instant::now() < deadline, "b's certificate never served: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!((second.status, &second.served), (202, &der(&b.cert)), "{}", second.body);
    let e = post(app.port, &a.ca, "under-b-untrusted").await.expect_err("a's certificate is gone");
    assert!(e.contains("invalid peer certificate"), "{e}");

    // A broken pair is refused and b's stays: a's certificate with b's key.
    replace(&a.cert, &cert);
    let metrics = format!("http://127.0.0.1:{}/metrics", app.admin);
    let refused = r#"ingest_tls_reloads_total{result="refused"}"#;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = reqwest::get(&metrics).await.expect("metrics").text().await.expect("text");
        if text.contains(refused) {
            assert!(text.contains(r#"ingest_tls_reloads_total{result="ok"} 1"#), "{text}");
            break;
        }
        assert!(Instant::now() < deadline, "the mismatched pair was never looked at: {text}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let third = post(app.port, &b.ca, "still-b").await.expect("b's pair in force");
    assert_eq!((third.status, &third.served), (202, &der(&b.cert)));
    let mut got: Vec<String> = pipeline_testkit::consume_messages(&ns.kafka, 3, Duration::from_secs(30))
        .await
        .into_iter()
        .map(|m| m.id)
        .collect();
    got.sort();
    assert_eq!(got, ["still-b", "under-a", "under-b"], "the refused handshakes wrote nothing");
}
