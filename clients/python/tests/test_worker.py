"""The Worker's contract, every branch of it, against a real server with a real policy
(MAX-DELIVERIES, DLQ): nothing lost, nothing handled more than MAX-DELIVERIES times."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
import redis
from conftest import Server, fail_as_asked, wait_for

import redis_reclaim
from redis_reclaim import Permanent, Reclaim, Retry, Worker

MAX_DELIVERIES = 3
#: The policy's MIN-IDLE where the test counts on leases being kept (the heartbeat renews them
#: every third of it): long enough for a busy machine to run the heartbeat in time.
LEASE_MS = 1000


def setup(r: redis.Redis, **policy: Any) -> Reclaim:
    r.xgroup_create("orders", "workers", id="0", mkstream=True)
    reclaim = Reclaim(r)
    if policy:
        reclaim.policy_set("orders", "workers", **policy)
    return reclaim


def start(worker: Worker) -> threading.Thread:
    t = threading.Thread(target=worker.run, daemon=True)
    t.start()
    return t


def stop(workers: list[Worker], threads: list[threading.Thread]) -> None:
    for w in workers:
        w.stop()
    for t in threads:
        t.join(30)
        assert not t.is_alive(), "a worker did not stop"


def owners(r: redis.Redis) -> dict[str, str]:
    """The PEL: entry ID -> the consumer that holds it."""
    return {p["message_id"]: p["consumer"] for p in r.xpending_range("orders", "workers", "-", "+", 1000)}


def policy_gets(r: redis.Redis) -> int:
    """How many RECLAIM.POLICY GET the server has run (INFO commandstats)."""
    stats = r.info("commandstats").get("cmdstat_reclaim.policy|get", {})
    return int(stats.get("calls", 0))


class Log:
    """What handlers were called with: (worker, entry ID, delivery count, time)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Optional[int], float]] = []
        self.lock = threading.Lock()

    def add(self, worker: Worker, entry_id: str) -> int:
        n = worker.deliveries(entry_id)
        with self.lock:
            self.calls.append((str(worker.consumer), entry_id, n, time.monotonic()))
        return n or 0

    def of(self, entry_id: str) -> list[tuple[str, Optional[int]]]:
        with self.lock:
            return [(w, n) for w, i, n, _ in self.calls if i == entry_id]

    def times(self, entry_id: str) -> list[float]:
        with self.lock:
            return [t for _, i, _, t in self.calls if i == entry_id]


def test_every_outcome_with_a_pool_of_two(r: redis.Redis) -> None:
    """Two workers drain good entries, one that asks for a retry, one that fails for good and a
    poison entry: every good entry acknowledged once; the retry handled twice (deliveries 1 and
    2); the permanent failure dead-lettered at once with its reason; the poison entry handled
    exactly MAX-DELIVERIES times, its attempts spaced by the lease, then dead-lettered; nothing
    pending."""
    setup(r, min_idle=LEASE_MS, max_deliveries=MAX_DELIVERIES, dlq="orders:dlq", interval=50)
    good = [r.xadd("orders", {"n": str(i)}) for i in range(6)]
    retry = r.xadd("orders", {"kind": "retry"})
    perm = r.xadd("orders", {"kind": "perm"})
    poison = r.xadd("orders", {"kind": "poison"})
    good += [r.xadd("orders", {"n": str(i)}) for i in range(6, 10)]
    log = Log()
    workers: list[Worker] = []

    def handler_for(i: int) -> Callable[[str, dict[str, str]], None]:
        def handle(entry_id: str, fields: dict[str, str]) -> None:
            w = workers[i]
            fail_as_asked(fields, log.add(w, entry_id))

        return handle

    workers = [Worker(r, "orders", "workers", f"w{i}", handler_for(i), count=3) for i in range(2)]
    threads = [start(w) for w in workers]
    reclaim = Reclaim(r)
    wait_for(
        "every entry acknowledged or dead-lettered",
        lambda: r.xlen("orders:dlq") == 2 and not owners(r) and len(log.of(retry)) == 2,
    )
    stop(workers, threads)

    for g in good:
        assert [n for _, n in log.of(g)] == [1], g
    assert [n for _, n in log.of(retry)] == [1, 2]
    assert [n for _, n in log.of(perm)] == [1]
    assert [n for _, n in log.of(poison)] == [1, 2, 3]
    gaps = [b - a for a, b in zip(log.times(poison), log.times(poison)[1:])]
    assert all(g >= LEASE_MS / 1000 - 0.05 for g in gaps), f"a failed entry came back before its lease ended: {gaps}"
    dlq = {f["reclaim-id"]: f for _, f in r.xrange("orders:dlq")}
    assert dlq[perm]["reclaim-reason"] == "bad input" and dlq[perm]["reclaim-deliveries"] == "1"
    assert dlq[perm]["kind"] == "perm"
    assert dlq[poison]["reclaim-reason"] == "max-deliveries"
    assert dlq[poison]["reclaim-deliveries"] == str(MAX_DELIVERIES)
    total = sum((w.counts for w in workers), start=type(workers[0].counts)())
    assert total["acked"] == len(good) + 1
    assert (total["retried"], total["dead-lettered"], total["failed"]) == (1, 1, MAX_DELIVERIES)
    assert total["lost"] == 0 and total["given-back"] == 0
    st = reclaim.stats("orders", "workers")
    assert st["dead-lettered"] == 2 and st["inbox"] == 0


