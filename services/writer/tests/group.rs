//! The consumer group as a broker may leave it: a writer that dies for good, with nobody
//! restarting it, must not take its partitions with it.
//!
//! A Kafka broker moves a dead member's partitions to the survivors once its session ends.
//! tansu 0.6.0 does not: a member that misses its session in a formed group is dropped from the
//! member list, but the group is not rebalanced (its generation and assignment stay as they
//! were), so the dead member's partitions are consumed by nobody until some other member joins
//! or leaves (docs/explanation/architecture.md, "Known server quirks"). The writer watches for
//! it: a partition with lag whose committed offset does not move while every store answers, and
//! that no consumer of this process owns, makes one consumer leave and rejoin the group, which
//! any broker answers with a rebalance. Seen failing on the writer before that watch (stop 41):
//! after the SIGKILL the survivor stored only its own partitions' share, then nothing for 240 s.

mod support;

use pipeline_testkit::{exclusive, free_port, Service};
use std::time::{Duration, Instant};
use support::{Run, DRAIN};

/// Partitions the writer on `port` owns now (0 while it is down or still starting).
async fn owned(port: u16) -> f64 {
    let up = reqwest::get(format!("http://127.0.0.1:{port}/healthz")).await.is_ok_and(|r| r.status().is_success());
    if !up {
        return 0.0;
    }
    pipeline_testkit::metric(port, "writer_assigned_partitions").await
}

/// Waits until the writers on `ports` together own every partition and each owns at least one.
async fn settled(run: &Run, ports: &[u16]) {
    let want = f64::from(run.ns.kafka.partitions);
    let deadline = Instant::now() + DRAIN;
    loop {
        let mut each = Vec::new();
        for p in ports {
            each.push(owned(*p).await);
        }
        if each.iter().sum::<f64>() == want && each.iter().all(|n| *n >= 1.0) {
            return;
        }
        assert!(Instant::now() < deadline, "writers on {ports:?} own {each:?} of {want} partitions");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn writer(run: &Run, port: u16) -> Service {
    run.writer_with_env(&[], &[("WRITER_METRICS_ADDR", &format!("127.0.0.1:{port}"))])
}

#[tokio::test]
async fn a_writer_that_dies_for_good_hands_its_partitions_to_the_survivor() {
    let _g = exclusive().await;
    let run = Run::new("orphan").await;
    let (p0, p1) = (free_port(), free_port());
    // One after the other (two writers migrating a fresh database at once can collide), each
    // with the default three consumers: six members for four partitions, two of them the dead
    // writer's (the range assignor orders members by id, `writer-<n>-<uuid>`).
    let mut w0 = writer(&run, p0);
    settled(&run, &[p0]).await;
    let _w1 = writer(&run, p1);
    settled(&run, &[p0, p1]).await;
    let dead = owned(p0).await;
    w0.signal("KILL");
    w0.wait_exit(Duration::from_secs(10)).expect("killed");
    // Produced after the kill, keyed by id: every partition gets some, the dead writer's too.
    let ids = run.produce(2_000, "orphan").await;
    run.assert_stored(&ids).await;
    run.wait_committed(2_000).await;
    let rejoins = pipeline_testkit::metric(p1, "writer_group_rejoins_total").await;
    eprintln!("the dead writer owned {dead} partitions; the survivor asked the group to rebalance {rejoins} times");
}
