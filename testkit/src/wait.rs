//! Waiting for a state: polls, never a sleep taken as an assertion.

use std::time::{Duration, Instant};

/// How much slower than usual the server under test runs (`RECLAIM_TEST_SLOWDOWN`, default 1;
/// `make test-valgrind` sets it): every [`wait_for`] deadline is multiplied by it.
pub fn slowdown() -> u64 {
    std::env::var("RECLAIM_TEST_SLOWDOWN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1)
}

/// Polls `f` every 10 ms until it returns `Some`, or panics with `what` after `secs` seconds
/// (times [`slowdown`]).
pub fn wait_for<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let secs = secs * slowdown();
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {secs}s waiting for: {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `WAIT 1 <10 s times the slowdown>` on the primary of `con`, asserting that its replica
/// acknowledged everything written so far: after it, the replica holds what the primary does.
/// (A replica fresh from a full sync acknowledges up to a second after its link is up.)
pub fn replica_acked(con: &mut redis::Connection) {
    let ms = 10_000 * slowdown();
    let n: i64 = redis::cmd("WAIT").arg(1).arg(ms).query(con).expect("WAIT");
    assert_eq!(n, 1, "WAIT 1 {ms}: the replica did not acknowledge");
}

/// Reads `read` on the primary `c` and, once its replica acknowledged, on the replica `rc`, and
/// asserts that both hold the same; returns it. A timer pass may change the primary after its
/// first read: the three reads are taken again until the primary held still across them, so
/// only a replica that really differs fails.
pub fn replica_agrees<T: PartialEq + std::fmt::Debug>(
    c: &mut redis::Connection,
    rc: &mut redis::Connection,
    mut read: impl FnMut(&mut redis::Connection) -> T,
) -> T {
    let (primary, replica) = wait_for(
        10,
        "the primary to hold still while its replica is read",
        || {
            let before = read(c);
            replica_acked(c);
            let replica = read(rc);
            (read(c) == before).then_some((before, replica))
        },
    );
    assert_eq!(replica, primary, "the replica differs from its primary");
    primary
}

/// Waits until the server of `con` counts `n` blocked clients (`INFO clients`): readers started on
/// other connections are waiting, so what the test does next happens while they wait.
pub fn wait_blocked(con: &mut redis::Connection, n: i64) {
    wait_for(10, &format!("{n} blocked client(s)"), || {
        (crate::replies::info_int(con, "clients", "blocked_clients") == n).then_some(())
    });
}
