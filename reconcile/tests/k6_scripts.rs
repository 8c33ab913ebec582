//! The k6 scripts without the pipeline: their settings (`k6 inspect`), and their id logs against
//! a fake ingest that answers 202, 503 and 504 in turn, read back with `reconcile ids`.

use pipeline_common::reconcile_report::Answer;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

fn inspect(script: &str, env: &[(&str, &str)]) -> Value {
    let mut cmd = Command::new(pipeline_testkit::k6_bin());
    cmd.current_dir(ROOT).arg("inspect");
    for (k, v) in env {
        cmd.args(["-e", &format!("{k}={v}")]);
    }
    let out = cmd.arg(script).output().expect("run k6 inspect");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("k6 inspect prints JSON")
}

#[test]
fn durations_are_parsed_and_defaults_shared() {
    let o = inspect("k6/closed-loop.js", &[("WARMUP", "1m"), ("WARMUP_ROUNDS", "2"), ("DURATION", "90s")]);
    let s = &o["scenarios"];
    assert_eq!(s["warmup_2"]["startTime"], "1m1s", "WARMUP=1m is a minute, not a second");
    assert_eq!(s["measured"]["startTime"], "2m7s");
    assert_eq!(s["measured"]["duration"], "1m30s");
    for script in ["k6/closed-loop.js", "k6/open-loop.js", "k6/batch.js"] {
        let o = inspect(script, &[]);
        assert_eq!(o["scenarios"]["measured"]["duration"], "1m0s", "{script}: DURATION defaults to 60s everywhere");
        let stop = o["scenarios"]["measured"]["gracefulStop"].as_str().unwrap();
        assert!(stop == "15s" || stop == "35s", "{script}: graceful stop {stop} outlasts the request timeout");
    }
}

/// A fake ingest: `/healthz`, and POSTs answered 202, 202, 503, 504, 202... in turn (the 504
/// carries the ids, as the real one's does).
fn fake_ingest() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let n = Arc::new(AtomicU64::new(0));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let n = n.clone();
            std::thread::spawn(move || serve(stream, &n));
        }
    });
    port
}

fn serve(stream: TcpStream, n: &AtomicU64) {
    let mut r = BufReader::new(stream.try_clone().unwrap());
    let mut w = stream;
    loop {
        let (mut head, mut line, mut len) = (String::new(), String::new(), 0usize);
        loop {
            line.clear();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
            if line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        let mut body = vec![0; len];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        let (status, reply) = if head.starts_with("GET") {
            ("200 OK", r#"{"boot_id":"fake"}"#.to_string())
        } else {
            match n.fetch_add(1, Ordering::Relaxed) % 4 {
                2 => ("503 Service Unavailable", r#"{"error":"ring_full"}"#.to_string()),
                3 => ("504 Gateway Timeout", r#"{"error":"uncertain","detail":"fake","ids":[]}"#.to_string()),
                _ => ("202 Accepted", "{}".to_string()),
            }
        };
        let resp = format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{reply}",
            reply.len()
        );
        if w.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}

#[test]
fn every_script_logs_its_ids_and_the_summary_names_the_log() {
    let port = fake_ingest();
    let dir = std::env::temp_dir().join(format!("k6-scripts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (script, env) in [
        ("closed-loop", vec![("VUS", "3"), ("WARMUP_ROUNDS", "1"), ("WARMUP", "1s")]),
        ("open-loop", vec![("RATE", "50"), ("PRE_VUS", "2")]),
        ("batch", vec![("VUS", "2"), ("BATCH", "5")]),
    ] {
        let summary = dir.join(format!("{script}.json"));
        let log = dir.join(format!("{script}.ids"));
        let mut cmd = Command::new(pipeline_testkit::k6_bin());
        cmd.current_dir(ROOT)
            .args(["run", "-q", &format!("k6/{script}.js")])
            .env("K6_NO_USAGE_REPORT", "true")
            .env("K6_CONSOLE_OUTPUT", &log)
            .env("K6_LOG_FORMAT", "raw")
            .env("INGEST_URL", format!("http://127.0.0.1:{port}"))
            .env("SUMMARY_FILE", &summary)
            .env("DURATION", "2s");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("run k6");
        // The thresholds fail (a quarter of the answers are errors): k6 exits 99, the summary is written.
        assert!(summary.exists(), "{script}: {}", String::from_utf8_lossy(&out.stderr));
        let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
        assert_eq!(s["script"], script);
        assert_eq!(s["measured"]["seconds"], 2, "{script}: rates divide by the real DURATION");
        assert_eq!(s["ids"]["file"], log.to_str().unwrap(), "{s}");
        let (a, u, r) =
            (s["accepted"].as_u64().unwrap(), s["uncertain"].as_u64().unwrap(), s["refused"].as_u64().unwrap());
        assert!(a > 0 && u > 0 && r > 0, "{script}: {s}");

        let out = Command::new(env!("CARGO_BIN_EXE_reconcile"))
            .args(["ids", summary.to_str().unwrap(), "--json", "--write"])
            .arg(dir.join(script))
            .output()
            .unwrap();
        assert!(out.status.success(), "{script}: {}", String::from_utf8_lossy(&out.stdout));
        let got = Answer::parse(&String::from_utf8_lossy(&out.stdout)).unwrap();
        let got = got.ids().unwrap_or_else(|| panic!("an ids report: {got}")).ids;
        assert_eq!([got.accepted, got.uncertain, got.refused], [a, u, r]);
        let lines = std::fs::read_to_string(dir.join(format!("{script}.accepted.ids"))).unwrap();
        assert_eq!(lines.lines().count() as u64, a);
    }
}
