//! Unit tests of the redrive task's rules and the command's grammar.

use super::*;

fn opts(s: &str) -> Result<Options, ReclaimError> {
    let w: Vec<&[u8]> = s.split_whitespace().map(|w| w.as_bytes()).collect();
    parse_options(&w)
}

#[test]
fn parses_options() {
    assert_eq!(opts("").unwrap(), Options::default());
    let o = opts("source s g count 5 RATE 100 CANARY 2 WINDOW 1000").unwrap();
    assert_eq!(o.source, Some((b"s".to_vec(), b"g".to_vec())));
    assert_eq!((o.count, o.rate, o.canary, o.window_ms), (5, 100, 2, 1000));
}

#[test]
fn option_errors_have_their_texts() {
    let e = |s: &str| opts(s).unwrap_err().to_string();
    assert_eq!(e("FOO 1"), "ERR unknown option 'FOO'");
    assert_eq!(
        e("COUNT 1 COUNT 2"),
        "ERR option COUNT given more than once"
    );
    assert_eq!(e("RATE"), "ERR option RATE needs a value");
    assert_eq!(e("SOURCE s"), "ERR option SOURCE needs a value");
    assert_eq!(
        e("COUNT 0"),
        "ERR COUNT must be an integer from 1 to 1000000000"
    );
    assert_eq!(
        e("WINDOW 86400001 CANARY 1"),
        "ERR WINDOW must be an integer from 1 to 86400000 (ms)"
    );
    assert_eq!(e("CANARY 3"), error::REDRIVE_CANARY_WINDOW);
    assert_eq!(e("WINDOW 3"), error::REDRIVE_CANARY_WINDOW);
}

#[test]
fn ids_are_bounded_sorted_and_checked() {
    let o = opts("IDS 3 5-1 2 5-1 RATE 7").unwrap();
    assert_eq!((o.ids, o.rate), (vec![(2, 0), (5, 1)], 7));
    let e = |s: &str| opts(s).unwrap_err().to_string();
    assert_eq!(e("IDS"), "ERR option IDS needs a value");
    assert_eq!(e("IDS 0 1-0"), "ERR IDS must be an integer from 1 to 1000");
    assert_eq!(
        e("IDS 1001 1-0"),
        "ERR IDS must be an integer from 1 to 1000"
    );
    assert_eq!(e("IDS 3 1-0 2-0"), error::REDRIVE_IDS_SHORT);
    assert_eq!(e("IDS 2 1-0 x-1"), error::INVALID_ID);
    assert_eq!(
        e("IDS 1 1-0 IDS 1 2-0"),
        "ERR option IDS given more than once"
    );
    // `n` words are IDs, whatever they look like; the word after them is an option.
    assert_eq!(e("IDS 1 COUNT 5"), error::INVALID_ID);
    let w: Vec<&[u8]> = vec![b"IDS"; 1001];
    assert_eq!(parse_options(&w).unwrap_err().to_string(), e("IDS 1001"));
}

#[test]
fn the_source_key_is_found_past_the_ids() {
    let at = |s: &str| {
        let w: Vec<&[u8]> = s.split_whitespace().map(|w| w.as_bytes()).collect();
        source_at(&w)
    };
    assert_eq!(at("IDS 1 1-0 SOURCE s g"), Some(4));
    assert_eq!(at("COUNT 2 SOURCE s g"), Some(3));
    assert_eq!(at("SOURCE s g IDS 2 1-0 2-0"), Some(1));
    assert_eq!(at("IDS 3 SOURCE s g"), None);
    assert_eq!(at("SOURCE s"), None);
    assert_eq!(at("IDS x SOURCE s g"), Some(3));
}

