//! A scenario's id-level verdict, in one place. Every k6 run's id log is checked against its
//! summary and written out as plain id files by `reconcile ids` (the one reader of that
//! format); with one k6 run and nothing else reconcile reads the k6 summary itself (`count
//! --expect-from`); with several runs, the poison corpus or re-posted ids (`versions.rs`) their
//! id sets are united into `expected-{accepted,uncertain,refused}.ids` for `reconcile diff --ids
//! --uncertain`.

use super::stage::{Stage, DRAIN_S};
use std::collections::BTreeSet;
use std::path::Path;

const CLASSES: [&str; 3] = ["accepted", "uncertain", "refused"];

fn read_ids(path: &Path) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect())
}

impl Stage<'_> {
    /// Runs the final reconcile of the stage into `reconcile.json`; its exit code. A method of
    /// the stage written here, so that the stage calls it without importing this module.
    pub(super) async fn final_reconcile(&mut self) -> Option<i32> {
        let stage = self;
        let dir = stage.dir.clone();
        let mut summaries: Vec<String> = std::fs::read_dir(&dir)
            .map(|d| d.flatten().filter_map(|e| e.file_name().into_string().ok()).collect())
            .unwrap_or_default();
        summaries.retain(|f| f.starts_with("k6-") && f.ends_with(".json"));
        summaries.sort();
        let mut sets: [BTreeSet<String>; 3] = Default::default();
        for file in &summaries {
            let tag = &file[3..file.len() - 5];
            let summary = dir.join(file).display().to_string();
            let write = dir.join(format!("ids-{tag}")).display().to_string();
            let code = stage.reconcile(&["ids", &summary, "--write", &write], &format!("ids-{tag}")).await;
            if code != Some(0) {
                stage.check(
                    false,
                    &format!("k6 id log of {tag} complete and agrees with its summary"),
                    &format!("exit {code:?}: see ids-{tag}.json"),
                );
            }
            for (i, class) in CLASSES.iter().enumerate() {
                sets[i].extend(read_ids(&dir.join(format!("ids-{tag}.{class}.ids"))).unwrap_or_default());
            }
        }
        // The id sets a scenario writes itself, beside k6's: the poison corpus, the re-posted ids.
        let own = ["poison", "versions"];
        let poison = own.iter().any(|o| dir.join(format!("{o}-accepted.ids")).exists());
        for (i, class) in CLASSES.iter().enumerate() {
            for o in own {
                sets[i].extend(read_ids(&dir.join(format!("{o}-{class}.ids"))).unwrap_or_default());
            }
        }
        let [acc, unc, refused] = sets;
        let unc: BTreeSet<String> = unc.difference(&acc).cloned().collect();
        let refused: BTreeSet<String> = refused.into_iter().filter(|i| !acc.contains(i) && !unc.contains(i)).collect();
        for (class, set) in CLASSES.iter().zip([&acc, &unc, &refused]) {
            let text: String = set.iter().map(|i| format!("{i}\n")).collect();
            if let Err(e) = std::fs::write(dir.join(format!("expected-{class}.ids")), text) {
                stage.check(false, "id sets merged", &e.to_string());
            }
        }
        let summary = serde_json::json!({"accepted": acc.len(), "uncertain": unc.len(), "refused": refused.len(), "k6_runs": summaries});
        let _ = std::fs::write(dir.join("expected.json"), summary.to_string());
        let drain = DRAIN_S;
        if summaries.len() == 1 && !poison {
            let s = dir.join(&summaries[0]).display().to_string();
            stage.reconcile(&["--drain-timeout", drain, "count", "--expect-from", &s], "reconcile").await
        } else {
            let a = dir.join("expected-accepted.ids").display().to_string();
            let u = dir.join("expected-uncertain.ids").display().to_string();
            stage.reconcile(&["--drain-timeout", drain, "diff", "--ids", &a, "--uncertain", &u], "reconcile").await
        }
    }
}
