//! `RECLAIM.POLICY LIST`'s options: the page (`AFTER key group`, `COUNT`).

use super::args::number;
use crate::error::ReclaimError;
use crate::text::printable;

/// A page of `RECLAIM.POLICY LIST`: the policies after (`key`, `group`) in the listing's order,
/// at most `count` of them. Both `None`: every policy.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ListPage<'a> {
    /// List only the policies after this (key, group), in byte order of key then group.
    pub after: Option<(&'a [u8], &'a [u8])>,
    /// List at most this many.
    pub count: Option<usize>,
}

/// Parses `RECLAIM.POLICY LIST [AFTER key group] [COUNT n]` options (after `LIST`), in any order.
/// Errors: unknown or repeated option, missing value, COUNT < 1.
pub fn parse_list_options<'a>(opts: &[&'a [u8]]) -> Result<ListPage<'a>, ReclaimError> {
    let mut page = ListPage::default();
    let mut i = 0;
    while i < opts.len() {
        let o = opts[i];
        if o.eq_ignore_ascii_case(b"AFTER") {
            if page.after.is_some() {
                return Err(ReclaimError::RepeatedOption("AFTER"));
            }
            let (Some(k), Some(g)) = (opts.get(i + 1), opts.get(i + 2)) else {
                return Err(ReclaimError::MissingValue("AFTER"));
            };
            page.after = Some((k, g));
            i += 3;
        } else if o.eq_ignore_ascii_case(b"COUNT") {
            if page.count.is_some() {
                return Err(ReclaimError::RepeatedOption("COUNT"));
            }
            let v = *opts.get(i + 1).ok_or(ReclaimError::MissingValue("COUNT"))?;
            let n = number("COUNT", "a positive integer", v, 1, i64::MAX)?;
            page.count = Some(usize::try_from(n).unwrap_or(usize::MAX));
            i += 2;
        } else {
            return Err(ReclaimError::UnknownOption(printable(o)));
        }
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_options() {
        let parse = |opts: &[&str]| {
            let o: Vec<&[u8]> = opts.iter().map(|s| s.as_bytes()).collect();
            parse_list_options(&o)
                .map(|p| (p.after.map(|(k, g)| (k.to_vec(), g.to_vec())), p.count))
                .map_err(|e| e.to_string())
        };
        assert_eq!(parse(&[]), Ok((None, None)));
        assert_eq!(
            parse(&["count", "2", "AFTER", "k", "g"]),
            Ok((Some((b"k".to_vec(), b"g".to_vec())), Some(2)))
        );
        assert_eq!(
            parse(&["AFTER", "", ""]),
            Ok((Some((vec![], vec![])), None))
        );
        let err = |opts: &[&str], want: &str| assert_eq!(parse(opts), Err(want.to_string()));
        err(&["COUNT", "0"], "ERR COUNT must be a positive integer");
        err(&["COUNT", "-1"], "ERR COUNT must be a positive integer");
        err(&["COUNT", "x"], "ERR COUNT must be a positive integer");
        err(&["COUNT"], "ERR option COUNT needs a value");
        err(&["AFTER", "k"], "ERR option AFTER needs a value");
        err(
            &["COUNT", "1", "COUNT", "2"],
            "ERR option COUNT given more than once",
        );
        err(
            &["AFTER", "a", "b", "AFTER", "c", "d"],
            "ERR option AFTER given more than once",
        );
        err(&["LIMIT", "2"], "ERR unknown option 'LIMIT'");
    }
}
