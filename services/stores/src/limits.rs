//! The two verdicts of [`Sink::holds`](crate::Sink::holds), for each store's `limit.rs`: the
//! server takes the largest message or names what to change, or it would not say and the check
//! is left undone.

use crate::{StoreError, StoreKind};
use std::fmt;

/// The verdict of [`Sink::holds`](crate::Sink::holds), from each largest message's size in the
/// store's encoding (`needs`) and the server's `setting`: a refusal names the setting and the most
/// any of them needs, so that one change is enough.
pub(crate) fn fits(
    kind: StoreKind,
    setting: &str,
    allows: u64,
    needs: impl IntoIterator<Item = Result<u64, StoreError>>,
) -> Result<(), StoreError> {
    let mut most = 0;
    for n in needs {
        most = most.max(n?);
    }
    if most <= allows {
        return Ok(());
    }
    Err(StoreError::permanent(
        kind,
        format!(
            "{setting} is {allows} bytes on this server, and the largest message MAX_BODY_BYTES allows needs {most}: \
             raise {setting} or lower MAX_BODY_BYTES"
        ),
    ))
}

/// The other verdict of [`Sink::holds`](crate::Sink::holds): the server would not say what
/// `setting` is (a user without the right to read it, a compatible server without it, a value
/// this cannot read). Logged and passed, never a refusal: where it is allowed, the check stays
/// undone rather than stopping a writer the server may well serve.
pub(crate) fn unchecked(kind: StoreKind, setting: &str, why: impl fmt::Display) -> Result<(), StoreError> {
    tracing::warn!(store = kind.name(), setting, reason = %why, "cannot read the server's limit; the largest message is not checked");
    Ok(())
}