def test_failure_delay_zero_gives_back_at_once(r: redis.Redis) -> None:
    setup(r, min_idle=60000, max_deliveries=2, dlq="orders:dlq", interval=50)
    poison = r.xadd("orders", {"kind": "poison"})
    calls: list[str] = []

    def handle(entry_id: str, fields: dict[str, str]) -> None:
        calls.append(entry_id)
        raise RuntimeError("boom")

    w = Worker(r, "orders", "workers", "w", handle, failure_delay_ms=0)
    t = start(w)
    # With a lease of a minute, only an immediate give-back lets the second attempt happen now.
    wait_for("the poison entry dead-lettered", lambda: r.xlen("orders:dlq") == 1)
    stop([w], [t])
    assert calls == [poison, poison]
    assert not owners(r)


def test_a_long_handler_keeps_its_lease_and_its_batch(r: redis.Redis) -> None:
    """A handler that runs three leases long keeps its entry, and the rest of its batch waiting
    behind it, from a second worker that reads all along: each entry handled once, by the
    worker that read it, and never handed over again."""
    reclaim = setup(r, min_idle=LEASE_MS, max_deliveries=MAX_DELIVERIES, dlq="orders:dlq", interval=50)
    long = r.xadd("orders", {"ms": str(3 * LEASE_MS)})
    rest = [r.xadd("orders", {"n": str(i)}) for i in range(3)]
    log = Log()
    started = threading.Event()
    workers: list[Worker] = []

    def handler_for(i: int) -> Callable[[str, dict[str, str]], None]:
        def handle(entry_id: str, fields: dict[str, str]) -> None:
            log.add(workers[i], entry_id)
            if "ms" in fields:
                started.set()
                time.sleep(int(fields["ms"]) / 1000)  # the scenario: a job longer than the lease

        return handle

    workers = [Worker(r, "orders", "workers", f"w{i}", handler_for(i)) for i in range(2)]
    threads = [start(workers[0])]
    assert started.wait(10)
    threads.append(start(workers[1]))
    wait_for("every entry acknowledged", lambda: len(log.calls) == 4 and not owners(r))
    stop(workers, threads)
    for e in [long, *rest]:
        assert log.of(e) == [("w0", 1)], (e, log.calls)
    assert reclaim.stats("orders", "workers")["redelivered"] == 0
    assert workers[0].counts["acked"] == 4 and workers[0].counts["lost"] == 0


