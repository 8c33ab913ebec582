//! What one request may carry to this server. MariaDB and MySQL refuse a request longer than
//! `max_allowed_packet` (error 1153): a server setting the writer cannot change, 16 MiB by
//! MariaDB's default, 64 MiB by MySQL 8.0's and 4 MiB by MySQL 5.7's, and often set by operators.

use super::insert;
use super::{datetime, err, KIND};
use crate::limits::fits;
use crate::{Overwrite, StoreError};
use pipeline_common::message::Message;
use sqlx::MySqlPool;

/// Room a batch request keeps below `max_allowed_packet`: the protocol's command byte and more
/// than any closing clause `insert::requests` may add past its estimate.
const PACKET_MARGIN: usize = 1024;

/// The server's `max_allowed_packet`, in bytes.
pub(super) async fn max_allowed_packet(pool: &MySqlPool) -> Result<u64, StoreError> {
    let (n,): (u64,) = sqlx::query_as("SELECT @@max_allowed_packet").fetch_one(pool).await.map_err(err)?;
    Ok(n)
}

/// The most SQL one batch request carries to a server whose packet is `packet` bytes:
/// [`insert::MAX_REQUEST_BYTES`], or less on a server set lower. (A larger request would be
/// refused with 1153 and the batch split in halves by the writer's retries until it fits:
/// stored in the end, but at the cost of every refused request.)
pub(super) fn request_bytes(packet: u64) -> usize {
    usize::try_from(packet).unwrap_or(usize::MAX).saturating_sub(PACKET_MARGIN).min(insert::MAX_REQUEST_BYTES)
}

/// Fails unless a server whose packet is `packet` bytes takes each message alone: a batch is
/// split down to one message before the writer gives up on it, and one message is one
/// transaction of `START TRANSACTION`, one INSERT and `COMMIT` in a single request. Sized in
/// repair's form (`OlderOrSame`), a few bytes longer than the writer's, so both fit.
pub(super) fn holds(packet: u64, largest: &[Message]) -> Result<(), StoreError> {
    fits(KIND, "max_allowed_packet", packet, largest.iter().map(packet_needed))
}

/// The `max_allowed_packet` that takes `m` alone: its one request (a single row is one request
/// whatever the batch bound), the command byte before it, and one byte more, since the server
/// refuses a packet whose length reaches the setting (`net_realloc`: `length >= max_packet_size`).
fn packet_needed(m: &Message) -> Result<u64, StoreError> {
    let at = datetime(m).ok_or_else(|| StoreError::permanent(KIND, format!("sent_at {} out of range", m.sent_at)))?;
    let mut rows = insert::ByShard::new();
    rows.entry(m.shard()).or_default().push((m, at));
    let request = insert::requests(&rows, insert::MAX_REQUEST_BYTES, Overwrite::OlderOrSame);
    Ok(request.iter().map(|r| r.len() as u64 + 2).max().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline_common::largest::messages;
    use pipeline_common::message::{Limits, MAX_STORABLE_BODY_BYTES};

    #[test]
    fn the_edge_bound_fits_mariadbs_default_and_not_mysql_5_7s() {
        let largest = messages(Limits { max_body_bytes: MAX_STORABLE_BODY_BYTES });
        assert!(holds(16 << 20, &largest).is_ok());
        let e = holds(4 << 20, &largest).expect_err("4 MiB of body is 8 MiB of hex");
        assert!(!e.transient && e.message.contains("max_allowed_packet is 4194304 bytes"), "{e}");
        // The default body fits even MySQL 5.7's packet.
        assert!(holds(4 << 20, &messages(Limits::default())).is_ok());
    }

    #[test]
    fn the_bound_is_exact_to_the_byte() {
        let largest = messages(Limits { max_body_bytes: 1000 });
        let needs = |m: &Message| packet_needed(m).unwrap_or_else(|e| panic!("{e}"));
        let most = largest.iter().map(needs).max().unwrap_or(0);
        assert!(most > 2 * 1000, "{most}: the body alone is 2,000 bytes of hex");
        assert!(holds(most, &largest).is_ok());
        assert!(holds(most - 1, &largest).is_err());
    }

    #[test]
    fn batch_requests_stay_below_a_small_packet() {
        assert_eq!(request_bytes(64 << 20), insert::MAX_REQUEST_BYTES);
        assert_eq!(request_bytes(1 << 20), (1 << 20) - PACKET_MARGIN);
        assert_eq!(request_bytes(100), 0);
    }
}
