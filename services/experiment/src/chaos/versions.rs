//! Re-posted ids: a few ids posted again and again with new content, through every ingest at
//! once, while a partition scenario cuts links. k6 never re-posts an id, so without these no
//! version of an id could land over another; with them, versions of one id sit in every
//! partition (the ingest spreads records over partitions), and a writer that redelivers an old
//! record after a takeover, or a zombie that writes what it fetched before it lost the broker,
//! writes an older version over a newer one unless the stores' version rule stops it.
//!
//! The verdict is reconcile's: each id is expected, in every store, with the content of its
//! newest accepted version (`id:digest` in the expected ids, as k6 logs them), so a store holding
//! an older one is "not what was sent". An id is checked that way only when no uncertain post of
//! it (a 504 or no answer) could have been accepted after its newest 202 was: such a post may be
//! stored with a still newer version, and the id is then expected by id alone. A 503 writes
//! nothing, so it never makes an id ambiguous (and if it had written, the id would hold a version
//! no 202 named: reconcile would say so).

use super::monitor::now;
use pipeline_common::digest;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Every post's `sent_at`, already in the stores' canonical form (UTC, milliseconds).
const SENT_AT: &str = "2026-01-01T00:00:00.000Z";
const SENDER: &str = "versions";

/// One post and its answer.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Post {
    pub id: String,
    pub ingest: String,
    /// The HTTP status; 0 when no answer came (a connection error or the client's timeout).
    pub status: u16,
    /// The version a 202 named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// `id:digest` of what was sent.
    pub token: String,
    /// Epoch seconds when the request was sent and when its answer came.
    pub sent: f64,
    pub answered: f64,
}

/// The class k6 gives an answer (k6/lib/ids.js): accepted, refused (nothing written) or
/// uncertain (may be stored, at most once).
fn class(status: u16) -> char {
    match status {
        202 => 'A',
        503 | 400..=499 => 'R',
        _ => 'U',
    }
}

/// Posters running in the background; [`Poster::stop`] ends them and returns every post.
pub(super) struct Poster {
    stop: watch::Sender<bool>,
    tasks: JoinSet<Vec<Post>>,
}

/// Starts one poster per `(name, base URL)` of `ingests`, each posting `ids` in turn, one request
/// at a time, `pace` apart, with the lab's API key `token`.
pub(super) fn start(
    ingests: Vec<(String, String)>,
    token: Option<String>,
    ids: Vec<String>,
    pace: Duration,
) -> Result<Poster, String> {
    // Longer than the ingest's deadline (5 s): its 504 comes before the client gives up.
    let http =
        reqwest::Client::builder().timeout(Duration::from_secs(10)).build().map_err(|e| format!("HTTP client: {e}"))?;
    let (stop, stopped) = watch::channel(false);
    let mut tasks = JoinSet::new();
    for (i, (name, base)) in ingests.into_iter().enumerate() {
        let (http, token, stopped) = (http.clone(), token.clone(), stopped.clone());
        // Each poster starts at another id, so the ingests post different ids at one moment
        // and the same id shortly after one another.
        let mut order = ids.clone();
        order.rotate_left(i * ids.len() / 2 % ids.len().max(1));
        tasks.spawn(async move { post_loop(http, name, base, token, order, pace, stopped).await });
    }
    Ok(Poster { stop, tasks })
}

async fn post_loop(
    http: reqwest::Client,
    ingest: String,
    base: String,
    token: Option<String>,
    ids: Vec<String>,
    pace: Duration,
    stopped: watch::Receiver<bool>,
) -> Vec<Post> {
    let mut posts = Vec::new();
    let url = format!("{base}/v1/messages");
    let mut n = 0u64;
    loop {
        for id in &ids {
            if *stopped.borrow() || ids.is_empty() {
                return posts;
            }
            let body = format!("{id} #{n} via {ingest}");
            let token_id = format!("{id}:{}", digest::hex(digest::sent(SENDER, SENDER, &body, SENT_AT)));
            let m =
                serde_json::json!({"id": id, "sender": SENDER, "recipient": SENDER, "body": body, "sent_at": SENT_AT});
            let mut req = http.post(&url).json(&m);
            if let Some(t) = &token {
                req = req.bearer_auth(t);
            }
            let sent = now();
            let (status, version) = match req.send().await {
                Ok(r) => {
                    let status = r.status().as_u16();
                    let answer: serde_json::Value = r.json().await.unwrap_or_default();
                    (status, answer["version"].as_u64())
                }
                Err(_) => (0, None),
            };
            posts.push(Post {
                id: id.clone(),
                ingest: ingest.clone(),
                status,
                version,
                token: token_id,
                sent,
                answered: now(),
            });
            tokio::time::sleep(pace).await;
        }
        n += 1;
    }
}

impl Poster {
    /// Stops the posters after their request in flight; every post, in no particular order.
    pub(super) async fn stop(mut self) -> Vec<Post> {
        let _ = self.stop.send(true);
        let mut all = Vec::new();
        while let Some(done) = self.tasks.join_next().await {
            all.extend(done.unwrap_or_default());
        }
        all
    }
}

