//! Entry IDs (`ms-seq`) as numbers, and the ID windows a scan reads: their first width and how
//! it adapts to the time a window took.

/// Parses a stream entry ID (`ms-seq`, or `ms` meaning `ms-0`) into a comparable pair.
pub fn parse_id(id: &[u8]) -> Option<(u64, u64)> {
    match id.iter().position(|&b| b == b'-') {
        Some(dash) => Some((parse_u64(&id[..dash])?, parse_u64(&id[dash + 1..])?)),
        None => Some((parse_u64(id)?, 0)),
    }
}

/// A u64 as `str::parse` reads one (decimal digits after an optional `+`), without its UTF-8
/// check: read per pending entry, several times a step. `None` when there are no digits, a
/// byte is not one, or it is above `u64::MAX`.
fn parse_u64(s: &[u8]) -> Option<u64> {
    let s = s.strip_prefix(b"+").unwrap_or(s);
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0u64, |n, &b| {
        if b.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

/// Whether a pending entry was trimmed away: its ID is below the stream's first entry (`first`,
/// `None` when the stream is empty). Stream IDs only grow, so such an entry cannot exist.
pub(crate) fn is_trimmed(id: &[u8], first: Option<(u64, u64)>) -> bool {
    match (parse_id(id), first) {
        (Some(i), Some(f)) => i < f,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// An entry ID as one number (`ms << 64 | seq`), so that ID windows can be sized by arithmetic.
pub fn id_value(id: (u64, u64)) -> u128 {
    ((id.0 as u128) << 64) | id.1 as u128
}

/// The ID text (`ms-seq`) of an [`id_value`].
pub fn id_text(v: u128) -> String {
    format!("{}-{}", (v >> 64) as u64, v as u64)
}

/// Width (in [`id_value`] units) of the first ID window of a pass: small, because a bulk-loaded
/// stream can hold a million entries within one millisecond.
pub const FIRST_WINDOW: u128 = 1024;

/// The scan time one windowed `XPENDING ... IDLE` call aims at, in µs.
pub const WINDOW_TARGET_US: u64 = 100;

/// The end of the next ID window after `start` (exclusive), `width` wide; `None` when the window
/// reaches the stream's last entry `last`, i.e. the scan can go to `+`.
pub fn window_end(start: u128, width: u128, last: u128) -> Option<u128> {
    let end = start.saturating_add(width.max(1));
    if end >= last {
        None
    } else {
        Some(end)
    }
}

/// The next window width after a window of `width` took `took_us` µs to scan: scaled toward
/// [`WINDOW_TARGET_US`], by at most 4x up (so a sparse stretch followed by a dense one overshoots
/// the target at most 4x) and 16x down per window, never below [`FIRST_WINDOW`]. The cost of
/// `XPENDING ... IDLE` grows with the entries in the window, so the width follows the PEL's
/// density without knowing it.
pub fn next_width(width: u128, took_us: u64) -> u128 {
    let w = width.max(FIRST_WINDOW);
    let took = took_us.max(1) as u128;
    let target = WINDOW_TARGET_US as u128;
    let scaled = if took * 4 <= target {
        w.saturating_mul(4)
    } else if took >= target * 16 {
        w / 16
    } else {
        w.saturating_mul(target) / took
    };
    scaled.clamp(FIRST_WINDOW, u128::MAX / 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_windows() {
        assert_eq!(id_value((1, 2)), (1u128 << 64) | 2);
        assert_eq!(id_text(id_value((1795943711775, 7))), "1795943711775-7");
        assert_eq!(window_end(10, 5, 100), Some(15));
        assert_eq!(window_end(10, 500, 100), None);
        assert_eq!(window_end(u128::MAX - 1, 5, u128::MAX), None);
        // A fast window grows at most 4x, a slow one shrinks at most 16x, never below the floor.
        assert_eq!(next_width(4096, 1), 4096 * 4);
        assert_eq!(next_width(1 << 40, 100_000), (1 << 40) / 16);
        assert_eq!(next_width(4096, 200), 2048);
        assert_eq!(next_width(2048, 10_000), FIRST_WINDOW);
        assert_eq!(next_width(u128::MAX, 1), u128::MAX / 4);
    }
}
