//! The poison corpus, sent through the HTTP API: sent_at at and past the edges of what every
//! store holds, every field at its maximum length and one past it, every Unicode plane, NUL and
//! control characters, raw bytes no JSON encoder writes, and the largest batches by count and by
//! bytes.
//!
//! Every case has an expectation: `Valid` (the contract says it is a good message: 202, then
//! stored in every store), `Invalid` (a 4xx at the edge) or `Either` (a 4xx, or 202 and stored
//! everywhere). A 5xx, a timeout or a connection error fails the case whatever it expects.
//! Accepted ids are logged as `id:digest` of what was sent (`pipeline_common::digest::sent`)
//! whenever the stores' form of it is known (every case sends [`SENT_AT`] unless it tests
//! sent_at itself), so reconcile checks each store holds exactly that, not only that they agree.

use pipeline_common::digest;
use serde::Serialize;
use serde_json::{json, Value};
use std::path::Path;

/// The body limit in bytes (the ingest's 16 KiB).
const MAXB: usize = 16384;
/// A sent_at already in the stores' canonical form (UTC, milliseconds): what they hold of it.
const SENT_AT: &str = "2026-01-01T00:00:00.000Z";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum Expect {
    Valid,
    Invalid,
    Either,
}

pub(super) struct Case {
    pub name: String,
    pub route: &'static str,
    pub body: Vec<u8>,
    /// The ids submitted.
    pub ids: Vec<String>,
    pub expect: Expect,
}

struct Corpus {
    prefix: String,
    cases: Vec<Case>,
}

fn msg(id: &str, sender: &str, recipient: &str, body: &str, sent_at: Option<&str>) -> Value {
    let mut m = json!({"id": id, "sender": sender, "recipient": recipient, "body": body});
    if let Some(t) = sent_at {
        m["sent_at"] = json!(t);
    }
    m
}

impl Corpus {
    fn id(&self, tag: &str) -> String {
        format!("{}-{tag}", self.prefix)
    }

    /// A message with the corpus's defaults; `f` changes what the case is about.
    fn m(&self, tag: &str) -> Value {
        msg(&self.id(tag), "poison-sender", "poison-recipient", "poison", Some(SENT_AT))
    }

    fn single(&mut self, name: &str, m: Value, expect: Expect) {
        let id = m["id"].as_str().unwrap_or_default().to_string();
        let body = serde_json::to_vec(&m).unwrap_or_default();
        self.cases.push(Case { name: name.into(), route: "/v1/messages", body, ids: vec![id], expect });
    }

    /// A message whose body value is raw JSON text, for what no encoder writes.
    fn raw(&mut self, name: &str, tag: &str, body_json: &[u8], expect: Expect) {
        let id = self.id(tag);
        let head = json!({"id": id, "sender": "poison-sender", "recipient": "poison-recipient", "sent_at": SENT_AT})
            .to_string();
        let mut body = head.as_bytes()[..head.len() - 1].to_vec();
        body.extend_from_slice(b", \"body\": ");
        body.extend_from_slice(body_json);
        body.push(b'}');
        self.cases.push(Case { name: name.into(), route: "/v1/messages", body, ids: vec![id], expect });
    }

    fn batch(&mut self, name: &str, items: Vec<Value>, expect: Expect) {
        let ids = items.iter().map(|m| m["id"].as_str().unwrap_or_default().to_string()).collect();
        let body = serde_json::to_vec(&items).unwrap_or_default();
        self.cases.push(Case { name: name.into(), route: "/v1/messages/batch", body, ids, expect });
    }
}

