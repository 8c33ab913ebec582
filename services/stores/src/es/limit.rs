//! What one request may carry to this server: `http.max_content_length` (100 MB by default), a
//! node setting the writer can read but not change. A bulk request larger than it is refused with
//! 413 before any document is looked at.

use super::codec::op;
use super::{err, json_of, KIND};
use crate::limits::{fits, unchecked};
use crate::StoreError;
use elasticsearch::http::request::Body;
use elasticsearch::params::VersionType;
use elasticsearch::Elasticsearch;
use pipeline_common::message::Message;

const SETTING: &str = "http.max_content_length";

/// Fails unless the server takes each message alone in a bulk request, sized in repair's form
/// (`external_gte`, a few bytes longer than the writer's `external`), so both fit. Reading the
/// setting needs the cluster `monitor` privilege; a user without it (401/403), or a value this
/// cannot read, leaves the check undone with a warning rather than stopping the writer: the
/// default is 25 times the JSON of the edge's largest message.
pub(super) async fn holds(client: &Elasticsearch, largest: &[Message]) -> Result<(), StoreError> {
    let resp = client
        .cluster()
        .get_settings()
        .include_defaults(true)
        .filter_path(&["*.http.max_content_length"])
        .send()
        .await
        .map_err(err)?;
    if let status @ (401 | 403) = resp.status_code().as_u16() {
        return unchecked(KIND, SETTING, format!("GET _cluster/settings: HTTP {status}"));
    }
    let settings = json_of(resp, "cluster settings").await?;
    // A node setting: in `defaults` (with the node's own file applied) unless set in the cluster.
    let value = ["transient", "persistent", "defaults"]
        .iter()
        .find_map(|scope| settings[scope]["http"]["max_content_length"].as_str())
        .ok_or_else(|| StoreError::transient(KIND, format!("no http.max_content_length in {settings}")))?;
    let Some(allows) = byte_size(value) else {
        return unchecked(KIND, SETTING, format!("{value:?} is not a byte size this reads"));
    };
    // The HTTP layer holds the limit in a Java int.
    let allows = allows.min(i32::MAX as u64);
    let needs = largest.iter().map(|m| {
        let mut body = bytes::BytesMut::new();
        op(m, VersionType::ExternalGte).write(&mut body).map_err(|e| StoreError::permanent_from(KIND, e))?;
        Ok(body.len() as u64)
    });
    fits(KIND, SETTING, allows, needs)
}

/// A byte size as Elasticsearch and OpenSearch write them (`100mb`, `1gb`, `512kb`, `1048576b`,
/// `1.5gb`): binary units, any case. Hand-written because the crates that parse sizes read `mb`
/// as 10^6 bytes, where these servers mean 2^20.
fn byte_size(s: &str) -> Option<u64> {
    let s = s.trim().to_ascii_lowercase();
    let digits = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (number, unit) = s.split_at(digits);
    let shift = match unit.trim() {
        "b" => 0,
        "k" | "kb" => 10,
        "m" | "mb" => 20,
        "g" | "gb" => 30,
        "t" | "tb" => 40,
        "p" | "pb" => 50,
        _ => return None,
    };
    match number.parse::<u64>() {
        Ok(n) => n.checked_mul(1 << shift),
        Err(_) => number
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite() && *f >= 0.0)
            .map(|f| (f * (1u64 << shift) as f64) as u64),
    }
}

#[cfg(test)]
mod tests {
    use super::byte_size;

    #[test]
    fn sizes_read_as_the_server_means_them() {
        assert_eq!(byte_size("100mb"), Some(100 << 20));
        assert_eq!(byte_size("100MB"), Some(100 << 20));
        assert_eq!(byte_size("512kb"), Some(512 << 10));
        assert_eq!(byte_size("1048576b"), Some(1 << 20));
        assert_eq!(byte_size("1.5gb"), Some(3 << 29));
        assert_eq!(byte_size("2g"), Some(2 << 30));
        for bad in ["", "mb", "100", "-1b", "100 lightyears", "1e3mb"] {
            assert_eq!(byte_size(bad), None, "{bad}");
        }
    }
}
