//! The partition scenarios: three writers and two ingests on hosts of their own (`hosts.rs`),
//! k6's open loop through both ingests, a few ids re-posted through both (`versions.rs`), and
//! links cut between one host and the servers. Each ends, like every scenario, in the exact
//! reconcile of `Stage::finish` (ids and content, the re-posted ids at their newest version);
//! what a cut must do besides is checked from the monitor's samples (`cuts.rs`) and here from
//! what the clients saw.
//!
//! - partition-writer: the host of the writer owning the most partitions cut from everything
//!   past the group's 10 s session; its partitions must move to the live writers before the
//!   heal (tansu does not rebalance when a session ends: the live writers' stall watch rejoins
//!   the group, see docs/explanation/architecture.md "Known server quirks"), and it must rejoin.
//! - zombie-writer: the same writer cut from the broker only, just after a burst, so it holds
//!   fetched records it can still write to every store but can no longer commit. Left alone,
//!   it writes them within its own session timeout (librdkafka's, 10 s, then it drops the
//!   partitions as lost), long before the group moves them (the broker's 10 s, then the live
//!   writers' stall watch), or it holds nothing at all (at these rates a writer keeps up, and
//!   librdkafka's queue is empty at any moment): its writes would only precede the new owner's
//!   redelivery. So its MySQL link is also held, from a second before the cut (its consumers
//!   block with a batch in hand) until the group has moved its partitions: that batch is then
//!   written to all four stores after newer versions of its ids were, which only the version
//!   rule keeps from regressing them.
//! - partition-ingest: an ingest's host cut from the broker: k6 may see only 503 or 504 from it,
//!   its /readyz must say so, and it must take messages again after the heal.
//! - partition-store: a writer's host cut from one store, shorter than the stall watch: that
//!   store's pool backs off, nothing is committed past what the store holds (checked mid-cut
//!   with `reconcile replay --dry-run` up to the committed offsets), and it catches up.

use super::hosts::{Lose, INGESTS, WRITERS};
use super::net::Cut;
use super::record::{CutInfo, EventKind, Progress};
use super::stage::{nap, Abort, Stage, Step};
use super::versions::{self, Poster};
use crate::faults::Scenario;
use pipeline_common::reconcile_report::Answer;
use pipeline_stores::StoreKind;
use std::time::Duration;
use tracing::info;

/// Ids each scenario re-posts, and the pause between two posts of one poster.
const REPOSTED: usize = 24;
const POST_PACE: Duration = Duration::from_millis(40);
/// Longest wait for the group to own every partition before the first cut.
const FORMED_S: u64 = 60;
/// Longest wait for a healed writer to own partitions again.
const REJOIN_S: u64 = 90;
/// Longest wait for a healed ingest's /readyz.
const READY_S: u64 = 60;

pub(super) async fn run(st: &mut Stage<'_>, scenario: Scenario) -> Step {
    match scenario {
        Scenario::PartitionWriter => writer_cut(st, Lose::All, "pw").await,
        Scenario::ZombieWriter => writer_cut(st, Lose::Kafka, "zw").await,
        Scenario::PartitionIngest => ingest_cut(st).await,
        Scenario::PartitionStore => store_cut(st).await,
        other => Err(st.abort(format!("{} is not a partition scenario", other.name()))),
    }
}

/// The writers (one after the other: two migrating a fresh database at once can collide) and
/// the ingests, each on its host; then until the group owns every partition.
async fn cluster(st: &mut Stage<'_>, stall_watch: Option<u64>) -> Step {
    if let Some(s) = stall_watch {
        st.writer_env.push(("WRITER_REJOIN_STALLED_SECS".into(), s.to_string()));
    }
    for (slot, w) in WRITERS.iter().enumerate() {
        st.start_writer(w, slot).await?;
    }
    for (i, name) in INGESTS.iter().enumerate() {
        // Distinct version numbers: two ingests writing one topic (trust.md, "A re-used id").
        st.start_ingest_named(name, u16::try_from(i + 1).ok()).await?;
    }
    for waited in 0..FORMED_S {
        let owned: f64 = (0..WRITERS.len()).filter_map(|slot| owned(st, slot)).sum();
        if owned >= f64::from(st.kafka.partitions) {
            info!("{}: the group owns every partition after {waited} s", st.name());
            return Ok(());
        }
        nap(1).await;
    }
    st.note(format!("the group did not own every partition within {FORMED_S} s of the writers' start"));
    Ok(())
}

