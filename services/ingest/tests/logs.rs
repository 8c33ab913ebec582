//! What the ingest writes when its log is a file: plain text. tracing's colours were on whatever
//! stderr was, so the soak's 70-minute ingest log (1.9 GB at 1,630 requests/s, one access line
//! each) was escape codes around every field.

use pipeline_testkit::{free_port, Namespace};
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_log_written_to_a_file_has_no_colour_codes() {
    let ns = Namespace::new("logs").await;
    let port = free_port();
    // The testkit writes the service's output to a file: the case this test is about.
    let env = [("RUST_LOG", "info".to_string()), ("INGEST_LISTEN", format!("127.0.0.1:{port}"))];
    let child = ns.spawn("ingest", &[], &env);
    let deadline = Instant::now() + Duration::from_secs(30);
    let text = loop {
        let t = child.logs();
        if t.contains("listening") {
            break t;
        }
        assert!(Instant::now() < deadline, "no startup line in 30 s: {t}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    drop(child);
    assert!(!text.contains('\u{1b}'), "escape codes in a log file: {:?}", &text[..text.len().min(400)]);
    assert!(text.contains("ingest listening"), "{text}");
}
