//! No more writer consumers than the topic has partitions.

use super::*;

#[test]
fn the_writers_hold_no_more_consumers_than_the_topic_has_partitions() {
    let docs = docs();
    let mut ignored = Vec::new();
    let writers: Vec<_> = program_containers(&docs).into_iter().filter(|(_, _, _, bin)| *bin == "writer").collect();
    assert_eq!(writers.len(), 1, "one workload runs the writer (found {})", writers.len());
    let (d, _, c, _) = writers[0];
    assert!(
        matches!(d.kind(), "Deployment" | "StatefulSet"),
        "{}: the writer runs as a Deployment or StatefulSet",
        d.at()
    );
    let env = container_env(&docs, c, &d.at(), &mut ignored);
    let help = help_env("writer").expect("the writer's --help");
    let number = |var: &str| -> i64 {
        let v = env.get(var).cloned().flatten().or_else(|| help.get(var).cloned().flatten());
        v.as_deref().and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{}: {var} is not a number: {v:?}", d.at()))
    };
    let (consumers, partitions) = (number("WRITER_CONSUMERS"), number("KAFKA_PARTITIONS"));
    let replicas = d.v["spec"]["replicas"].as_i64().unwrap_or(1);
    // A rolling update may add maxSurge pods (25% by default) beside the old ones: members too.
    let surge = match (d.kind(), d.v["spec"]["strategy"]["type"].as_str()) {
        ("Deployment", Some("Recreate")) => 0,
        ("Deployment", _) => {
            let s = &d.v["spec"]["strategy"]["rollingUpdate"]["maxSurge"];
            match (s.as_i64(), s.as_str().unwrap_or("25%").strip_suffix('%').and_then(|p| p.parse::<i64>().ok())) {
                (Some(n), _) => n,
                (None, Some(pct)) => (replicas * pct + 99) / 100,
                _ => panic!("{}: maxSurge {s} is neither a number nor a percentage", d.at()),
            }
        }
        _ => 0,
    };
    // Kafka gives each partition to one member of the group: members past the partitions idle.
    assert!(
        (replicas + surge) * consumers <= partitions,
        "{}: (replicas {replicas} + maxSurge {surge}) × WRITER_CONSUMERS {consumers} = {} consumers for \
         KAFKA_PARTITIONS {partitions}: a partition has one consumer of the group, the rest would idle",
        d.at(),
        (replicas + surge) * consumers
    );
    for h in docs.iter().filter(|h| h.kind() == "HorizontalPodAutoscaler") {
        assert!(
            h.v["spec"]["scaleTargetRef"]["name"] != d.name(),
            "{}: an autoscaler on the writers would pass the partition bound",
            h.at()
        );
    }
    // Every program sees one topic, group and broker list: a writer on another topic than the
    // ingest's would store nothing.
    let mut kafka: BTreeMap<&str, BTreeSet<(String, String)>> = BTreeMap::new();
    for (d, _, c, bin) in program_containers(&docs) {
        let env = container_env(&docs, c, &d.at(), &mut ignored);
        for var in ["KAFKA_BROKERS", "KAFKA_TOPIC", "KAFKA_GROUP", "KAFKA_PARTITIONS"] {
            let v = env.get(var).cloned().flatten().or_else(|| help_env(bin)?.get(var).cloned().flatten());
            kafka.entry(var).or_default().insert((v.unwrap_or_default(), format!("{} ({bin})", d.at())));
        }
    }
    for (var, seen) in kafka {
        let values: BTreeSet<&String> = seen.iter().map(|(v, _)| v).collect();
        assert_eq!(values.len(), 1, "the programs disagree on {var}: {seen:?}");
    }
    println!(
        "{}: (replicas {replicas} + maxSurge {surge}) × WRITER_CONSUMERS {consumers} ≤ KAFKA_PARTITIONS {partitions}",
        d.at()
    );
}