/// Partitions writer `slot` owned at the latest sample (`None`: it did not answer).
fn owned(st: &Stage<'_>, slot: usize) -> Option<f64> {
    let port = st.set.writer_ports[slot].to_string();
    let s = st.samples().into_iter().rev().find(|s| s.w.contains_key(&port))?;
    let m = s.w.get(&port)?;
    Some(m.iter().filter(|(k, _)| k.starts_with("writer_assigned_partitions")).map(|(_, v)| v).sum())
}

/// The writer to cut: the one owning the most partitions, preferring one not cut before.
fn victim(st: &Stage<'_>, cut_before: &[usize]) -> Option<(usize, String)> {
    let mut by: Vec<(usize, f64)> = (0..WRITERS.len()).map(|s| (s, owned(st, s).unwrap_or(0.0))).collect();
    by.sort_by(|a, b| cut_before.contains(&a.0).cmp(&cut_before.contains(&b.0)).then(b.1.total_cmp(&a.1)));
    by.into_iter().find(|(_, n)| *n > 0.0).map(|(s, _)| (s, Stage::writer_host(s)))
}

/// k6's open loop through both ingests, half the rate each; more VUs than a round's, since a
/// cut ingest holds each request up to its 5 s deadline.
fn load(st: &mut Stage<'_>, secs: u64) -> Step {
    let rate = (st.set.sizes.rate / 2).max(1);
    for (tag, name) in [("load-a", INGESTS[0]), ("load-b", INGESTS[1])] {
        let url = st.ingest_base(name);
        st.open_loop_at(tag, &url, secs, rate, 400)?;
    }
    Ok(())
}

/// The lab's API token, as k6 reads it.
fn api_token(st: &Stage<'_>) -> Option<String> {
    crate::paths::lab_key_env(&st.set.root)
        .into_iter()
        .find(|(k, _)| k == "INGEST_KEY_FILE")
        .map(|(_, v)| v)
        .or_else(|| std::env::var("INGEST_KEY_FILE").ok())
        .and_then(|f| std::fs::read_to_string(f).ok())
        .map(|t| t.trim().to_string())
}

fn poster(st: &mut Stage<'_>, tag: &str) -> Result<Poster, Abort> {
    let ids = (0..REPOSTED).map(|k| format!("{}{tag}-v{k}", st.set.run_id)).collect();
    let ingests = INGESTS.iter().map(|n| (n.to_string(), st.ingest_base(n))).collect();
    versions::start(ingests, api_token(st), ids, POST_PACE).map_err(|e| st.abort(e))
}

/// A check whose detail (why it failed) is kept only when it failed.
fn verify(st: &mut Stage<'_>, ok: bool, what: &str, why: &str) {
    st.check(ok, what, if ok { "" } else { why });
}

/// Stops the posters, writes their id files for the final reconcile, and checks they proved
/// something: answers only 202, 503 or 504, ids re-posted, and some checked at their newest
/// version.
async fn settle(st: &mut Stage<'_>, poster: Poster) -> Vec<versions::Post> {
    let posts = poster.stop().await;
    let j = versions::judge(&posts);
    if let Err(e) = versions::write(&st.dir, &posts, &j) {
        st.check(false, "re-posted ids written for the reconcile", &e.to_string());
    }
    let odd: Vec<String> =
        j.statuses.iter().filter(|(s, _)| ![202, 503, 504].contains(*s)).map(|(s, n)| format!("{n}× {s}")).collect();
    verify(st, odd.is_empty(), "re-posted ids: every answer 202, 503 or 504", &odd.join(", "));
    let proved = j.at_newest > 0 && j.accepted_posts > REPOSTED;
    verify(
        st,
        proved,
        &format!(
            "re-posted ids: {REPOSTED} ids, {} versions accepted of {} posts; {} checked at their newest version in \
             every store, {} by id only (an uncertain post may be newer)",
            j.accepted_posts, j.posts, j.at_newest, j.ambiguous
        ),
        "too few versions accepted to judge any id at its newest",
    );
    posts
}

/// Cuts `host` off as `lose` says, with its events (a fault's, unless it is a zombie's hold).
fn start_cut(st: &mut Stage<'_>, host: &str, port: Option<u16>, lose: Lose) -> Result<(Cut, CutInfo), Abort> {
    let info = CutInfo { host: host.into(), metrics_port: port, what: lose.word() };
    let label = format!("cut {host} from {}", info.what);
    let cut = match st.hosts.as_ref() {
        Some(h) => h.cut(host, lose),
        None => Err("the scenario has no hosts".into()),
    };
    let cut = cut.map_err(|e| st.abort(format!("cannot {label}: {e}")))?;
    if !matches!(lose, Lose::Hold(_)) {
        st.event(EventKind::FaultStart, &label, None);
    }
    st.cut_event(EventKind::CutStart, &label, info.clone());
    info!("{}: {label}", st.name());
    Ok((cut, info))
}