/// What the posts expect of the stores.
#[derive(Debug, Default, Serialize)]
pub(super) struct Judged {
    /// `id:digest` of the newest accepted version, or the bare id when that is ambiguous.
    pub accepted: Vec<String>,
    pub uncertain: Vec<String>,
    pub refused: Vec<String>,
    pub posts: usize,
    pub accepted_posts: usize,
    /// Ids whose every store must hold their newest accepted content.
    pub at_newest: usize,
    pub ambiguous: usize,
    /// Answers by status.
    pub statuses: BTreeMap<u16, usize>,
}

pub(super) fn judge(posts: &[Post]) -> Judged {
    let mut by_id: BTreeMap<&str, Vec<&Post>> = BTreeMap::new();
    for p in posts {
        by_id.entry(p.id.as_str()).or_default().push(p);
    }
    let mut j = Judged { posts: posts.len(), ..Judged::default() };
    for p in posts {
        *j.statuses.entry(p.status).or_default() += 1;
    }
    for (id, ps) in by_id {
        let accepted: Vec<&&Post> = ps.iter().filter(|p| class(p.status) == 'A').collect();
        j.accepted_posts += accepted.len();
        let newest = accepted.iter().filter(|p| p.version.is_some()).max_by_key(|p| p.version);
        match newest {
            Some(newest) => {
                // An uncertain post answered after the newest 202 was sent may have been accepted
                // after it, with a newer version (both ingests stamp from this machine's clock).
                let ambiguous = ps.iter().any(|p| class(p.status) == 'U' && p.answered >= newest.sent)
                    || accepted.iter().any(|p| p.version.is_none());
                if ambiguous {
                    j.ambiguous += 1;
                    j.accepted.push(id.to_string());
                } else {
                    j.at_newest += 1;
                    j.accepted.push(newest.token.clone());
                }
            }
            None if !accepted.is_empty() => {
                j.ambiguous += 1;
                j.accepted.push(id.to_string());
            }
            None if ps.iter().any(|p| class(p.status) == 'U') => j.uncertain.push(id.to_string()),
            None => j.refused.push(id.to_string()),
        }
    }
    j
}

/// `versions.json` (the judgement), `versions-posts.jsonl` (every post) and the id files
/// `versions-{accepted,uncertain,refused}.ids` the final reconcile unites with k6's.
pub(super) fn write(dir: &Path, posts: &[Post], j: &Judged) -> std::io::Result<()> {
    std::fs::write(dir.join("versions.json"), serde_json::to_string_pretty(j).unwrap_or_default())?;
    let lines: String = posts.iter().filter_map(|p| serde_json::to_string(p).ok()).map(|l| l + "\n").collect();
    std::fs::write(dir.join("versions-posts.jsonl"), lines)?;
    for (class, list) in [("accepted", &j.accepted), ("uncertain", &j.uncertain), ("refused", &j.refused)] {
        let text: String = list.iter().map(|i| format!("{i}\n")).collect();
        std::fs::write(dir.join(format!("versions-{class}.ids")), text)?;
    }
    Ok(())
}

/// The first 202 from `ingest` to a request sent after `t`: when that ingest took messages
/// again after a heal.
pub(super) fn first_accepted_after(posts: &[Post], ingest: &str, t: f64) -> Option<f64> {
    posts
        .iter()
        .filter(|p| p.ingest == ingest && p.status == 202 && p.sent >= t)
        .map(|p| p.answered)
        .min_by(f64::total_cmp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(id: &str, status: u16, version: Option<u64>, sent: f64, answered: f64) -> Post {
        Post { id: id.into(), ingest: "a".into(), status, version, token: format!("{id}:{sent}"), sent, answered }
    }

    /// The newest 202 decides, unless an uncertain post could have been accepted after it.
    #[test]
    fn the_newest_accepted_version_is_expected_unless_an_uncertain_post_may_be_newer() {
        let posts = vec![
            post("x", 202, Some(10), 1.0, 1.1),
            post("x", 202, Some(30), 3.0, 3.1),
            post("x", 202, Some(20), 2.0, 2.1),
            post("x", 504, None, 2.5, 2.9), // answered before the newest was sent: cannot be newer
            post("y", 202, Some(10), 1.0, 1.1),
            post("y", 504, None, 0.5, 6.0), // still in flight when y's 202 came: may be newer
            post("z", 504, None, 1.0, 6.0),
            post("w", 503, None, 1.0, 1.1),
            post("v", 503, None, 1.0, 1.1),
            post("v", 202, Some(5), 2.0, 2.1), // a 503 after or before changes nothing
            post("v", 503, None, 3.0, 3.1),
        ];
        let j = judge(&posts);
        assert_eq!(j.accepted, vec!["v:2".to_string(), "x:3".to_string(), "y".to_string()]);
        assert_eq!((j.uncertain.as_slice(), j.refused.as_slice()), (&["z".to_string()][..], &["w".to_string()][..]));
        assert_eq!((j.at_newest, j.ambiguous, j.accepted_posts, j.posts), (2, 1, 5, 11));
        assert_eq!(j.statuses[&503], 3);
        assert_eq!(first_accepted_after(&posts, "a", 1.5), Some(2.1));
    }
}