def test_max_hold_lets_a_hung_handler_lose_its_entry(r: redis.Redis) -> None:
    setup(r, min_idle=200, max_deliveries=MAX_DELIVERIES, dlq="orders:dlq", interval=50)
    hung = r.xadd("orders", {"hang": "1"})
    log = Log()
    workers: list[Worker] = []
    first = threading.Event()

    def handler_for(i: int) -> Callable[[str, dict[str, str]], None]:
        def handle(entry_id: str, fields: dict[str, str]) -> None:
            log.add(workers[i], entry_id)
            if i == 0:
                first.set()
                time.sleep(1.5)  # the scenario: a handler hung past max_hold_ms

        return handle

    workers = [
        Worker(r, "orders", "workers", f"w{i}", handler_for(i), max_hold_ms=300) for i in range(2)
    ]
    threads = [start(workers[0])]
    assert first.wait(10)
    threads.append(start(workers[1]))
    wait_for("the hung entry handled by the other worker", lambda: len(log.of(hung)) == 2)
    wait_for("the hung handler to return", lambda: workers[0].counts["lost"] == 1)
    stop(workers, threads)
    assert log.of(hung) == [("w0", 1), ("w1", 2)]
    assert not owners(r)


def test_stop_finishes_the_entry_in_hand_and_gives_back_the_rest(r: redis.Redis) -> None:
    setup(r, min_idle=60000, max_deliveries=MAX_DELIVERIES, dlq="orders:dlq")
    ids = [r.xadd("orders", {"n": str(i)}) for i in range(5)]
    in_hand = threading.Event()
    go = threading.Event()
    handled: list[str] = []
    w: Worker

    def handle(entry_id: str, fields: dict[str, str]) -> None:
        in_hand.set()
        assert go.wait(10)
        handled.append(entry_id)

    w = Worker(r, "orders", "workers", "w", handle, count=10)
    t = start(w)
    assert in_hand.wait(10)
    assert sorted(w.held()) == ids
    w.stop()
    go.set()
    t.join(10)
    assert not t.is_alive()
    assert handled == [ids[0]]
    assert owners(r) == {i: "reclaim" for i in ids[1:]}, "the rest is in the inbox, for any worker"
    assert w.counts["acked"] == 1 and w.counts["given-back"] == 4 and w.held() == []
    # Nothing lost: the next worker gets them, as redeliveries.
    got = Reclaim(r).read_entries("workers", "other", "orders", count=10)
    assert [i for _, es in got for i, _ in es] == ids[1:]


def test_an_interrupt_gives_back_everything_held(r: redis.Redis) -> None:
    setup(r, min_idle=60000, max_deliveries=MAX_DELIVERIES, dlq="orders:dlq")
    ids = [r.xadd("orders", {"n": str(i)}) for i in range(3)]

    def handle(entry_id: str, fields: dict[str, str]) -> None:
        raise KeyboardInterrupt

    w = Worker(r, "orders", "workers", "w", handle, handle_signals=False)
    with pytest.raises(KeyboardInterrupt):
        w.run()
    assert owners(r) == {i: "reclaim" for i in ids}
    assert w.counts["given-back"] == 3


