//! `reconcile show ID...`: each id as every store holds it, side by side, and whether the stores
//! agree. What a person checks by hand after posting a message; the README's first message
//! ends with it.

use crate::exit::MISMATCH;
use pipeline_common::Message;
use pipeline_stores::Store;
use serde_json::json;
use std::sync::Arc;

/// Prints every id as each store holds it; 0 when every store holds every id with the same
/// content, [`MISMATCH`] otherwise.
pub(crate) async fn run(stores: &[Arc<dyn Store>], ids: &[String], as_json: bool) -> anyhow::Result<u8> {
    let mut held: Vec<Vec<Message>> = Vec::with_capacity(stores.len());
    for s in stores {
        held.push(s.fetch(ids).await?);
    }
    let mut all_same = true;
    let mut out = Vec::new();
    for id in ids {
        let copies: Vec<Option<&Message>> = held.iter().map(|h| h.iter().find(|m| &m.id == id)).collect();
        let same = copies.iter().all(|c| c.is_some() && *c == copies[0]);
        all_same &= same;
        if as_json {
            let by_store: serde_json::Map<String, serde_json::Value> =
                stores.iter().zip(&copies).map(|(s, c)| (s.kind().to_string(), json!(c))).collect();
            out.push(json!({ "id": id, "same": same, "stores": by_store }));
            continue;
        }
        let names: Vec<String> = stores.iter().map(|s| s.kind().to_string()).collect();
        match (same, copies[0]) {
            (true, Some(m)) => {
                println!("{id}: the same in all {} stores ({})", stores.len(), names.join(", "));
                println!("  {}", describe(m));
            }
            _ => {
                println!("{id}: the stores differ");
                for (name, c) in names.iter().zip(&copies) {
                    println!("  {name:<6} {}", c.map_or("(absent)".to_string(), describe));
                }
            }
        }
    }
    if as_json {
        println!("{}", json!({ "ids": out, "same": all_same }));
    }
    Ok(if all_same { 0 } else { MISMATCH })
}

fn describe(m: &Message) -> String {
    let sent_at = m.sent_at.format(&time::format_description::well_known::Rfc3339).unwrap_or_default();
    format!(
        "version {}  sender {:?}  recipient {:?}  sent_at {sent_at}  body {:?}",
        m.version, m.sender, m.recipient, m.body
    )
}
