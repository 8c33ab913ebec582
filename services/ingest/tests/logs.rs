//! What the ingest writes when its log is a file: plain text. tracing's colours were on whatever
//! stderr was, so the soak's 70-minute ingest log (1.9 GB at 1,630 requests/s, one access line
//! each) was escape codes around every field.

use pipeline_testkit::{free_port, Namespace};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_log_written_to_a_file_has_no_colour_codes() {
    let ns = Namespace::new("logs").await;
    let port = free_port();
    let path = std::env::temp_dir().join(format!("pipeline-ingest-log-{port}.log"));
    let file = std::fs::File::create(&path).expect("a log file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ingest"))
        .envs(ns.env())
        .env("RUST_LOG", "info")
        .env("INGEST_LISTEN", format!("127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .expect("spawn ingest");
    let deadline = Instant::now() + Duration::from_secs(30);
    let text = loop {
        let t = std::fs::read_to_string(&path).unwrap_or_default();
        if t.contains("listening") {
            break t;
        }
        assert!(Instant::now() < deadline, "no startup line in 30 s: {t}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(&path);
    assert!(!text.contains('\u{1b}'), "escape codes in a log file: {:?}", &text[..text.len().min(400)]);
    assert!(text.contains("ingest listening"), "{text}");
}
