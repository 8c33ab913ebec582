//! Topic creation against the real broker (`scripts/stack up`).

use pipeline_common::config::KafkaArgs;
use pipeline_common::kafka::{ensure_topic, partition_count};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// Forwards every connection on `listener` to `target`, byte for byte.
async fn forward(listener: TcpListener, target: String) {
    while let Ok((mut inbound, _)) = listener.accept().await {
        let target = target.clone();
        tokio::spawn(async move {
            if let Ok(mut outbound) = TcpStream::connect(&target).await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

/// A writer started while the broker is busy or still starting (seen under chaos load: the
/// writer exited with "creating the dead-letter topic: OperationTimedOut") must wait for it
/// instead of failing its start. The bootstrap address answers only after 12 s, longer than one
/// admin request may take.
#[tokio::test]
async fn a_broker_that_answers_late_still_gets_its_topic_created() {
    let real = KafkaArgs::from_env();
    let target = real.brokers.split(',').next().unwrap_or_default().to_string();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let late = KafkaArgs { brokers: format!("127.0.0.1:{port}"), ..real.clone() };
    let topic = format!("t_late_{}", &uuid::Uuid::now_v7().simple().to_string()[20..]);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(12)).await;
        let listener = TcpListener::bind(("127.0.0.1", port)).await.expect("bind the late bootstrap port");
        forward(listener, target).await
    });
    ensure_topic(&late, &topic, 2).await.expect("the topic is created once the broker answers");
    let real2 = real.clone();
    let t2 = topic.clone();
    let n = tokio::task::spawn_blocking(move || partition_count(&real2, &t2)).await.unwrap().expect("metadata");
    assert_eq!(n, Some(2), "{topic} on {}", real.brokers);
}