/// Heals a cut, with its events.
fn heal(st: &mut Stage<'_>, cut: Cut, info: CutInfo) -> Step {
    let label = format!("heal {} ({})", info.host, info.what);
    cut.heal().map_err(|e| st.abort(format!("cannot {label}: {e}")))?;
    let hold = info.what.starts_with(super::hosts::HOLD);
    st.cut_event(EventKind::CutEnd, &label, info);
    if !hold {
        st.event(EventKind::FaultEnd, &label, Some(Progress::Consume));
    }
    info!("{}: {label}", st.name());
    Ok(())
}

/// partition-writer (`lose` = everything) and zombie-writer (the broker only).
async fn writer_cut(st: &mut Stage<'_>, lose: Lose, tag: &str) -> Step {
    let z = st.set.sizes;
    let watch = z.stall_watch_s.map(|s| format!(", stall watch {s} s")).unwrap_or_default();
    let (what, burst) = match lose {
        Lose::All => ("everything", String::new()),
        _ => ("the broker", format!(" in a {} s batch burst, its MySQL held until the takeover", z.burst_s)),
    };
    st.record.faults = format!("{}× a writer's host cut from {what} ≥{} s{burst}{watch}", z.writer_cuts, z.cut_s);
    cluster(st, z.stall_watch_s).await?;
    // The cuts as planned; waits past them (a zombie's held write, a rejoin) see the posters'
    // records only, which is enough for a writer to take some.
    let per_cut = z.cut_s + if lose == Lose::Kafka { z.burst_s + 5 } else { 0 } + z.run_between_s;
    let secs = z.pre_s + u64::from(z.writer_cuts) * per_cut + z.post_s;
    load(st, secs)?;
    let poster = poster(st, tag)?;
    nap(z.pre_s).await;
    let mut cut_before = Vec::new();
    for i in 1..=z.writer_cuts {
        let Some((slot, host)) = victim(st, &cut_before) else {
            return Err(st.abort("no writer owns a partition: nothing to cut".into()));
        };
        if lose == Lose::Kafka {
            // The cut comes in the middle of a burst: the zombie then holds records it has
            // fetched and not written (a batch in hand, more in librdkafka's queue), which is
            // what it can still write. After the burst it may have caught up, and hold nothing.
            let (tag, url) = (format!("burst-{i}"), st.ingest_base(INGESTS[0]));
            let vars = [("VUS", "2".to_string()), ("BATCH", "100".to_string())];
            st.k6_start_at(&tag, &url, "k6/batch.js", z.burst_s, &vars)?;
            // k6 writes its id log's first line when its scenario starts.
            let ids = st.dir.join(format!("k6-{tag}.ids"));
            for _ in 0..100 {
                if std::fs::metadata(&ids).is_ok_and(|m| m.len() > 0) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            tokio::time::sleep(Duration::from_millis(z.burst_s * 500)).await;
            st.event(EventKind::NeedBacklog, &format!("the cut of {host} #{i}"), None);
        }
        let port = st.set.writer_ports[slot];
        // The zombie's MySQL held from a second before it loses the broker: in that second its
        // consumers block on a write with a batch in hand while librdkafka still fetches.
        let hold = match lose {
            Lose::Kafka => {
                let h = start_cut(st, &host, Some(port), Lose::Hold(StoreKind::Mysql))?;
                nap(1).await;
                Some(h)
            }
            _ => None,
        };
        let t1 = super::monitor::now();
        let (cut, info) = start_cut(st, &host, Some(port), lose)?;
        if let Some(hold) = hold {
            release_after_takeover(st, slot, &host, hold, t1, z.cut_s).await?;
        }
        let left = z.cut_s as f64 - (super::monitor::now() - t1);
        if left > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(left)).await;
        }
        heal(st, cut, info)?;
        let healed = super::monitor::now();
        st.wait_recovered(90).await;
        // Until it is a member again (the verdict's rule): after a long cut that takes TCP's
        // next retransmission or librdkafka's 30 s connection setup timeout, then a rebalance.
        // The posters keep records coming meanwhile, so it has something to take.
        let key = port.to_string();
        for _ in 0..REJOIN_S {
            if super::cuts::rejoined(&st.samples(), &key, t1, healed).is_some() {
                break;
            }
            nap(1).await;
        }
        nap(z.run_between_s).await;
        cut_before.push(slot);
    }
    nap(z.post_s).await;
    settle(st, poster).await;
    Ok(())
}

