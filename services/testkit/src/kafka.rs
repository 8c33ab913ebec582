//! Kafka for the tests: producing messages (or raw poison records) and reading a topic back.

use pipeline_common::config::KafkaArgs;

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
