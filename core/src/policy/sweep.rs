//! `RECLAIM.SWEEP`'s options: `LIMIT`.

use super::args::number;
use crate::error::ReclaimError;
use crate::text::printable;

/// Parses `RECLAIM.SWEEP key group [LIMIT n]` options (after `group`): the entry limit, `None`
/// for a complete pass. Errors: unknown or repeated option, missing value, LIMIT < 1.
pub fn parse_sweep_options(opts: &[&[u8]]) -> Result<Option<i64>, ReclaimError> {
    let mut limit = None;
    let mut i = 0;
    while i < opts.len() {
        if !opts[i].eq_ignore_ascii_case(b"LIMIT") {
            return Err(ReclaimError::UnknownOption(printable(opts[i])));
        }
        if limit.is_some() {
            return Err(ReclaimError::RepeatedOption("LIMIT"));
        }
        let v = *opts.get(i + 1).ok_or(ReclaimError::MissingValue("LIMIT"))?;
        limit = Some(number("LIMIT", "a positive integer", v, 1, i64::MAX)?);
        i += 2;
    }
    Ok(limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_options() {
        assert_eq!(parse_sweep_options(&[]).unwrap(), None);
        assert_eq!(parse_sweep_options(&[b"limit", b"5"]).unwrap(), Some(5));
        assert_eq!(
            parse_sweep_options(&[b"LIMIT", b"0"])
                .unwrap_err()
                .to_string(),
            "ERR LIMIT must be a positive integer"
        );
        assert_eq!(
            parse_sweep_options(&[b"LIMIT", b"1", b"LIMIT", b"2"])
                .unwrap_err()
                .to_string(),
            "ERR option LIMIT given more than once"
        );
    }
}
