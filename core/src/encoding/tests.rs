//! The policy value's encodings: every version read, any value round-trips, and no input panics.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::dump::{self, DumpError, DUMP_RDB_VERSION};
use super::*;
use crate::policy::{parse_set_options, Backoff, Policy, State, Storm};

/// One field as a [`Sink`] wrote it: typed, so a read of another kind fails.
#[derive(Debug, Clone, PartialEq)]
enum F {
    U(u64),
    S(i64),
    B(Vec<u8>),
}

fn b(s: &[u8]) -> F {
    F::B(s.to_vec())
}

impl Sink for Vec<F> {
    fn unsigned(&mut self, v: u64) {
        self.push(F::U(v));
    }
    fn signed(&mut self, v: i64) {
        self.push(F::S(v));
    }
    fn bytes(&mut self, b: &[u8]) {
        self.push(F::B(b.to_vec()));
    }
}

/// Fields read in order.
struct Fields<I>(I);

impl<I: Iterator<Item = F>> Source for Fields<I> {
    fn unsigned(&mut self) -> Option<u64> {
        match self.0.next()? {
            F::U(v) => Some(v),
            _ => None,
        }
    }
    fn signed(&mut self) -> Option<i64> {
        match self.0.next()? {
            F::S(v) => Some(v),
            _ => None,
        }
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        match self.0.next()? {
            F::B(v) => Some(v),
            _ => None,
        }
    }
}

fn load(fields: Vec<F>, encver: i32) -> Option<PolicySet> {
    let mut src = Fields(fields.into_iter());
    let set = load_set(&mut src, encver)?;
    assert_eq!(src.0.next(), None, "fields left after the value");
    Some(set)
}

/// The fields of version 1: stream `s`, one group `g`, MIN-IDLE 1000, MAX-DELIVERIES 3, DLQ
/// `d`, CLAIMANT `c`, COUNT 10, INTERVAL 500.
fn v1_fields() -> Vec<F> {
    use F::*;
    vec![
        b(b"s"),
        U(1),
        b(b"g"),
        S(1000),
        S(3),
        U(1),
        b(b"d"),
        b(b"c"),
        S(10),
        S(500),
    ]
}

fn v1_policy() -> Policy {
    Policy {
        min_idle_ms: 1000,
        max_deliveries: 3,
        dlq: Some(b"d".to_vec()),
        claimant: b"c".to_vec(),
        count: 10,
        interval_ms: 500,
        backoff: Backoff::Fixed,
        liveness_ms: 0,
        storm: None,
        dlq_maxlen: 0,
        dlq_maxage_ms: 0,
        tombstones: false,
        forget_idle_ms: 0,
        state: State::Active,
    }
}

fn one(p: Policy) -> PolicySet {
    PolicySet {
        stream: b"s".to_vec(),
        groups: BTreeMap::from([(b"g".to_vec(), p)]),
    }
}

/// Each version's fields, appended to the previous version's: what it read, as a policy.
fn versions() -> Vec<(i32, Vec<F>, Policy)> {
    use F::*;
    let mut fields = v1_fields();
    let mut p = v1_policy();
    let mut out = vec![(1, fields.clone(), p.clone())];
    fields.extend([U(2), U(2), S(100), S(200), S(7000)]);
    p.backoff = Backoff::List(vec![100, 200]);
    p.liveness_ms = 7000;
    out.push((2, fields.clone(), p.clone()));
    fields.extend([U(1), S(5), S(60000), U(State::Storm.code())]);
    p.storm = Some(Storm {
        max: 5,
        window_ms: 60000,
    });
    p.state = State::Storm;
    out.push((3, fields.clone(), p.clone()));
    fields.extend([S(1000), S(86_400_000), U(1)]);
    p.dlq_maxlen = 1000;
    p.dlq_maxage_ms = 86_400_000;
    p.tombstones = true;
    out.push((4, fields.clone(), p.clone()));
    fields.push(S(3_600_000));
    p.forget_idle_ms = 3_600_000;
    out.push((5, fields, p));
    out
}

#[test]
fn every_encoding_version_reads_with_the_defaults_of_what_it_lacks() {
    for (encver, fields, p) in versions() {
        assert_eq!(load(fields, encver), Some(one(p)), "version {encver}");
    }
}