def test_permanent_without_a_dlq_gives_the_entry_back(r: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    setup(r, min_idle=60000)
    e = r.xadd("orders", {"n": "1"})
    w: Worker

    def handle(entry_id: str, fields: dict[str, str]) -> None:
        w.stop()
        raise Permanent("no good")

    w = Worker(r, "orders", "workers", "w", handle, failure_delay_ms=0)
    w.run()
    assert owners(r) == {e: "reclaim"}
    assert dict(w.counts) == {"refused": 1}
    assert "RECLAIM.TERM of entry" in caplog.text and "has no DLQ" in caplog.text


def test_a_retry_longer_than_the_server_allows_is_refused(r: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    """A delay no server keeps (30,000 years) is not cut short: the NACK is refused, counted as
    ``refused`` and logged; the entry stays pending and comes back when its lease ends."""
    setup(r, min_idle=LEASE_MS, max_deliveries=MAX_DELIVERIES, dlq="orders:dlq", interval=50)
    e = r.xadd("orders", {"n": "1"})
    calls: list[float] = []

    def handle(entry_id: str, fields: dict[str, str]) -> None:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise Retry(10**15)

    w = Worker(r, "orders", "workers", "w", handle)
    t = start(w)
    wait_for("the entry handled again after its lease and acknowledged", lambda: len(calls) == 2 and not owners(r))
    stop([w], [t])
    assert calls[1] - calls[0] >= LEASE_MS / 1000 - 0.05
    assert w.counts["refused"] == 1 and w.counts["acked"] == 1 and w.counts["retried"] == 0
    assert f"Retry({10**15} ms) of entry {e} refused" in caplog.text


def test_a_retry_longer_than_the_lease_is_parked(r: redis.Redis) -> None:
    setup(r, min_idle=LEASE_MS, max_deliveries=MAX_DELIVERIES, dlq="orders:dlq", interval=50)
    e = r.xadd("orders", {"n": "1"})
    calls: list[float] = []

    def handle(entry_id: str, fields: dict[str, str]) -> None:
        calls.append(time.monotonic())
        raise Retry(3_600_000)  # an hour, far more than the lease: parked, not cut short

    w = Worker(r, "orders", "workers", "w", handle)
    t = start(w)
    wait_for("the entry parked", lambda: owners(r) == {e: "reclaim:parked"})

    def idle() -> int:
        return int(r.xpending_range("orders", "workers", "-", "+", 1)[0]["time_since_delivered"])

    wait_for("three leases parked", lambda: idle() >= 3 * LEASE_MS)
    stop([w], [t])
    assert len(calls) == 1 and owners(r) == {e: "reclaim:parked"}
    assert w.counts["retried"] == 1
    assert r.zcard("reclaim:delay:{orders}:orders") == 1


@pytest.mark.parametrize("case", ["none", "typo", "paused"])
def test_without_a_running_policy_it_fails_fast(r: redis.Redis, case: str) -> None:
    """No policy, a policy of a group that does not exist (a typo), a paused policy: ``run``
    raises PolicyError saying so, and reads nothing."""
    reclaim = setup(r)
    e = r.xadd("orders", {"n": "1"})
    group = "workers"
    if case == "typo":
        reclaim.policy_set("orders", "wrokers", min_idle=1000)
        group = "wrokers"
    elif case == "paused":
        reclaim.policy_set("orders", "workers", min_idle=1000)
        reclaim.policy_pause("orders", "workers")
    w = Worker(r, "orders", group, "w", lambda i, f: None)
    expected = {
        "none": "no redis-reclaim policy for stream 'orders' group 'workers'",
        "typo": "the policy of stream 'orders' group 'wrokers' does not run: waiting: no group wrokers",
        "paused": "the policy of stream 'orders' group 'workers' is paused",
    }[case]
    with pytest.raises(redis_reclaim.PolicyError, match=expected):
        w.run()
    assert r.xinfo_groups("orders")[0]["pending"] == 0 and e not in owners(r)
    assert dict(w.counts) == {}


def test_a_user_with_the_worker_commands_only_starts_unchecked(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    """The worker commands only (docs/security.md's worker role without +reclaim.policy|get, no
    COMMAND): the Worker says it
    cannot check the policy, and works as before (COMMAND DOCS refused too: no REASON)."""
    admin = server.client(decode_responses=True)
    admin.flushall()
    setup(admin, min_idle=LEASE_MS, max_deliveries=MAX_DELIVERIES, dlq="orders:dlq")
    admin.execute_command(
        "ACL", "SETUSER", "worker", "on", ">secret", "~orders", "~orders:dlq", "+@stream",
        "+reclaim.readgroup", "+reclaim.extend", "+reclaim.nack", "+reclaim.term",
    )
    try:
        e = admin.xadd("orders", {"n": "1"})
        handled: list[str] = []
        r = server.client(decode_responses=True, username="worker", password="secret")
        w = Worker(r, "orders", "workers", "w", lambda i, f: handled.append(i), stop_after_idle_ms=300, block_ms=50)
        w.run()
        assert handled == [e] and not owners(admin) and w.counts["acked"] == 1
        assert "cannot check the policy of stream 'orders' group 'workers'" in caplog.text
        assert "NOPERM" in caplog.text or "no permissions" in caplog.text
        r.close()
    finally:
        admin.execute_command("ACL", "DELUSER", "worker")
        admin.close()


def test_the_worker_role_of_security_md_checks_the_policy(server: Server) -> None:
    """docs/security.md's worker role (its ACL line, as written) may run RECLAIM.POLICY GET: the
    Worker checks the policy (PolicyError without one), and works once there is one."""
    doc = (Path(__file__).resolve().parents[3] / "docs" / "security.md").read_text()
    rules = next(
        line.split("ACL SETUSER worker ", 1)[1].split() for line in doc.splitlines() if "> ACL SETUSER worker " in line
    )
    assert "+reclaim.policy|get" in rules and "~orders" in rules
    admin = server.client(decode_responses=True)
    admin.flushall()
    reclaim = setup(admin)
    admin.execute_command("ACL", "SETUSER", "worker", *rules)
    try:
        e = admin.xadd("orders", {"n": "1"})
        r = server.client(decode_responses=True, username="worker", password="secret")
        with pytest.raises(redis_reclaim.PolicyError, match="no redis-reclaim policy for stream 'orders'"):
            Worker(r, "orders", "workers", "w", lambda i, f: None).run()
        reclaim.policy_set("orders", "workers", min_idle=LEASE_MS, dlq="orders:dlq")
        handled: list[str] = []
        w = Worker(r, "orders", "workers", "w", lambda i, f: handled.append(i), stop_after_idle_ms=300, block_ms=50)
        w.run()
        assert handled == [e] and w.counts["acked"] == 1
        r.close()
    finally:
        admin.execute_command("ACL", "DELUSER", "worker")
        admin.close()


def test_wait_for_policy_waits_logging_once(r: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    reclaim = setup(r)
    e = r.xadd("orders", {"n": "1"})
    handled: list[str] = []
    w = Worker(r, "orders", "workers", "w", lambda i, f: handled.append(i), wait_for_policy=True)
    t = start(w)
    wait_for("the worker to say it waits", lambda: "waiting for it" in caplog.text)
    # It looks again (once a second) and must not log again, nor read: two more looks, so that
    # the worker has acted on the first of them.
    looks = policy_gets(r)
    wait_for("the worker to look twice more", lambda: policy_gets(r) >= looks + 2)
    assert handled == [] and caplog.text.count("waiting for it") == 1
    reclaim.policy_set("orders", "workers", min_idle=LEASE_MS)
    wait_for("the entry handled once the policy is there", lambda: handled == [e] and not owners(r))
    stop([w], [t])
    assert w.counts["acked"] == 1


def test_a_handler_with_a_context_gets_the_attempt(r: redis.Redis) -> None:
    """A three-argument handler gets a Context: the stream, group, consumer and this delivery's
    number (from DELIVERY-METADATA, or one XPENDING per batch)."""
    setup(r, min_idle=LEASE_MS, max_deliveries=MAX_DELIVERIES, dlq="orders:dlq", interval=50)
    ids = [r.xadd("orders", {"n": str(i)}) for i in range(3)]
    seen: list[tuple[str, Optional[int]]] = []

    def handle(entry_id: str, fields: dict[str, str], ctx: redis_reclaim.Context) -> None:
        assert (ctx.stream, ctx.group, ctx.consumer) == ("orders", "workers", "w")
        seen.append((entry_id, ctx.attempt))
        if entry_id == ids[1] and ctx.attempt == 1:
            raise Retry(0, "not yet")

    w = Worker(r, "orders", "workers", "w", handle, count=10)
    t = start(w)
    wait_for("every entry acknowledged", lambda: len(seen) == 4 and not owners(r))
    stop([w], [t])
    assert seen == [(ids[0], 1), (ids[1], 1), (ids[2], 1), (ids[1], 2)]
    assert w.counts["acked"] == 3 and w.counts["retried"] == 1


def test_acknowledgements_are_batched(r: redis.Redis) -> None:
    """The success path sends one XACK per batch, not one per entry: 250 entries read 100 at a
    time take at most 4 XACKs (INFO commandstats), and every entry is acknowledged once."""
    setup(r, min_idle=60000, max_deliveries=MAX_DELIVERIES, dlq="orders:dlq")
    pipe = r.pipeline(transaction=False)
    for i in range(250):
        pipe.xadd("orders", {"n": str(i)})
    ids = pipe.execute()
    handled: list[str] = []
    r.config_resetstat()
    w = Worker(r, "orders", "workers", "w", lambda i, f: handled.append(i), count=100, block_ms=50, stop_after_idle_ms=200)
    w.run()
    assert handled == ids and not owners(r) and w.counts["acked"] == 250
    xacks = r.info("commandstats")["cmdstat_xack"]["calls"]
    assert 3 <= xacks <= 4, xacks


def test_stop_after_idle(r: redis.Redis) -> None:
    setup(r, min_idle=1000)
    w = Worker(r, "orders", "workers", "w", lambda i, f: None, block_ms=50, stop_after_idle_ms=300)
    began = time.monotonic()
    w.run()
    assert time.monotonic() - began >= 0.3


def worker_env() -> dict[str, str]:
    """The environment of a worker process: this one's, with redis-py and the package importable."""
    paths = {str(Path(m.__file__).resolve().parents[1]) for m in (redis, redis_reclaim)}  # type: ignore[arg-type]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")])
    return env


@pytest.mark.parametrize("flavour", ["thread", "asyncio"])
def test_sigterm_mid_batch_exits_0_holding_nothing(server: Server, flavour: str) -> None:
    """A worker process gets SIGTERM while it handles the first entry of a batch of five: it
    finishes that entry (acknowledged), gives back the four it had not started, and exits 0;
    XPENDING shows nothing held by it, and another worker gets the four."""
    r = server.client(decode_responses=True)
    r.flushall()
    reclaim = setup(r, min_idle=60000, max_deliveries=MAX_DELIVERIES, dlq="orders:dlq")
    ids = [r.xadd("orders", {"n": str(i)}) for i in range(5)]
    script = Path(__file__).with_name("sigterm_worker.py")
    proc = subprocess.Popen(
        [sys.executable, str(script), str(server.port), flavour],
        env=worker_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line == f"start {ids[0]}", line
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    assert out.split() == ["done", ids[0], "given-back", "4"]
    pel = r.xpending_range("orders", "workers", "-", "+", 100, consumername="w1")
    assert pel == [], "the stopped worker holds nothing"
    assert owners(r) == {i: "reclaim" for i in ids[1:]}
    got = reclaim.read_entries("workers", "w2", "orders", count=10)
    assert [i for _, es in got for i, _ in es] == ids[1:]
    r.close()


@pytest.mark.parametrize("flavour", ["thread", "asyncio"])
def test_sigkill_between_handler_and_acknowledgement_redelivers(server: Server, flavour: str) -> None:
    """A worker process SIGKILLed in the handler of the third entry of its batch: nothing it had
    not finished is acknowledged (the entry in hand, the ones after it), and what it had finished
    but not yet acknowledged (acknowledgements go once per batch) stays pending too: the policy
    delivers all of them again, to another worker."""
    r = server.client(decode_responses=True)
    r.flushall()
    reclaim = setup(r, min_idle=300, max_deliveries=MAX_DELIVERIES, dlq="orders:dlq", interval=50)
    ids = [r.xadd("orders", {"n": str(i)}) for i in range(5)]
    script = Path(__file__).with_name("sigterm_worker.py")
    proc = subprocess.run(
        [sys.executable, str(script), str(server.port), f"kill-{flavour}"],
        env=worker_env(), stdout=subprocess.PIPE, text=True, timeout=60,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stdout
    assert proc.stdout.split() == ["done", ids[0], "done", ids[1], "kill", ids[2]]
    assert owners(r) == {i: "w1" for i in ids}, "nothing acknowledged: the batch's XACK never went"
    got: list[str] = []
    wait_for(
        "every entry delivered again to another worker",
        lambda: got.extend(i for _, es in reclaim.read_entries("workers", "w2", "orders", count=10) for i, _ in es)
        or sorted(got) == ids,
    )
    r.close()


def _loop() -> Any:
    from collections import Counter

    from redis_reclaim._worker import Held, Loop

    return Loop(
        "orders", "workers", "w", count=10, block_ms=100, failure_delay_ms=None,
        stop_after_idle_ms=None, wait_for_policy=False, wants_ctx=False, counts=Counter(),
        held=Held(), stop=threading.Event(),
    )


def test_nack_reason_is_sent_only_where_the_server_takes_it() -> None:
    """Pure: the NACK of a failure carries ``REASON "Type: message"`` (at most 256 characters)
    once the probe found REASON in RECLAIM.NACK's COMMAND DOCS, and nothing otherwise."""
    from redis_reclaim._worker import REASON_MAX, has_token, reason_text

    loop = _loop()
    plain = loop._nack_command("1-0", 500, ValueError("bad"))
    assert plain.args == ("RECLAIM.NACK", "orders", "workers", "w", "1-0", "DELAY", 500)
    loop.has_reason = True
    assert loop._nack_command("1-0", 500, ValueError("bad")).args[-2:] == ("REASON", "ValueError: bad")
    assert loop._nack_command("1-0", 0, Retry(0, "later")).args[-2:] == ("REASON", "Retry: later")
    long = reason_text(RuntimeError("x" * 1000))
    assert len(long) == REASON_MAX and long.startswith("RuntimeError: xxx") and long.endswith("...")
    # The probe, on COMMAND DOCS's RESP2 and RESP3 shapes.
    today = [b"reclaim.nack", [b"arguments", [[b"name", b"ms", b"token", b"DELAY"]]]]
    later = {b"reclaim.nack": {b"arguments": [{b"name": b"reason", b"token": b"REASON"}]}}
    assert not has_token("REASON")(today) and has_token("REASON")(later)


def test_delivery_metadata_replies_are_read_in_both_protocols() -> None:
    """Pure: ``RECLAIM.READGROUP ... DELIVERY-METADATA`` entries are ``[id, fields, ms, count]``
    in RESP2 (an array of [stream, entries]) and RESP3 (a map); the count is the deliveries before
    this one (Redis 8.4's XREADGROUP ... CLAIM: 0 for a new entry), so the attempt is the count + 1."""
    from redis_reclaim._worker import meta_batches

    resp2 = [[b"orders", [[b"1-0", [b"a", b"1"], 12, 2], [b"2-0", [b"b", b"2"], 0, 0]]]]
    resp3 = {b"orders": [[b"1-0", [b"a", b"1"], 12, 2], [b"2-0", [b"b", b"2"], 0, 0]]}
    expected = [(b"1-0", {b"a": b"1"}, 3), (b"2-0", {b"b": b"2"}, 1)]
    assert meta_batches(resp2) == expected and meta_batches(resp3) == expected
    assert meta_batches(None) == []


@pytest.mark.parametrize("pipelined", [True, False], ids=["pipelined", "one-by-one"])
def test_a_client_that_cannot_send_the_probe_works_without_the_features(
    pipelined: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Unit: redis-py 8.1.0's asyncio ``RedisCluster`` raises TypeError on the probe's bytes
    command name (b"COMMAND"): the worker goes on without NACK REASON and DELIVERY-METADATA, and
    says so; a client that sends it gets the probe's answers."""
    from redis_reclaim._steps import run
    from redis_reclaim._worker import Pipeline

    def refuses_bytes(step: Any) -> Any:
        commands = step.commands if isinstance(step, Pipeline) else (step,)
        if any(isinstance(cmd.args[0], bytes) for cmd in commands):
            raise TypeError("unhashable command name b'COMMAND'")
        raise AssertionError(f"unexpected step {step!r}")

    loop = _loop()
    loop.pipelined = pipelined
    assert run(loop._features(), refuses_bytes) == [False, False]
    assert "could not ask COMMAND DOCS (TypeError: unhashable command name b'COMMAND')" in caplog.text

    def answers(step: Any) -> Any:
        commands = step.commands if isinstance(step, Pipeline) else (step,)
        replies = [cmd.parse([b"x", [b"arguments", [[b"token", b"REASON"]]]]) for cmd in commands]
        return replies if isinstance(step, Pipeline) else replies[0]

    assert run(_loop()._features(), answers) == [True, False]
