//! What the option grammars of the policy's commands share.

use crate::error::ReclaimError;
use crate::text::parse_i64;

/// The integer `v` when it is in `min..=max`; otherwise the option's error
/// ([`ReclaimError::BadNumber`]: `name` must be `range`).
pub(super) fn number(
    name: &'static str,
    range: &'static str,
    v: &[u8],
    min: i64,
    max: i64,
) -> Result<i64, ReclaimError> {
    match parse_i64(v) {
        Some(n) if n >= min && n <= max => Ok(n),
        _ => Err(ReclaimError::BadNumber(name, range)),
    }
}
