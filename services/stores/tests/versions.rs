//! The version rule in every real store: of two messages with one id, the store keeps the higher
//! version, whatever order they are written in (separate batches either way, one batch either
//! way, redelivered); repair's `OlderOrSame` also replaces a damaged copy of the same version
//! and still never a newer one. And the audit side: fingerprints, fetch and delete by id.

use pipeline_common::digest::Digest;
use pipeline_common::message::normalize_sent_at;
use pipeline_common::Message;
use pipeline_stores::Overwrite::{Older, OlderOrSame};
use pipeline_testkit::{exclusive, Namespace};

fn msg(id: &str, body: &str, version: u64) -> Message {
    Message {
        id: id.into(),
        sender: "alice \u{0} \"q\"".into(),
        recipient: "bob 🦀".into(),
        body: body.into(),
        sent_at: normalize_sent_at(time::macros::datetime!(2026-12-01 10:00:00.123 UTC)),
        version,
    }
}

#[tokio::test]
async fn every_store_keeps_the_newer_version_in_any_order() {
    let _g = exclusive().await;
    let ns = Namespace::new("versions").await;
    for store in ns.stores().await {
        let kind = store.kind();
        let w = |batch: Vec<Message>, o| {
            let s = store.clone();
            async move { assert!(s.write(&batch, o).await.unwrap().is_empty(), "{kind}: nothing refused") }
        };
        // Separate batches, newer first and newer last; one batch, both orders.
        w(vec![msg("a", "new", 20)], Older).await;
        w(vec![msg("a", "old", 10)], Older).await;
        w(vec![msg("b", "old", 10)], Older).await;
        w(vec![msg("b", "new", 20)], Older).await;
        w(vec![msg("c", "new", 20), msg("c", "old", 10)], Older).await;
        w(vec![msg("d", "old", 10), msg("d", "new", 20)], Older).await;
        // Redelivery of both versions changes nothing.
        w(vec![msg("a", "old", 10), msg("a", "new", 20), msg("b", "old", 10)], Older).await;
        // A damaged copy of the same version: the writer leaves it, repair replaces it...
        w(vec![msg("e", "damaged", 30)], Older).await;
        w(vec![msg("e", "right", 30)], Older).await;
        let e = store.fetch(&["e".to_string()]).await.unwrap();
        assert_eq!(e[0].body, "damaged", "{kind}: the writer never rewrites the same version");
        w(vec![msg("e", "right", 30)], OlderOrSame).await;
        // ...but never a newer one.
        w(vec![msg("a", "old", 10)], OlderOrSame).await;
        let ids: Vec<String> = ["a", "b", "c", "d", "e", "absent"].iter().map(|s| s.to_string()).collect();
        let mut got = store.fetch(&ids).await.unwrap();
        got.sort_by(|x, y| x.id.cmp(&y.id));
        let want = vec![
            msg("a", "new", 20),
            msg("b", "new", 20),
            msg("c", "new", 20),
            msg("d", "new", 20),
            msg("e", "right", 30),
        ];
        assert_eq!(got, want, "{kind}");
        assert_eq!(store.count().await.unwrap(), 5, "{kind}: one copy each");
        let mut audited = store.audit("").await.unwrap();
        audited.sort_by(|x, y| x.id.cmp(&y.id));
        let digests: Vec<_> = audited.iter().map(|a| (a.id.clone(), a.digest)).collect();
        let expected: Vec<_> = want.iter().map(|m| (m.id.clone(), Some(Digest::of_message(m)))).collect();
        assert_eq!(digests, expected, "{kind}: the fingerprint of what it holds, in the canonical form");
        store.delete(&["a".to_string(), "absent".to_string()]).await.unwrap();
        assert_eq!(store.count().await.unwrap(), 4, "{kind}: deleted by id");
        assert!(store.fetch(&["a".to_string()]).await.unwrap().is_empty(), "{kind}");
    }
}

/// The largest messages the edge may accept (`MAX_BODY_BYTES` at its bound, every name at its
/// longest, in the content that grows most on the way: four-byte characters, and a control
/// character, six bytes in JSON) pass every real store's own check of its server (`Sink::holds`,
/// which the writer runs at startup) and land whole in it, alone and two in one batch: no store
/// refuses what the edge could accept, and the check agrees with the store.
#[tokio::test]
async fn every_store_holds_the_largest_body_the_edge_may_allow() {
    use pipeline_common::message::{Limits, MAX_STORABLE_BODY_BYTES};
    let _g = exclusive().await;
    let ns = Namespace::new("bigbody").await;
    let largest = pipeline_common::largest::messages(Limits { max_body_bytes: MAX_STORABLE_BODY_BYTES });
    let named = |m: &Message, id: &str| Message { id: format!("{id:x<64}"), ..m.clone() };
    let (one, two, three) = (named(&largest[0], "big-1"), named(&largest[1], "big-2"), named(&largest[0], "big-3"));
    for store in ns.stores().await {
        let kind = store.kind();
        store.holds(&largest).await.unwrap_or_else(|e| panic!("{kind}: its server refuses the edge's bound: {e}"));
        let refused = store.write(std::slice::from_ref(&one), Older).await.unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert!(refused.is_empty(), "{kind} refused a body of {MAX_STORABLE_BODY_BYTES} bytes");
        let refused = store.write(&[two.clone(), three.clone()], Older).await.unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert!(refused.is_empty(), "{kind} refused two bodies of {MAX_STORABLE_BODY_BYTES} bytes in one batch");
        let ids = [one.id.clone(), two.id.clone(), three.id.clone()];
        let mut got = store.fetch(&ids).await.unwrap_or_else(|e| panic!("{kind}: {e}"));
        got.sort_by(|x, y| x.id.cmp(&y.id));
        assert!(got == [one.clone(), two.clone(), three.clone()], "{kind}: the three came back changed or not at all");
    }
}
