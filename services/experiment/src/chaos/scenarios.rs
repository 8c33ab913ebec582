//! The scenarios' bodies: what each does to the pipeline, and when. Each returns early with
//! [`Abort`] when a step fails; [`Stage::finish`] then judges what there is.

use super::freeze::{Frozen, Target};
use super::stage::{nap, Abort, Stage, Step, DRAIN_S};
use super::verdict::{EventKind, Progress};
use crate::faults::Scenario;
use pipeline_common::reconcile_report::{names, Answer};
use pipeline_stores::StoreKind;
use std::time::Duration;
use tracing::info;

/// The ingest is restarted this long after it is killed.
const INGEST_RESTART_S: u64 = 2;

pub(super) async fn run(stage: &mut Stage<'_>, scenario: Scenario) -> Step {
    match scenario {
        Scenario::WriterKill => writer_kill(stage).await,
        Scenario::Rebalance => rebalance(stage).await,
        Scenario::IngestKill => ingest_kill(stage).await,
        Scenario::Freeze(k) => freeze(stage, k).await,
        Scenario::Poison => poison(stage).await,
        Scenario::Wipe(k) => wipe(stage, k).await,
        Scenario::DlqReplay => dlq_replay(stage).await,
        Scenario::PartitionWriter | Scenario::ZombieWriter | Scenario::PartitionIngest | Scenario::PartitionStore => {
            super::partitions::run(stage, scenario).await
        }
    }
}

/// The writer SIGKILLed N times under load, restarted after the restart delay, as a supervisor
/// with that delay would (tansu keeps a killed member's partitions until its session times out).
async fn writer_kill(st: &mut Stage<'_>) -> Step {
    let (z, delay) = (st.set.sizes, st.set.restart_delay_s);
    st.start_writer("w1", 0).await?;
    st.start_ingest().await?;
    st.record.faults = format!("{}× SIGKILL writer, restart +{delay}s", z.kills);
    let secs = z.pre_s + u64::from(z.kills) * (delay + z.run_between_s + 10) + z.post_s;
    st.open_loop("load", secs, z.rate)?;
    nap(z.pre_s).await;
    for i in 1..=z.kills {
        st.event(EventKind::FaultStart, &format!("SIGKILL writer #{i}"), None);
        st.kill_writer("w1").await;
        info!("{}: writer SIGKILLed (#{i}/{}); restart in {delay}s", st.name(), z.kills);
        nap(delay).await;
        st.event(EventKind::FaultEnd, &format!("writer restart #{i}"), Some(Progress::Consume));
        st.start_writer("w1", 0).await?;
        st.wait_recovered(60).await;
        nap(z.run_between_s / 2 + u64::from(i % 3)).await;
    }
    Ok(())
}

/// A backlog first (batches, no writer running), then two writers, a third joining and leaving
/// (SIGTERM) while the backlog lasts, then one of the two SIGKILLed and restarted; light live
/// load throughout.
async fn rebalance(st: &mut Stage<'_>) -> Step {
    let (z, delay) = (st.set.sizes, st.set.restart_delay_s);
    st.start_ingest().await?;
    let vars = [("VUS", z.backlog_vus.to_string()), ("BATCH", "100".to_string())];
    st.k6_start("backlog", "k6/batch.js", z.backlog_s, &vars)?;
    let backlog = st.k6_wait("backlog").await?["accepted"].to_string();
    st.record.faults = format!("backlog {backlog}; w1+w2; w3 join/leave ×{}; SIGKILL w1, restart +{delay}s", z.joins);
    st.open_loop("live", z.rebalance_live_s, z.rate / 2)?;
    st.start_writer("w1", 0).await?;
    st.start_writer("w2", 1).await?;
    nap(2).await;
    for j in 1..=z.joins {
        st.event(EventKind::NeedBacklog, &format!("w3 join #{j}"), None);
        st.event(EventKind::FaultStart, &format!("w3 join #{j}"), None);
        st.start_writer("w3", 2).await?;
        st.event(EventKind::FaultEnd, &format!("w3 joined #{j}"), Some(Progress::Consume));
        nap(2).await;
        st.wait_recovered(z.rebalance_wait_s).await;
        st.event(EventKind::FaultStart, &format!("w3 leave #{j}"), None);
        let (clean, how) = st.stop_writer("w3").await;
        st.event(EventKind::FaultEnd, &format!("w3 left #{j}"), Some(Progress::Consume));
        st.check(clean, &format!("w3 leaves with exit 0 (#{j})"), if clean { "" } else { &how });
        nap(2).await;
        st.wait_recovered(z.rebalance_wait_s).await;
    }
    st.event(EventKind::Lag, "SIGKILL w1", None);
    st.event(EventKind::FaultStart, "SIGKILL w1", None);
    st.kill_writer("w1").await;
    info!("{}: w1 SIGKILLed; restart in {delay}s", st.name());
    nap(delay).await;
    st.event(EventKind::FaultEnd, "w1 restart", Some(Progress::Consume));
    st.start_writer("w1", 0).await?;
    st.wait_recovered(60).await;
    Ok(())
}