#[test]
fn a_task_of_ids_walks_them_in_order() {
    let mut t = task("IDS 4 9-0 3-0 7-2 1-5");
    assert_eq!(t.opts.task_total(50), 4);
    assert_eq!(task("").opts.task_total(50), 50);
    assert_eq!(t.ids_left(2), &[(1, 5), (3, 0)]);
    t.examined = 2;
    assert_eq!(t.ids_left(10), &[(7, 2), (9, 0)]);
    t.examined = 4;
    assert!(t.ids_left(10).is_empty());
    // A hash edited by hand: never past the end.
    t.examined = u64::MAX;
    assert!(t.ids_left(10).is_empty());
    t.examined = 4;
    // 0-0 (no entry of a stream has it, but it is a stream ID) is examined like any other,
    // though a cursor of 0-0 means that nothing was examined yet.
    let mut z = task("IDS 2 5-0 0-0");
    assert_eq!(z.ids_left(10), &[(0, 0), (5, 0)]);
    z.examined = 1;
    assert_eq!(z.ids_left(10), &[(5, 0)]);
    assert_eq!(id_text((7, 2)), b"7-2".to_vec());
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = t
        .to_fields()
        .into_iter()
        .map(|(f, v)| (f.to_vec(), v))
        .collect();
    let ids = pairs.iter().find(|(f, _)| f == b"ids").unwrap();
    assert_eq!(ids.1, b"1-5,3-0,7-2,9-0".to_vec());
    assert_eq!(Task::from_fields(&pairs), Some(t.clone()));
    // A malformed `ids` field (written by hand) is no task.
    let bad: Vec<(Vec<u8>, Vec<u8>)> = pairs
        .into_iter()
        .map(|(f, v)| {
            if f == b"ids" {
                (f, b"1-0,x".to_vec())
            } else {
                (f, v)
            }
        })
        .collect();
    assert_eq!(Task::from_fields(&bad), None);
}

#[test]
fn requests() {
    let r = |s: &'static str| -> Vec<&'static [u8]> {
        s.split_whitespace().map(|w| w.as_bytes()).collect()
    };
    let a = r("X status d");
    assert_eq!(request(&a), Request::Status(b"d"));
    let a = r("X CANCEL d");
    assert_eq!(request(&a), Request::Cancel(b"d"));
    let a = r("X STATUS");
    assert_eq!(request(&a), Request::Start(b"STATUS", &[]));
    let a = r("X d COUNT 5");
    assert!(matches!(request(&a), Request::Start(b"d", o) if o.len() == 2));
}

fn task(o: &str) -> Task {
    Task {
        id: 3,
        opts: opts(o).unwrap(),
        end_id: b"5-0".to_vec(),
        cursor: b"0-0".to_vec(),
        checked: b"5-0".to_vec(),
        total: 10,
        started_ms: 1000,
        ..Task::default()
    }
}

#[test]
fn fields_round_trip() {
    for (o, user) in [
        ("", None),
        (
            "SOURCE {a}b g\x00 COUNT 4 RATE 9 CANARY 2 WINDOW 50",
            Some(b"ops\xff".to_vec()),
        ),
    ] {
        let mut t = task(o);
        t.moved = 2;
        t.phase = Phase::Denied;
        t.user = user;
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = t
            .to_fields()
            .into_iter()
            .map(|(f, v)| (f.to_vec(), v))
            .collect();
        assert_eq!(Task::from_fields(&pairs), Some(t.clone()));
        assert_eq!(Task::from_fields(&pairs[1..]), None);
        // A task written before the `user` field: no user, no per-step check.
        let without: Vec<(Vec<u8>, Vec<u8>)> =
            pairs.into_iter().filter(|(f, _)| f != b"user").collect();
        assert_eq!(Task::from_fields(&without).and_then(|t| t.user), None);
    }
}

#[test]
fn quota_respects_rate_count_and_canary() {
    let t = task("");
    assert_eq!(t.quota(0), STEP_MOVES);
    let t = task("RATE 5");
    assert_eq!(t.quota(3), 3);
    let mut t = task("COUNT 10 CANARY 4 WINDOW 100");
    t.moved = 3;
    assert_eq!(t.quota(100), 1);
    t.canary_until_ms = 9;
    assert_eq!(t.quota(100), 7);
}