/// zombie-writer: the zombie's MySQL link, held since just before its cut from the broker
/// (`t1`), released once the group has moved its partitions; then until the zombie has written
/// what it held (its MySQL count moves). Each wait is bounded; a wait that runs out is a note,
/// and the verdict's check that the zombie wrote after the takeover then fails.
async fn release_after_takeover(
    st: &mut Stage<'_>,
    slot: usize,
    host: &str,
    (hold, info): (Cut, CutInfo),
    t1: f64,
    cut_s: u64,
) -> Step {
    let deadline = t1 + cut_s as f64 + 30.0;
    let mut moved = false;
    while super::monitor::now() < deadline && !moved {
        nap(1).await;
        let samples = st.samples();
        if super::monitor::now() > t1 + 10.0 {
            let stopped = super::cuts::stood_still(&samples, t1 + 1.0, t1 + 9.0);
            moved = !stopped.is_empty()
                && stopped.iter().all(|p| super::cuts::moved_after(&samples, *p, t1 + 9.0).is_some());
        }
    }
    if !moved {
        st.note(format!(
            "{host}'s partitions had not moved {:.0} s into its cut: its MySQL released anyway",
            deadline - t1
        ));
    }
    let before = stored_in_mysql(st, slot);
    heal(st, hold, info)?;
    // A link blackholed for tens of seconds resumes at TCP's next retransmission, which backs
    // off exponentially: the held write may take a while to land.
    for _ in 0..60 {
        nap(1).await;
        if stored_in_mysql(st, slot) > before {
            return Ok(());
        }
    }
    st.note(format!("{host} wrote nothing to MySQL within 60 s of its release"));
    Ok(())
}

/// Messages writer `slot` has stored in MySQL, at the latest sample it answered.
fn stored_in_mysql(st: &Stage<'_>, slot: usize) -> f64 {
    let port = st.set.writer_ports[slot].to_string();
    let s = st.samples().into_iter().rev().find(|s| s.w.contains_key(&port));
    let m = s.as_ref().and_then(|s| s.w.get(&port));
    m.map(|m| {
        m.iter()
            .filter(|(k, _)| k.starts_with("writer_store_records_total{") && k.contains("\"mysql\""))
            .map(|(_, v)| v)
            .sum()
    })
    .unwrap_or(0.0)
}

/// Ingest `name` answers /readyz 200 (its producer reached the broker lately).
async fn ready(st: &Stage<'_>, name: &str) -> bool {
    let url = format!("{}/readyz", st.ingest_base(name));
    matches!(st.set.http.get(url).send().await, Ok(r) if r.status().is_success())
}

/// partition-ingest: each ingest's host (short: the first) cut from the broker in turn.
async fn ingest_cut(st: &mut Stage<'_>) -> Step {
    let z = st.set.sizes;
    let cut: Vec<&str> = INGESTS.iter().take(usize::try_from(z.writer_cuts).unwrap_or(1).max(1)).copied().collect();
    st.record.faults = format!("{} cut from the broker {} s", cut.join(", then "), z.ingest_cut_s);
    cluster(st, None).await?;
    let secs = z.pre_s + (cut.len() as u64) * (z.ingest_cut_s + 10 + z.run_between_s) + z.post_s;
    load(st, secs)?;
    let poster = poster(st, "pi")?;
    nap(z.pre_s).await;
    let mut heals = Vec::new();
    for name in &cut {
        let (c, info) = start_cut(st, name, None, Lose::Kafka)?;
        let mut not_ready = false;
        for _ in 0..z.ingest_cut_s * 2 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            not_ready |= !ready(st, name).await;
        }
        heal(st, c, info)?;
        let healed = super::monitor::now();
        let mut back = None;
        for _ in 0..READY_S * 2 {
            if ready(st, name).await {
                back = Some(super::monitor::now() - healed);
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        verify(st, not_ready, &format!("{name} /readyz said not ready during the cut"), "it stayed ready throughout");
        verify(
            st,
            back.is_some(),
            &format!("{name} ready again after the heal{}", back.map(|b| format!(" ({b:.1} s)")).unwrap_or_default()),
            &format!("not ready within {READY_S} s of the heal"),
        );
        heals.push((name.to_string(), healed));
        nap(z.run_between_s).await;
    }
    nap(z.post_s).await;
    let posts = settle(st, poster).await;
    for (name, healed) in &heals {
        let first = versions::first_accepted_after(&posts, name, *healed).map(|t| t - healed);
        verify(
            st,
            first.is_some(),
            &format!(
                "{name} took messages again after the heal{}",
                first.map(|f| format!(" (first 202 {f:.1} s after it)")).unwrap_or_default()
            ),
            "no 202 from it after the heal",
        );
    }
    for (tag, name) in [("load-a", INGESTS[0]), ("load-b", INGESTS[1])] {
        let summary = st.k6_wait(tag).await?;
        let non: Vec<(String, u64)> = summary["measured"]["non_202"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0))).collect())
            .unwrap_or_default();
        let text: Vec<String> = non.iter().map(|(k, v)| format!("{v}× {k}")).collect();
        if cut.contains(&name) {
            // `0` is no answer: a request k6 sent on a keep-alive connection the ingest closed as
            // idle (after a cut, k6 holds hundreds of VUs, each reused about every 5 s, the
            // ingest's --keep-alive-secs). The ingest never read it; k6 counts it uncertain and
            // the final reconcile judges it (the full run's were all not stored).
            let only = non.iter().all(|(k, _)| k == "503" || k == "504" || k == "0");
            let some: u64 = non.iter().filter(|(k, _)| k != "0").map(|(_, v)| v).sum();
            verify(
                st,
                only && some > 0,
                &format!("k6 through {name}: only 503 or 504 (or no answer) besides 202 ({})", text.join(", ")),
                if some == 0 { "no refusal at all: the cut did not reach its requests" } else { "other answers" },
            );
        } else {
            verify(st, non.is_empty(), &format!("k6 through {name}, not cut: every answer 202"), &text.join(", "));
        }
    }
    Ok(())
}