/// The ingest SIGKILLed mid-run and restarted: every 202 stored; what k6 saw fail in between is
/// uncertain.
async fn ingest_kill(st: &mut Stage<'_>) -> Step {
    let z = st.set.sizes;
    st.start_writer("w1", 0).await?;
    st.start_ingest().await?;
    st.record.faults = format!("{}× SIGKILL ingest, restart +{INGEST_RESTART_S}s", z.ingest_kills);
    let secs = z.pre_s + u64::from(z.ingest_kills) * (INGEST_RESTART_S + z.run_between_s + 3) + z.post_s;
    st.open_loop("load", secs, z.rate)?;
    nap(z.pre_s).await;
    for i in 1..=z.ingest_kills {
        st.event(EventKind::FaultStart, &format!("SIGKILL ingest #{i}"), None);
        st.kill_ingest().await;
        nap(INGEST_RESTART_S).await;
        st.event(EventKind::FaultEnd, &format!("ingest restart #{i}"), Some(Progress::Produce));
        st.start_ingest().await?;
        nap(z.run_between_s).await;
    }
    Ok(())
}

/// The store's server SIGSTOPped under load, then SIGCONT: nothing lost; its writer's /metrics
/// must move during the freeze and the backlog must drain afterwards (the verdict checks both).
async fn freeze(st: &mut Stage<'_>, store: StoreKind) -> Step {
    let z = st.set.sizes;
    let Some(target) = crate::procs::server_pid(&st.set.root, store.name()).and_then(Target::of) else {
        return Err(st.abort(format!(
            "no live pid file for {store} in the stack folder (scripts/stack writes them): servers started from \
             another checkout need STACK_DIR; an external server cannot be frozen"
        )));
    };
    st.start_writer("w1", 0).await?;
    st.start_ingest().await?;
    st.record.faults = format!("SIGSTOP {} ({}) {}s", store.label(), target.describe(), z.freeze_s);
    st.open_loop("load", z.pre_s + z.freeze_s + z.post_s, z.rate)?;
    nap(z.pre_s).await;
    st.snapshot("before").await;
    st.event(EventKind::FreezeStart, store.name(), None);
    st.event(EventKind::FaultStart, &format!("freeze {store}"), None);
    let frozen = Frozen::freeze(target, Duration::from_secs(z.freeze_s + 5)).map_err(|e| st.abort(e))?;
    info!("{}: {store} frozen for {}s", st.name(), z.freeze_s);
    nap(z.freeze_s.saturating_sub(1)).await;
    st.snapshot("frozen").await;
    nap(1).await;
    frozen.thaw();
    st.event(EventKind::FreezeEnd, store.name(), None);
    st.event(EventKind::FaultEnd, &format!("SIGCONT {store}"), Some(Progress::Consume));
    nap(2).await;
    st.snapshot("thawed").await;
    Ok(())
}

/// The poison corpus, then ordinary traffic: the partitions must still move, and neither the
/// writer nor the ingest restarted (the same boot ids).
async fn poison(st: &mut Stage<'_>) -> Step {
    st.start_writer("w1", 0).await?;
    st.start_ingest().await?;
    let before = st.boot_ids().await;
    let token = crate::paths::lab_key_env(&st.set.root)
        .into_iter()
        .find(|(k, _)| k == "INGEST_KEY_FILE")
        .map(|(_, v)| v)
        .or_else(|| std::env::var("INGEST_KEY_FILE").ok())
        .and_then(|f| std::fs::read_to_string(f).ok())
        .map(|t| t.trim().to_string());
    let cases = super::poison::corpus(&format!("{}p", st.set.run_id));
    let http =
        reqwest::Client::builder().timeout(Duration::from_secs(60)).build().map_err(|e| st.abort(e.to_string()))?;
    let (outcomes, ids) = super::poison::send(&http, &st.ingest_url, token.as_deref(), &cases).await;
    if let Err(e) = super::poison::write(&st.dir, &outcomes, &ids) {
        return Err(st.abort(format!("cannot write the poison results: {e}")));
    }
    let accepted = outcomes.iter().filter(|o| o.status == 202).count();
    let refused = outcomes.iter().filter(|o| (400..500).contains(&o.status)).count();
    st.record.faults = format!("{} poison requests ({accepted}× 202, {refused}× 4xx)", outcomes.len());
    let failed: Vec<String> = outcomes
        .iter()
        .filter(|o| !o.ok)
        .take(5)
        .map(|o| format!("{} -> {}: {}", o.case, o.status, o.problems.join(", ")))
        .collect();
    st.check(failed.is_empty(), "every poison case: 202 or 4xx as expected", &failed.join("; "));
    st.open_loop("after", 5, st.set.sizes.rate)?;
    st.k6_wait("after").await?;
    let after = st.boot_ids().await;
    for (what, b, a) in [("writer", before.0, after.0), ("ingest", before.1, after.1)] {
        let same = b.is_some() && a == b;
        st.check(same, &format!("{what} boot id unchanged"), if same { "" } else { "changed or no answer" });
    }
    Ok(())
}