#[test]
fn canary_waits_then_fails_or_runs_on() {
    let mut t = task("CANARY 2 WINDOW 100");
    t.moved = 2;
    t.settle(1000, false);
    assert_eq!((t.phase, t.canary_until_ms), (Phase::Canary, 1100));
    t.check_canary(1050);
    assert_eq!(t.phase, Phase::Canary);
    let mut failed = t.clone();
    failed.failed_again = 1;
    failed.check_canary(1060);
    assert_eq!((failed.phase, failed.ended_ms), (Phase::CanaryFailed, 1060));
    t.check_canary(1100);
    assert_eq!(t.phase, Phase::Running);
    t.settle(1200, true);
    assert_eq!((t.phase, t.ended_ms), (Phase::Done, 1200));
}

#[test]
fn a_short_dlq_still_checks_its_canary_and_count_ends_the_task() {
    let mut t = task("CANARY 5 WINDOW 100");
    t.moved = 2;
    t.settle(1000, true);
    assert_eq!(t.phase, Phase::Canary);
    let mut t = task("CANARY 5 WINDOW 100");
    t.settle(1000, true);
    assert_eq!(t.phase, Phase::Done);
    let mut t = task("COUNT 3");
    t.moved = 3;
    t.settle(1000, false);
    assert_eq!(t.phase, Phase::Done);
    let mut t = task("");
    t.moved = 3;
    t.settle(1000, false);
    assert_eq!(t.phase, Phase::Running);
}

#[test]
fn origin_takes_the_last_reclaim_fields() {
    let f: Vec<Vec<u8>> = [
        "reclaim-id",
        "fake",
        "job",
        "1",
        "reclaim-stream",
        "s",
        "reclaim-group",
        "g",
        "reclaim-id",
        "7-1",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let o = origin(&f).unwrap();
    assert_eq!(
        (o.stream, o.group, o.id),
        (b"s".to_vec(), b"g".to_vec(), b"7-1".to_vec())
    );
    assert_eq!(origin(&f[2..6]), None);
}

#[test]
fn members_are_unambiguous() {
    let m = |s: &str, g: &str| {
        Origin {
            stream: s.into(),
            group: g.into(),
            id: b"1-0".to_vec(),
        }
        .member()
    };
    assert_ne!(m("a1", ":b"), m("a", "1:b"));
    assert_eq!(m("s", "g"), b"1:s1:g1-0".to_vec());
}

#[test]
fn bucket_refills_at_the_rate() {
    let mut b = Bucket::default();
    assert_eq!(b.available(100, 1000), 1);
    b.spend(1);
    assert_eq!(b.available(100, 1005), 0);
    assert_eq!(b.available(100, 1010), 1);
    // At most a tenth of a second's worth.
    assert_eq!(b.available(100, 60_000), 10);
    b.spend(10);
    assert_eq!(b.available(100, 60_000), 0);
}

#[test]
fn a_step_starts_an_entry_only_when_it_fits_but_never_stalls() {
    let us = Duration::from_micros;
    let mut b = Bucket::default();
    // Nothing measured yet: any time left will do.
    assert!(b.may_start(us(1), 0));
    b.note_entry(100);
    assert!(b.may_start(us(101), 0));
    assert!(b.may_start(us(101), 3));
    // Too little left: not a second entry; the first one is put off for one step only.
    assert!(!b.may_start(us(100), 1));
    assert!(!b.may_start(us(50), 0));
    assert!(b.may_start(us(0), 0));
    b.note_entry(100);
    assert!(!b.may_start(us(0), 0));
    // The estimate follows what entries cost (a moving average).
    b.note_entry(500);
    assert_eq!(b.entry_us, 200);
    assert!(b.may_start(us(201), 2));
    assert!(!b.may_start(us(200), 2));
}
