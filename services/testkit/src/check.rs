//! What the stores hold, checked: counts reached, exact id sets, the same content everywhere,
//! and a deliberately misplaced MySQL row for reconcile to find.

use crate::Namespace;
use pipeline_stores::{Store, StoreKind};
use std::sync::Arc;

/// Polls every store until each holds `n` messages (or the timeout passes) and returns the
/// last counts, in store order.
pub async fn wait_for_counts(stores: &[Arc<dyn Store>], n: u64, timeout: std::time::Duration) -> Vec<(StoreKind, u64)> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let mut counts = Vec::new();
        for s in stores {
            counts.push((s.kind(), s.count().await.unwrap_or(u64::MAX)));
        }
        if counts.iter().all(|(_, c)| *c == n) || std::time::Instant::now() > deadline {
            return counts;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// Asserts that every store holds exactly `expected` ids (as sets, and no id twice), and that
/// MySQL rows sit in their shard tables.
pub async fn assert_exact_ids(stores: &[Arc<dyn Store>], expected: &[String]) {
    let mut want: Vec<&String> = expected.iter().collect();
    want.sort();
    for s in stores {
        let got = s.audit("").await.expect("audit");
        for sid in &got {
            if let Some(place) = sid.place {
                assert_eq!(place, pipeline_common::message::shard_of(&sid.id), "{} in wrong table", sid.id);
            }
        }
        let mut ids: Vec<&String> = got.iter().map(|s| &s.id).collect();
        ids.sort();
        let missing = want.iter().filter(|w| ids.binary_search(w).is_err()).count();
        let dup = ids.windows(2).filter(|w| w[0] == w[1]).count();
        assert!(
            missing == 0 && dup == 0 && ids.len() == want.len(),
            "{}: {} ids, want {}, {missing} missing, {dup} duplicated",
            s.kind(),
            ids.len(),
            want.len()
        );
    }
}

/// Asserts that every store holds the same content as MySQL (the first store) for every id,
/// compared by fingerprint (`pipeline_common::digest`: version, sender, recipient, body,
/// `sent_at`); returns MySQL's fingerprints by id.
pub async fn assert_same_content(
    stores: &[Arc<dyn Store>],
) -> std::collections::HashMap<String, pipeline_common::digest::Digest> {
    let mut reference = std::collections::HashMap::new();
    for (i, s) in stores.iter().enumerate() {
        let mut differ = Vec::new();
        for a in s.audit("").await.expect("audit") {
            let d = a.digest.unwrap_or_else(|| panic!("{}: {} is not a message", s.kind(), a.id));
            if i == 0 {
                reference.insert(a.id, d);
            } else if reference.get(&a.id) != Some(&d) {
                differ.push(a.id);
            }
        }
        differ.sort();
        assert!(
            differ.is_empty(),
            "{}: {} ids hold other content than in MySQL, e.g. {:?}",
            s.kind(),
            differ.len(),
            &differ[..differ.len().min(5)]
        );
    }
    reference
}

/// Copies the MySQL row of `id` into a second, wrong shard table of the namespace (a placement
/// error reconcile must report).
pub async fn copy_into_wrong_shard(ns: &Namespace, id: &str) {
    use pipeline_common::message::{shard_of, shard_table};
    let wrong = shard_table((shard_of(id) + 1) % 16);
    let pool = sqlx::mysql::MySqlPoolOptions::new().connect(&ns.stores.mysql.url).await.expect("mysql");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO {wrong} (id, sender, recipient, body, sent_at, version) SELECT id, sender, recipient, body, sent_at, version FROM {} WHERE id = ?",
        shard_table(shard_of(id))
    )))
    .bind(id)
    .execute(&pool)
    .await
    .expect("copy the row into a wrong shard table");
}