/// The whole corpus; every id starts with `prefix`.
pub(super) fn corpus(prefix: &str) -> Vec<Case> {
    use Expect::*;
    let mut c = Corpus { prefix: prefix.into(), cases: Vec::new() };
    let with = |c: &Corpus, tag: &str, key: &str, v: Value| {
        let mut m = c.m(tag);
        m[key] = v;
        m
    };
    // sent_at at and past the edges of what every store holds (UTC years 1000..9999).
    for (tag, t, e) in [
        ("d-0000p0001", "0000-01-01T00:00:00+00:01", Either), // year -1 in UTC
        ("d-9999m0001", "9999-12-31T23:59:59-00:01", Either), // year 10000 in UTC
        ("d-1000z", "1000-01-01T00:00:00Z", Valid),
        ("d-9999us", "9999-12-31T23:59:59.999999Z", Valid),
        ("d-9999ns", "9999-12-31T23:59:59.9999999Z", Either),
        ("d-0999", "0999-12-31T23:59:59Z", Either),
        ("d-leapsec", "2016-12-31T23:59:60Z", Either),
        ("d-lowercase", "2024-02-29t12:00:00z", Either),
        ("d-feb30", "2024-02-30T00:00:00Z", Invalid),
        ("d-nooffset", "2024-02-29T12:00:00", Invalid),
    ] {
        let m = with(&c, tag, "sent_at", json!(t));
        c.single(tag, m, e);
    }
    let mut absent = c.m("d-absent");
    absent.as_object_mut().map(|o| o.remove("sent_at"));
    c.single("d-absent", absent, Valid); // the ingest's clock gives it one

    // Maximum field lengths, and one past them.
    let id64: String = format!("{}{}", c.id("id64-"), "x".repeat(64)).chars().take(64).collect();
    let id65: String = format!("{}{}", c.id("id65-"), "x".repeat(65)).chars().take(65).collect();
    let m = msg(&id64, "poison-sender", "poison-recipient", "poison", Some(SENT_AT));
    c.single("id-64", m, Valid);
    let m = msg(&id64, "poison-sender", "poison-recipient", "posted twice: stored once", Some(SENT_AT));
    c.single("id-64-again", m, Valid);
    c.single("id-65", msg(&id65, "poison-sender", "poison-recipient", "poison", Some(SENT_AT)), Invalid);
    let bad = c.id("bad id");
    c.single("id-bad-char", msg(&bad, "poison-sender", "poison-recipient", "poison", Some(SENT_AT)), Invalid);
    for (name, tag, key, v, e) in [
        ("sender-64", "s64", "sender", "s".repeat(64), Valid),
        ("sender-65", "s65", "sender", "s".repeat(65), Invalid),
        ("recipient-64", "r64", "recipient", "r".repeat(64), Valid),
        ("recipient-65", "r65", "recipient", "r".repeat(65), Invalid),
        ("sender-empty", "s0", "sender", String::new(), Invalid),
        ("body-16384", "b16384", "body", "b".repeat(MAXB), Valid),
        ("body-16385", "b16385", "body", "b".repeat(MAXB + 1), Invalid),
        ("body-16384-4byte", "b4096x4", "body", "\u{1F600}".repeat(MAXB / 4), Valid),
        ("body-16388-4byte", "b4097x4", "body", "\u{1F600}".repeat(MAXB / 4 + 1), Invalid),
        ("body-16384-2byte", "b8192x2", "body", "\u{e9}".repeat(MAXB / 2), Valid),
        ("body-16384-nul", "b16384nul", "body", "\u{0}".repeat(MAXB), Either),
        ("body-empty", "b0", "body", String::new(), Either),
    ] {
        let m = with(&c, tag, key, json!(v));
        c.single(name, m, e);
    }
    let mut astral = with(&c, "s64a", "sender", json!("\u{1F600}".repeat(64)));
    astral["recipient"] = json!("\u{20000}".repeat(64));
    c.single("sender-64-astral", astral, Either);

    // Every Unicode plane.
    for p in 0u32..17 {
        let chars: Vec<char> = match p {
            0 => "\u{e9}\u{4e2d}\u{200b}\u{feff}\u{fffd}\u{ffff}\u{d7ff}\u{e000}".chars().collect(),
            1 => "\u{10000}\u{1F600}\u{1D11E}\u{1FFFF}".chars().collect(),
            2 => "\u{20000}\u{2A6D6}\u{2FFFD}".chars().collect(),
            14 => "\u{E0001}\u{E0041}\u{E0100}".chars().collect(),
            15 => "\u{F0000}\u{FFFFD}".chars().collect(),
            16 => "\u{100000}\u{10FFFD}\u{10FFFF}".chars().collect(),
            _ => [0u32, 0x100, 0xFFFD].iter().filter_map(|o| char::from_u32(p * 0x10000 + o)).collect(),
        };
        let cycle = |n: usize| chars.iter().cycle().take(n).collect::<String>();
        let first = chars.first().copied().unwrap_or('x').to_string().repeat(64);
        let tag = format!("plane{p:02}");
        let mut m = with(&c, &tag, "sender", json!(cycle(64)));
        m["recipient"] = json!(first);
        m["body"] = json!(cycle(2000));
        c.single(&format!("plane-{p:02}"), m, Either);
    }
    c.raw("json-surrogate-pair", "surrpair", br#""\ud83d\ude00 escaped pair""#, Valid);
    c.raw("json-lone-surrogate", "surrlone", br#""\ud800 lone""#, Invalid);
    c.raw("raw-invalid-utf8", "badutf8", b"\"\xff\xfe bytes\"", Invalid);
    c.raw("raw-nul-in-string", "rawnul", b"\"a\x00b\"", Invalid);

    // NUL and control characters, escaped (valid JSON).
    let controls: String = (0u8..32).map(char::from).chain(['\u{7f}', '\u{85}', '\u{2028}', '\u{2029}']).collect();
    for (name, tag, key, v) in [
        ("nul-body", "nulbody", "body", "a\u{0}b\u{0}".to_string()),
        ("nul-sender", "nulsender", "sender", "s\u{0}s".to_string()),
        ("nul-recipient", "nulrecip", "recipient", "\u{0}".to_string()),
        ("controls-body", "ctrl", "body", controls),
    ] {
        let m = with(&c, tag, key, json!(v));
        c.single(name, m, Either);
    }

    // Batches: the largest allowed, by count and by bytes, and one past.
    let many = |c: &Corpus, tag: &str, n: usize, body: &str| -> Vec<Value> {
        (0..n).map(|k| with(c, &format!("{tag}-{k:04}"), "body", json!(body))).collect()
    };
    let b = many(&c, "b1k", 1000, "poison");
    c.batch("batch-1000", b, Valid);
    let b = many(&c, "b1k8", 1000, &"m".repeat(8000));
    c.batch("batch-1000x8000B", b, Valid);
    let b = many(&c, "b480", 480, &"M".repeat(MAXB));
    c.batch("batch-480x16384B", b, Valid);
    let b = many(&c, "b1001", 1001, "poison");
    c.batch("batch-1001", b, Invalid);
    let b = many(&c, "bbig", 520, &"B".repeat(MAXB));
    c.batch("batch-over-8MiB", b, Invalid);
    let mut b = many(&c, "bbad", 5, "poison");
    b.push(with(&c, "bbad-5", "sender", json!("")));
    c.batch("batch-one-bad-item", b, Invalid);
    let b = vec![c.m("bdup"), with(&c, "bdup", "body", json!("second"))];
    c.batch("batch-dup-id", b, Either);
    c.batch("batch-empty", Vec::new(), Either);
    c.cases
}

/// `id:digest` when the stores' form of `m` is known, else the bare id.
fn token(m: &Value) -> Option<String> {
    let id = m["id"].as_str()?;
    let field = |k: &str| m[k].as_str();
    match (field("sender"), field("recipient"), field("body"), field("sent_at")) {
        (Some(s), Some(r), Some(b), Some(SENT_AT)) => {
            Some(format!("{id}:{}", digest::hex(digest::sent(s, r, b, SENT_AT))))
        }
        _ => Some(id.to_string()),
    }
}

#[derive(Debug, Serialize)]
pub(super) struct Outcome {
    pub case: String,
    pub route: &'static str,
    pub bytes: usize,
    pub messages: usize,
    pub expect: Expect,
    pub status: u16,
    pub answer: String,
    pub seconds: f64,
    pub ok: bool,
    pub problems: Vec<String>,
}

/// The id sets of a corpus run, for reconcile.
#[derive(Debug, Default)]
pub(super) struct Ids {
    pub accepted: Vec<String>,
    pub uncertain: Vec<String>,
    pub refused: Vec<String>,
}

/// Sends every case to `base` (one request each, in order) and judges the answers.
pub(super) async fn send(
    http: &reqwest::Client,
    base: &str,
    token_header: Option<&str>,
    cases: &[Case],
) -> (Vec<Outcome>, Ids) {
    let mut ids = Ids::default();
    let mut out = Vec::new();
    for case in cases {
        let t0 = std::time::Instant::now();
        let mut req = http
            .post(format!("{base}{}", case.route))
            .header("content-type", "application/json")
            .body(case.body.clone());
        if let Some(t) = token_header {
            req = req.bearer_auth(t);
        }
        let (status, text) = match req.send().await {
            Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
            Err(e) => (0, format!("{e}")),
        };
        let mut problems = Vec::new();
        match status {
            202 => {
                let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                let got: Vec<String> = match answer.get("ids") {
                    Some(a) => a
                        .as_array()
                        .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
                        .unwrap_or_default(),
                    None => answer["id"].as_str().map(|s| vec![s.to_string()]).unwrap_or_default(),
                };
                // What the stores must hold: per id, the last item sent with it (a later item of
                // a batch gets the later version, which every store keeps).
                let sent: Value = serde_json::from_slice(&case.body).unwrap_or(Value::Null);
                let items = match &sent {
                    Value::Array(a) => a.clone(),
                    v => vec![v.clone()],
                };
                let mut tokens = std::collections::HashMap::new();
                for it in &items {
                    if let (Some(id), Some(t)) = (it["id"].as_str(), token(it)) {
                        tokens.insert(id.to_string(), t);
                    }
                }
                let mut seen = std::collections::BTreeSet::new();
                for id in got.iter().filter(|i| seen.insert((*i).clone())) {
                    ids.accepted.push(tokens.get(id).cloned().unwrap_or_else(|| id.clone()));
                }
                let want: std::collections::BTreeSet<&String> = case.ids.iter().collect();
                if seen.iter().collect::<std::collections::BTreeSet<_>>() != want {
                    problems.push(format!("202 names {} ids, not the {} sent", seen.len(), want.len()));
                }
                if case.expect == Expect::Invalid {
                    problems.push("the contract refuses it, the ingest accepted it".into());
                }
            }
            400..=499 => {
                ids.refused.extend(case.ids.iter().cloned());
                if case.expect == Expect::Valid {
                    problems.push("a valid message was refused".into());
                }
            }
            other => {
                if other == 503 {
                    ids.refused.extend(case.ids.iter().cloned());
                } else {
                    ids.uncertain.extend(case.ids.iter().cloned());
                }
                problems.push(format!("answer {other}: neither 202 nor a 4xx"));
            }
        }
        out.push(Outcome {
            case: case.name.clone(),
            route: case.route,
            bytes: case.body.len(),
            messages: case.ids.len(),
            expect: case.expect,
            status,
            answer: text.chars().take(300).collect(),
            seconds: (t0.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
            ok: problems.is_empty(),
            problems,
        });
    }
    (out, ids)
}

/// Writes `poison.json` and the id files `poison-{accepted,uncertain,refused}.ids`.
pub(super) fn write(dir: &Path, outcomes: &[Outcome], ids: &Ids) -> std::io::Result<()> {
    std::fs::write(dir.join("poison.json"), serde_json::to_string_pretty(outcomes).unwrap_or_default())?;
    for (class, list) in [("accepted", &ids.accepted), ("uncertain", &ids.uncertain), ("refused", &ids.refused)] {
        let text: String = list.iter().filter(|i| !i.contains('\n')).map(|i| format!("{i}\n")).collect();
        std::fs::write(dir.join(format!("poison-{class}.ids")), text)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_corpus_covers_its_edges() {
        let cases = corpus("p");
        assert_eq!(cases.len(), 61, "{}", cases.len());
        let by = |n: &str| cases.iter().find(|c| c.name == n).expect(n);
        assert_eq!(by("id-64").ids[0].len(), 64);
        assert_eq!(by("id-65").ids[0].len(), 65);
        assert_eq!(by("batch-1000").ids.len(), 1000);
        assert!(by("batch-over-8MiB").body.len() > 8 << 20);
        assert!(std::str::from_utf8(&by("raw-invalid-utf8").body).is_err());
        let v: Value = serde_json::from_slice(&by("body-16384-4byte").body).expect("json");
        assert_eq!(v["body"].as_str().map(str::len), Some(MAXB));
        assert!(token(&v).is_some_and(|t| t.contains(':')));
    }
}
