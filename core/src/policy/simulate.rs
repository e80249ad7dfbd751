//! `RECLAIM.SIMULATE`'s options: any option of `RECLAIM.POLICY SET`, read as SET reads it, and
//! `LIMIT`.

use super::args::number;
use super::set::{read_changes, spans, Changes};
use crate::error::ReclaimError;

/// Largest `LIMIT` of `RECLAIM.SIMULATE` (its default is the evaluated policy's `COUNT`): bounds
/// the reply and the time of the command.
const MAX_SIMULATE_LIMIT: i64 = 10_000;

/// The options of `RECLAIM.SIMULATE` besides `SET`'s.
const SIMULATE_OPTIONS: &[&str] = &["LIMIT"];

/// Parses `RECLAIM.SIMULATE key group [LIMIT n] [option ...]` (everything after `group`): any
/// option of `RECLAIM.POLICY SET`, read as SET reads it, and `LIMIT`, in any order. Returns the
/// limit (`None`: not given) and the policy changes (not yet applied: see [`Changes::apply`]).
/// Errors: those of SET's options one by one (unknown, repeated, without value, out of range,
/// malformed `BACKOFF`), and `LIMIT` outside 1 ..= [`MAX_SIMULATE_LIMIT`].
pub fn parse_simulate_options(opts: &[&[u8]]) -> Result<(Option<i64>, Changes), ReclaimError> {
    let mut limit = None;
    let changes = read_changes(&spans(opts, SIMULATE_OPTIONS)?, |_, v| {
        let range = "an integer from 1 to 10000";
        limit = Some(number("LIMIT", range, v[0], 1, MAX_SIMULATE_LIMIT)?);
        Ok(())
    })?;
    Ok((limit, changes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::set::parse_words as set;
    use crate::policy::{Policy, State, Storm};

    #[test]
    fn simulate_options_change_a_base_policy() {
        let sim = |opts: &[&str]| {
            let o: Vec<&[u8]> = opts.iter().map(|s| s.as_bytes()).collect();
            parse_simulate_options(&o).map_err(|e| e.to_string())
        };
        let live = set(&[
            "MIN-IDLE",
            "500",
            "MAX-DELIVERIES",
            "3",
            "DLQ",
            "d",
            "COUNT",
            "7",
        ])
        .unwrap();
        // Nothing given: the live policy as it is, no limit.
        let (limit, c) = sim(&[]).unwrap();
        assert!(c.is_empty() && limit.is_none());
        assert_eq!(c.apply(live.clone(), b"orders").unwrap(), live);
        // LIMIT alone changes nothing of the policy.
        let (limit, c) = sim(&["limit", "5"]).unwrap();
        assert!(c.is_empty());
        assert_eq!(limit, Some(5));
        // Options anywhere around LIMIT; only those given change; CLAIMANT LIMIT is a value.
        let (limit, c) =
            sim(&["MAX-DELIVERIES", "2", "LIMIT", "10000", "CLAIMANT", "LIMIT"]).unwrap();
        assert_eq!(limit, Some(10_000));
        assert_eq!(
            c.apply(live.clone(), b"orders").unwrap(),
            Policy {
                max_deliveries: 2,
                claimant: b"LIMIT".to_vec(),
                ..live.clone()
            }
        );
        // The proposed policy must be one SET accepts, over the live one.
        let (_, c) = sim(&["BACKOFF", "EXPONENTIAL", "400"]).unwrap();
        assert_eq!(
            c.apply(live.clone(), b"orders").unwrap_err().to_string(),
            "ERR BACKOFF EXPONENTIAL max-ms must be at least MIN-IDLE"
        );
        let (_, c) = sim(&["MAX-DELIVERIES", "2"]).unwrap();
        assert_eq!(
            c.apply(Policy::default(), b"orders")
                .unwrap_err()
                .to_string(),
            "ERR MAX-DELIVERIES above 0 needs a DLQ key"
        );
        let (_, c) = sim(&["DLQ", "orders"]).unwrap();
        assert_eq!(
            c.apply(live.clone(), b"orders").unwrap_err().to_string(),
            "ERR the DLQ key must differ from the stream key"
        );
        // Errors one option at a time, in the order given.
        let cases: &[(&[&str], &str)] = &[
            (
                &["LIMIT", "0"],
                "ERR LIMIT must be an integer from 1 to 10000",
            ),
            (
                &["LIMIT", "10001"],
                "ERR LIMIT must be an integer from 1 to 10000",
            ),
            (
                &["LIMIT", "x", "MIN-IDLE", "0"],
                "ERR LIMIT must be an integer from 1 to 10000",
            ),
            (
                &["MIN-IDLE", "0", "LIMIT", "0"],
                "ERR MIN-IDLE must be a positive integer (ms)",
            ),
            (&["LIMIT"], "ERR option LIMIT needs a value"),
            (
                &["LIMIT", "1", "limit", "2"],
                "ERR option LIMIT given more than once",
            ),
            (
                &["STORM", "1"],
                "ERR STORM must be two positive integers: the most dead-letters, then the window (ms)",
            ),
            (
                &["COUNT", "0"],
                "ERR COUNT must be an integer from 1 to 10000",
            ),
            (
                &["BACKOFF", "SLOW"],
                "ERR BACKOFF takes FIXED, EXPONENTIAL max-ms or LIST ms [ms ...]",
            ),
        ];
        for (opts, want) in cases {
            assert_eq!(sim(opts).unwrap_err(), *want, "options {opts:?}");
        }
        // STORM is proposed as SET reads it; the live state stays (it is not an option).
        let (_, c) = sim(&["STORM", "5", "1000", "LIMIT", "2"]).unwrap();
        let storm = Storm {
            max: 5,
            window_ms: 1000,
        };
        assert_eq!(c.storm(), Some(storm));
        let paused = live.with_state(State::Paused);
        assert_eq!(
            c.apply(paused.clone(), b"orders").unwrap(),
            Policy {
                storm: Some(storm),
                ..paused
            }
        );
        assert_eq!(sim(&["COUNT", "5"]).unwrap().1.storm(), None);
        // SET does not take LIMIT.
        assert_eq!(
            set(&["LIMIT", "5"]).unwrap_err(),
            "ERR unknown option 'LIMIT'"
        );
    }
}