/// partition-store: the writer owning the most partitions cut from one store (full: each in
/// turn), with the mid-cut check that nothing is committed past what that store holds.
async fn store_cut(st: &mut Stage<'_>) -> Step {
    let z = st.set.sizes;
    let stores: Vec<StoreKind> = if z.store_cuts_all { StoreKind::ALL.to_vec() } else { vec![StoreKind::Es] };
    let names: Vec<String> = stores.iter().map(|k| k.to_string()).collect();
    st.record.faults = format!("a writer's host cut from {} {} s each", names.join(", then "), z.store_cut_s);
    cluster(st, None).await?;
    let secs = z.pre_s + (stores.len() as u64) * (z.store_cut_s + 5 + z.run_between_s) + z.post_s;
    load(st, secs)?;
    let poster = poster(st, "ps")?;
    nap(z.pre_s).await;
    let mut cut_before = Vec::new();
    for store in stores {
        let Some((slot, host)) = victim(st, &cut_before) else {
            return Err(st.abort("no writer owns a partition: nothing to cut".into()));
        };
        let port = st.set.writer_ports[slot];
        let (cut, info) = start_cut(st, &host, Some(port), Lose::Store(store))?;
        nap(z.store_cut_s / 2).await;
        committed_in_store(st, store).await;
        nap(z.store_cut_s - z.store_cut_s / 2).await;
        heal(st, cut, info)?;
        st.wait_recovered(60).await;
        nap(z.run_between_s).await;
        cut_before.push(slot);
    }
    nap(z.post_s).await;
    settle(st, poster).await;
    Ok(())
}

/// Mid-cut: every record below the group's committed offsets (the latest sample) is in `store`
/// at its version or newer, by `reconcile replay --dry-run` over exactly that range, which
/// exits 1 when it would have to write something. The stores only move forward, so what was
/// committed when the sample was taken is still held when replay reads.
async fn committed_in_store(st: &mut Stage<'_>, store: StoreKind) {
    let Some(s) = st.samples().pop() else {
        st.check(false, &format!("mid-cut check of {store}"), "no monitor sample");
        return;
    };
    let parts: Vec<(usize, i64)> = s.committed.iter().copied().enumerate().filter(|(_, c)| *c > 0).collect();
    if parts.is_empty() {
        st.note(format!("mid-cut check of {store}: nothing committed yet"));
        return;
    }
    let from: Vec<String> = parts.iter().map(|(p, _)| format!("{p}:earliest")).collect();
    let to: Vec<String> = parts.iter().map(|(p, c)| format!("{p}:{c}")).collect();
    let (from, to) = (from.join(","), to.join(","));
    let out = format!("replay-{store}");
    let args = ["replay", "--from-offset", &from, "--to-offset", &to, "--stores", store.name(), "--dry-run"];
    let (code, v) = st.reconcile_json(&args, &out).await;
    verify(
        st,
        code == Some(0),
        &format!("mid-cut: everything committed ({to}) is in {store} (reconcile replay --dry-run)"),
        &format!("exit {code:?}: {} (see {out}.json)", v.as_ref().and_then(Answer::message).unwrap_or_default()),
    );
}
