//! A DLQ's retention: the trims `DLQ-MAXLEN` and `DLQ-MAXAGE` ask of a policy's DLQ, after a
//! dead-letter batch ([`after_append`]) and at the end of a pass ([`at_pass_end`]), as the
//! `XTRIM` arguments the engine runs (`engine::deadletter::Dlq::trim_dlq`). Whether the DLQ may
//! be trimmed at all (not when it is a policy's own stream, nor a key of another type) is the
//! engine's to check in the keyspace, once there is a trim to run.

use crate::policy::Policy;

/// One `XTRIM dlq <strategy> ~ <threshold>`: approximate, only whole stream nodes go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trim {
    /// `MAXLEN` or `MINID`.
    pub strategy: &'static [u8],
    /// The length kept, or the lowest ID kept.
    pub threshold: Vec<u8>,
}

/// The trims after `appended` records were appended to `p`'s DLQ at wall-clock `now_ms`: none
/// without a DLQ or an append; `MAXLEN ~ <DLQ-MAXLEN>` with `DLQ-MAXLEN`, then `MINID ~ <now -
/// DLQ-MAXAGE>-0` with `DLQ-MAXAGE` (a DLQ's IDs are the times of their moves, `XADD dlq *`).
pub fn after_append(p: &Policy, appended: u64, now_ms: i64) -> Vec<Trim> {
    let mut trims = Vec::new();
    if p.dlq.is_none() || appended == 0 {
        return trims;
    }
    if p.dlq_maxlen > 0 {
        trims.push(Trim {
            strategy: b"MAXLEN",
            threshold: p.dlq_maxlen.to_string().into_bytes(),
        });
    }
    trims.extend(by_age(p, now_ms));
    trims
}

/// The trim at the end of a pass: `MINID` by `DLQ-MAXAGE` even when nothing was appended lately,
/// so a dead letter goes within about an `INTERVAL` of passing the age, not only at the next
/// move. `None` without a DLQ or `DLQ-MAXAGE`.
pub fn at_pass_end(p: &Policy, now_ms: i64) -> Option<Trim> {
    p.dlq.as_ref()?;
    by_age(p, now_ms)
}

fn by_age(p: &Policy, now_ms: i64) -> Option<Trim> {
    (p.dlq_maxage_ms > 0).then(|| Trim {
        strategy: b"MINID",
        threshold: min_id(p.dlq_maxage_ms, now_ms),
    })
}

/// The `MINID` below which `DLQ-MAXAGE maxage_ms` trims a DLQ at `now_ms`: `<now - maxage>-0`,
/// never below `0-0`.
pub fn min_id(maxage_ms: i64, now_ms: i64) -> Vec<u8> {
    let oldest = now_ms.saturating_sub(maxage_ms).max(0);
    format!("{oldest}-0").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(dlq: bool, maxlen: i64, maxage_ms: i64) -> Policy {
        Policy {
            dlq: dlq.then(|| b"d".to_vec()),
            dlq_maxlen: maxlen,
            dlq_maxage_ms: maxage_ms,
            ..Policy::default()
        }
    }

    fn words(trims: &[Trim]) -> Vec<(String, String)> {
        trims
            .iter()
            .map(|t| {
                (
                    String::from_utf8_lossy(t.strategy).into_owned(),
                    String::from_utf8_lossy(&t.threshold).into_owned(),
                )
            })
            .collect()
    }

    fn pair(a: &str, b: &str) -> (String, String) {
        (a.to_string(), b.to_string())
    }

    #[test]
    fn an_append_trims_by_length_then_by_age() {
        let now = 1_700_000_000_000;
        assert_eq!(
            words(&after_append(&policy(true, 1000, 60_000), 3, now)),
            [pair("MAXLEN", "1000"), pair("MINID", "1699999940000-0")]
        );
        assert_eq!(
            words(&after_append(&policy(true, 5, 0), 1, now)),
            [pair("MAXLEN", "5")]
        );
        assert_eq!(
            words(&after_append(&policy(true, 0, 1), 1, now)),
            [pair("MINID", "1699999999999-0")]
        );
    }

    #[test]
    fn nothing_is_trimmed_without_an_append_a_dlq_or_a_limit() {
        let now = 1_700_000_000_000;
        assert_eq!(after_append(&policy(true, 1000, 60_000), 0, now), []);
        assert_eq!(after_append(&policy(false, 1000, 60_000), 3, now), []);
        assert_eq!(after_append(&policy(true, 0, 0), 3, now), []);
        assert_eq!(at_pass_end(&policy(false, 0, 60_000), now), None);
        assert_eq!(at_pass_end(&policy(true, 1000, 0), now), None);
    }

    #[test]
    fn the_end_of_a_pass_trims_by_age_only() {
        let t = at_pass_end(&policy(true, 1000, 86_400_000), 86_400_000 + 42).unwrap();
        assert_eq!(words(&[t]), [pair("MINID", "42-0")]);
    }

    #[test]
    fn an_age_older_than_the_clock_keeps_everything() {
        assert_eq!(min_id(i64::MAX, 1_000), b"0-0");
        assert_eq!(min_id(5_000, 1_000), b"0-0");
        assert_eq!(min_id(1, i64::MIN), b"0-0");
    }
}