#[test]
fn the_current_version_writes_what_it_reads() {
    let (encver, fields, p) = versions().pop().unwrap();
    assert_eq!(encver, ENCODING_VERSION);
    let mut out = Vec::new();
    save_set(&mut out, &one(p));
    assert_eq!(out, fields);
}

#[test]
fn an_unknown_version_reads_nothing() {
    for encver in [0, ENCODING_VERSION + 1, -1] {
        assert_eq!(load(v1_fields(), encver), None);
    }
}

#[test]
fn values_no_version_writes_end_the_read() {
    use F::*;
    let (_, v5, _) = versions().pop().unwrap();
    // The backoff kind (3 is none) and the state code (7 is none).
    let mut bad_kind = v5.clone();
    bad_kind[10] = U(3);
    assert_eq!(load(bad_kind, 5), None);
    let mut bad_state = v5;
    bad_state[18] = U(7);
    assert_eq!(load(bad_state, 5), None);
}

#[test]
fn counts_larger_than_the_input_fail_at_its_end() {
    use F::*;
    // A group count and a backoff list of u64::MAX: read until the fields end, nothing reserved.
    assert_eq!(load(vec![b(b"s"), U(u64::MAX)], 5), None);
    let mut fields = v1_fields();
    fields.extend([U(2), U(u64::MAX), S(1)]);
    assert_eq!(load(fields, 2), None);
}

#[test]
fn every_truncation_fails() {
    for (encver, fields, _) in versions() {
        for cut in 0..fields.len() {
            let mut src = Fields(fields[..cut].iter().cloned());
            assert_eq!(
                load_set(&mut src, encver),
                None,
                "version {encver}, {cut} fields"
            );
        }
    }
}

/// What Redis 7.0.15 replied (encoding version 5) to `DUMP reclaim:policy:{orders}:orders` after
/// `RECLAIM.POLICY SET orders workers DLQ orders:dlq MAX-DELIVERIES 3 CLAIMANT fixer BACKOFF LIST
/// 100 200 STORM 5 60000` and `RECLAIM.POLICY PAUSE orders workers`.
const SERVER_DUMP: &[u8] = &[
    7, 129, 173, 231, 37, 106, 41, 169, 148, 5, 5, 6, 111, 114, 100, 101, 114, 115, 2, 1, 5, 7,
    119, 111, 114, 107, 101, 114, 115, 2, 128, 0, 0, 234, 96, 2, 3, 2, 1, 5, 10, 111, 114, 100,
    101, 114, 115, 58, 100, 108, 113, 5, 5, 102, 105, 120, 101, 114, 2, 64, 100, 2, 103, 16, 2, 2,
    2, 2, 2, 64, 100, 2, 64, 200, 2, 0, 2, 1, 2, 5, 2, 128, 0, 0, 234, 96, 2, 1, 2, 0, 2, 0, 2, 0,
    2, 0, 0, 10, 0, 121, 144, 254, 114, 174, 82, 167, 232,
];

fn server_dump_value() -> PolicySet {
    let args: Vec<&[u8]> = vec![
        b"DLQ",
        b"orders:dlq",
        b"MAX-DELIVERIES",
        b"3",
        b"CLAIMANT",
        b"fixer",
        b"BACKOFF",
        b"LIST",
        b"100",
        b"200",
        b"STORM",
        b"5",
        b"60000",
    ];
    let p = parse_set_options(b"orders", &args)
        .unwrap()
        .with_state(State::Paused);
    PolicySet {
        stream: b"orders".to_vec(),
        groups: BTreeMap::from([(b"workers".to_vec(), p)]),
    }
}

#[test]
fn dump_payload_is_the_servers() {
    assert_eq!(dump::payload(&server_dump_value(), 10), SERVER_DUMP);
}

#[test]
fn the_servers_dump_reads_back() {
    assert_eq!(dump::read(SERVER_DUMP), Ok(server_dump_value()));
}

#[test]
fn a_damaged_dump_is_refused() {
    assert_eq!(dump::read(&[]), Err(DumpError::Checksum));
    for cut in 0..SERVER_DUMP.len() {
        assert!(dump::read(&SERVER_DUMP[..cut]).is_err(), "{cut} bytes");
    }
    for i in 0..SERVER_DUMP.len() {
        let mut d = SERVER_DUMP.to_vec();
        d[i] ^= 0x10;
        assert_eq!(dump::read(&d), Err(DumpError::Checksum), "byte {i}");
    }
}