/// The store emptied mid-run under load (`reconcile wipe`, the store's own reset); `finish`
/// repairs it from MySQL before the final reconcile.
async fn wipe(st: &mut Stage<'_>, store: StoreKind) -> Step {
    let z = st.set.sizes;
    st.start_writer("w1", 0).await?;
    st.start_ingest().await?;
    st.record.faults = format!("reconcile wipe --store {store} mid-run, then reconcile repair");
    st.repair = Some(store);
    st.open_loop("load", z.pre_s + z.post_s, z.rate)?;
    nap(z.pre_s).await;
    st.event(EventKind::FaultStart, &format!("wipe {store}"), None);
    if st.reconcile(&["wipe", "--store", store.name(), "--yes"], "wipe").await != Some(0) {
        return Err(st.abort(format!("could not wipe {store} (see wipe.log)")));
    }
    st.event(EventKind::FaultEnd, &format!("wipe {store}"), Some(Progress::Consume));
    Ok(())
}

impl Stage<'_> {
    /// A wipe's repair: reconcile must first see the loss (else the scenario proved nothing),
    /// then `reconcile repair` rebuilds the store, and a second repair has nothing to do.
    pub(super) async fn repair_store(&mut self, store: StoreKind) {
        let (code, before) = self.count_load("before-repair").await;
        let lost = before.as_ref().and_then(Answer::check).map_or(0, |c| c.total(&names::missing(store)));
        let seen = code == Some(1) && lost > 0;
        let detail = format!("reconcile exit {code:?}, {lost} missing from {store} (see before-repair.json)");
        self.check(
            seen,
            &format!("the wipe lost messages: {lost} missing from {store} before the repair"),
            if seen { "" } else { &detail },
        );
        let name = store.name();
        let (code, repair) =
            self.reconcile_json(&["--drain-timeout", DRAIN_S, "repair", "--stores", name], "repair").await;
        self.check(
            code == Some(0),
            &format!("reconcile repair --stores {store} exits 0"),
            &format!("exit {code:?}: {}", repair.as_ref().and_then(Answer::message).unwrap_or_default()),
        );
        let again = self.reconcile(&["repair", "--stores", name, "--dry-run"], "repair-again").await;
        self.check(again == Some(0), "a second repair has nothing to do", &format!("exit {again:?}"));
    }
}

/// MySQL refuses most messages for good (its `sender` column narrowed): they are dead-lettered
/// and reconcile says so; the column widened, `reconcile dlq replay` writes them and the final
/// reconcile is exact.
async fn dlq_replay(st: &mut Stage<'_>) -> Step {
    let z = st.set.sizes;
    sender_column(st, "VARCHAR(6)")
        .await
        .map_err(|e| st.abort(format!("could not narrow MySQL's sender column: {e}")))?;
    let result = dlq_replay_steps(st, z).await;
    if let Err(e) = sender_column(st, "VARCHAR(64)").await {
        return Err(st.abort(format!("could not widen MySQL's sender column: {e}")));
    }
    result?;
    let (code, replay) = st.reconcile_json(&["dlq", "replay"], "replay").await;
    let msg = replay.as_ref().and_then(Answer::message).unwrap_or_default();
    st.check(code == Some(0), "reconcile dlq replay exits 0", &format!("exit {code:?}: {msg}"));
    st.event(EventKind::FaultEnd, "replayed", Some(Progress::Consume));
    Ok(())
}

async fn dlq_replay_steps(st: &mut Stage<'_>, z: super::sizes::Sizes) -> Step {
    st.start_writer("w1", 0).await?;
    st.start_ingest().await?;
    st.record.faults = "MySQL sender VARCHAR(6) (refuses most k6 senders); widened; reconcile dlq replay".into();
    st.open_loop("load", z.pre_s + z.post_s, z.rate)?;
    st.k6_wait("load").await?;
    let (code, before) = st.count_load("before-replay").await;
    let dead = before.as_ref().and_then(Answer::check).map_or(0, |c| c.total(names::DL_ACCEPTED));
    let seen = code == Some(1) && dead > 0;
    st.check(
        seen,
        &format!("MySQL refused messages for good: {dead} dead-lettered"),
        if seen { "" } else { "reconcile saw none" },
    );
    st.event(EventKind::FaultStart, "widen MySQL sender", None);
    Ok(())
}

/// MySQL's `sender` column in every shard table, narrowed or widened back.
async fn sender_column(st: &Stage<'_>, ty: &str) -> Result<(), Abort> {
    let url = st.set.stores.mysql.connection_url().map_err(|e| Abort(e.to_string()))?;
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await
        .map_err(|e| Abort(e.to_string()))?;
    for t in 0..pipeline_common::message::SHARDS {
        let sql = format!("ALTER TABLE messages_{t:02} MODIFY sender {ty} NOT NULL");
        sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&pool).await.map_err(|e| Abort(e.to_string()))?;
    }
    pool.close().await;
    Ok(())
}