/// `body` (everything before the footer) with a footer of RDB version 10 and its CRC-64.
fn sealed(body: &[u8]) -> Vec<u8> {
    let mut d = body.to_vec();
    d.extend_from_slice(&DUMP_RDB_VERSION.to_le_bytes());
    let crc = crc::Crc::<u64>::new(&crc::CRC_64_REDIS).checksum(&d);
    d.extend_from_slice(&crc.to_le_bytes());
    d
}

#[test]
fn a_sealed_but_wrong_body_is_refused_for_what_is_wrong() {
    let body = &SERVER_DUMP[..SERVER_DUMP.len() - 10];
    // Another type byte (a string value), another module type, a newer encoding version.
    let mut string = body.to_vec();
    string[0] = 0;
    assert_eq!(dump::read(&sealed(&string)), Err(DumpError::NotAPolicy));
    let mut other = body.to_vec();
    other[3] ^= 0x40;
    assert_eq!(dump::read(&sealed(&other)), Err(DumpError::NotAPolicy));
    let mut newer = body.to_vec();
    newer[9] = 6;
    assert_eq!(
        dump::read(&sealed(&newer)),
        Err(DumpError::EncodingVersion(6))
    );
    // The value cut before its last field, and bytes after the value's EOF.
    let mut cut = body[..body.len() - 3].to_vec();
    cut.push(0);
    assert_eq!(dump::read(&sealed(&cut)), Err(DumpError::Garbled));
    let mut longer = body.to_vec();
    longer.push(0);
    assert_eq!(dump::read(&sealed(&longer)), Err(DumpError::Trailing));
}

fn name() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..24)
}

fn backoff() -> impl Strategy<Value = Backoff> {
    prop_oneof![
        Just(Backoff::Fixed),
        any::<i64>().prop_map(Backoff::Exponential),
        prop::collection::vec(any::<i64>(), 0..80).prop_map(Backoff::List),
    ]
}

fn state() -> impl Strategy<Value = State> {
    prop_oneof![Just(State::Active), Just(State::Paused), Just(State::Storm)]
}

fn policy() -> impl Strategy<Value = Policy> {
    let storm = prop::option::of(
        (any::<i64>(), any::<i64>()).prop_map(|(max, window_ms)| Storm { max, window_ms }),
    );
    (
        (any::<i64>(), any::<i64>(), prop::option::of(name()), name()),
        (any::<i64>(), any::<i64>(), backoff(), any::<i64>(), storm),
        (
            any::<i64>(),
            any::<i64>(),
            any::<bool>(),
            any::<i64>(),
            state(),
        ),
    )
        .prop_map(|(a, b, c)| Policy {
            min_idle_ms: a.0,
            max_deliveries: a.1,
            dlq: a.2,
            claimant: a.3,
            count: b.0,
            interval_ms: b.1,
            backoff: b.2,
            liveness_ms: b.3,
            storm: b.4,
            dlq_maxlen: c.0,
            dlq_maxage_ms: c.1,
            tombstones: c.2,
            forget_idle_ms: c.3,
            state: c.4,
        })
}

fn policy_set() -> impl Strategy<Value = PolicySet> {
    (name(), prop::collection::btree_map(name(), policy(), 0..5))
        .prop_map(|(stream, groups)| PolicySet { stream, groups })
}

proptest! {
    #[test]
    fn any_value_round_trips(set in policy_set()) {
        let mut fields = Vec::new();
        save_set(&mut fields, &set);
        prop_assert_eq!(load(fields, ENCODING_VERSION), Some(set.clone()));
        prop_assert_eq!(dump::read(&dump::payload(&set, DUMP_RDB_VERSION)), Ok(set));
    }

    #[test]
    fn any_sealed_body_reads_or_errs(body in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = dump::read(&sealed(&body));
        let _ = dump::read(&body);
    }

    #[test]
    fn a_garbled_value_reads_or_errs(set in policy_set(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let good = dump::payload(&set, DUMP_RDB_VERSION);
        let mut body = good[..good.len() - 10].to_vec();
        let i = at.index(body.len());
        body[i] = byte;
        let _ = dump::read(&sealed(&body));
    }
}
