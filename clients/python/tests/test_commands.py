"""Reclaim's methods against a real server, in RESP2, RESP3 and the client's default protocol:
each sends its command and reads the reply into the same Python values whatever the protocol."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from conftest import wait_for

from redis_reclaim import Backoff, Delivery, Policy, Reclaim
from redis_reclaim._commands import text


def group(r: redis.Redis, stream: str = "orders", name: str = "workers") -> None:
    r.xgroup_create(stream, name, id="0", mkstream=True)


def test_policy_set_get_round_trip(r: redis.Redis) -> None:
    reclaim = Reclaim(r)
    group(r)
    # Every option: what is set is what GET gives back (BACKOFF as the value it parses to).
    options: dict[str, Any] = dict(
        min_idle=1000,
        max_deliveries=2,
        dlq="orders:dlq",
        claimant="inbox",
        count=50,
        interval=500,
        liveness=3000,
        storm=(10, 60000),
        dlq_maxlen=100,
        dlq_maxage=86400000,
        tombstones=True,
        forget_idle=600000,
    )
    assert reclaim.policy_set("orders", "workers", backoff=Backoff.exponential(8000), **options) is True
    p = reclaim.policy_get("orders", "workers")
    assert p == Policy(
        stream="orders", group="workers", backoff=Backoff("EXPONENTIAL", (8000,)), state="active", **options
    )
    # What the server stores, in its own words.
    raw = r.execute_command("RECLAIM.POLICY", "GET", "orders", "workers")
    pairs = raw if isinstance(raw, dict) else dict(zip(raw[::2], raw[1::2]))
    assert pairs["backoff"] == "EXPONENTIAL 8000"
    assert pairs["storm"] == "10 60000"

    # SET replaces the whole policy: options() keeps the others while one changes.
    reclaim.policy_set("orders", "workers", **{**p.options(), "max_deliveries": 5})
    q = reclaim.policy_get("orders", "workers")
    assert q is not None and q.max_deliveries == 5
    assert q.options() == {**p.options(), "max_deliveries": 5}
    # Left out, an option takes its default.
    reclaim.policy_set("orders", "workers", min_idle=2000, backoff="list 500 3000")
    d = reclaim.policy_get("orders", "workers")
    assert d is not None
    assert (d.min_idle, d.max_deliveries, d.dlq, d.claimant, d.count, d.interval) == (
        2000, 0, None, "reclaim", 100, 10000,
    )
    assert d.backoff == Backoff.steps(500, 3000) and str(d.backoff) == "LIST 500 3000"
    assert (d.liveness, d.storm, d.tombstones, d.forget_idle) == (0, None, False, 0)
    assert reclaim.policy_get("orders", "nosuchgroup") is None


def test_policy_errors_are_the_servers(r: redis.Redis) -> None:
    reclaim = Reclaim(r)
    with pytest.raises(redis.ResponseError, match="^MAX-DELIVERIES above 0 needs a DLQ key$"):
        reclaim.policy_set("orders", "workers", min_idle=1000, max_deliveries=3)
    with pytest.raises(redis.ResponseError, match="^COUNT must be an integer from 1 to 10000$"):
        reclaim.policy_set("orders", "workers", min_idle=1000, count=0)
    with pytest.raises(redis.ResponseError, match="^no reclaim policy for this key and group$"):
        reclaim.stats("orders", "workers")


def test_policy_del_pause_resume(r: redis.Redis) -> None:
    reclaim = Reclaim(r)
    group(r)
    reclaim.policy_set("orders", "workers", min_idle=1000)
    assert reclaim.policy_pause("orders", "workers") is True
    p = reclaim.policy_get("orders", "workers")
    assert p is not None and p.state == "paused"
    assert reclaim.stats("orders", "workers")["status"] == "paused"
    with pytest.raises(redis.ResponseError, match=r"^the policy of this key and group is paused \(RECLAIM.POLICY RESUME resumes it\)$"):
        reclaim.sweep("orders", "workers")
    assert reclaim.policy_resume("orders", "workers") is True
    assert reclaim.policy_pause("orders", "workers", storm=True) is True
    p = reclaim.policy_get("orders", "workers")
    assert p is not None and p.state == "storm"
    reclaim.policy_resume("orders", "workers")
    p = reclaim.policy_get("orders", "workers")
    assert p is not None and p.state == "active"
    assert reclaim.policy_del("orders", "workers") is True
    assert reclaim.policy_del("orders", "workers") is False


def test_policy_list_export_import(r: redis.Redis) -> None:
    reclaim = Reclaim(r)
    reclaim.policy_set("payments", "billing", min_idle=5000, max_deliveries=5, dlq="payments:dlq",
                       backoff=Backoff.steps(5000, 30000), storm=(100, 60000), tombstones=True)
    reclaim.policy_set("orders", "workers", min_idle=1000)
    listed = reclaim.policy_list()
    assert [(p.stream, p.group) for p in listed] == [("orders", "workers"), ("payments", "billing")]
    assert listed[1] == reclaim.policy_get("payments", "billing")
    # Pages: at most count, after (stream, group); a shorter page is the last.
    assert reclaim.policy_list(count=1) == listed[:1]
    assert reclaim.policy_list(after=("orders", "workers"), count=1) == listed[1:]
    assert reclaim.policy_list(after=("payments", "billing"), count=1) == []
    assert reclaim.policy_list(after=("orders", "")) == listed
    with pytest.raises(redis.ResponseError, match="^COUNT must be a positive integer$"):
        reclaim.policy_list(count=0)

    doc = reclaim.policy_export()
    parsed = json.loads(doc)
    assert parsed["version"] == 1
    assert [p["key"] for p in parsed["policies"]] == ["orders", "payments"]
    assert parsed["policies"][1]["backoff"] == {"list": [5000, 30000]}

    r.flushall()
    assert reclaim.policy_list() == []
    # FLUSHALL took the streams: both policies are set, and wait for theirs.
    imported = reclaim.policy_import(doc)
    assert imported == 2
    assert imported.waiting == [
        {"index": 0, "key": "orders", "group": "workers", "status": "waiting: no stream orders"},
        {"index": 1, "key": "payments", "group": "billing", "status": "waiting: no stream payments"},
    ]
    assert reclaim.policy_list() == listed
    assert [p.status for p in reclaim.policy_list()] == [
        "waiting: no stream orders", "waiting: no stream payments",
    ]
    r.xgroup_create("orders", "workers", id="$", mkstream=True)
    got = reclaim.policy_get("orders", "workers")
    assert got is not None and got.status == "active"
    r.xgroup_create("payments", "billing", id="$", mkstream=True)
    with pytest.raises(redis.ResponseError, match=r"^policies\[0\] \(key 'orders', group 'workers'\): this key and group have a policy already \(IMPORT \.\.\. REPLACE replaces it\)$"):
        reclaim.policy_import(doc)
    # The parsed document works too, and REPLACE replaces.
    parsed["policies"][0]["min-idle"] = 7000
    imported = reclaim.policy_import(parsed, replace=True)
    assert imported == 2 and imported.waiting == []
    p = reclaim.policy_get("orders", "workers")
    assert p is not None and p.min_idle == 7000


def stale_after_first_pass(r: redis.Redis, reclaim: Reclaim, ids: list[str], **policy: Any) -> None:
    """Sets a policy whose timer, after its first pass, waits ten minutes, then makes ``ids``
    (delivered once to ``gone``) idle for two minutes: only the test's own command acts on them."""
    reclaim.policy_set("orders", "workers", min_idle=60000, interval=600000, **policy)
    wait_for("the policy's first pass", lambda: reclaim.stats("orders", "workers")["passes"] >= 1)
    r.xclaim("orders", "workers", "gone", 0, ids, idle=120000, justid=True)


def test_stats_sweep_health(r: redis.Redis) -> None:
    reclaim = Reclaim(r)
    group(r)
    ids = [r.xadd("orders", {"n": str(i)}) for i in range(3)]
    r.xreadgroup("workers", "gone", {"orders": ">"})  # a worker took them and went quiet
    stale_after_first_pass(r, reclaim, ids, max_deliveries=1, dlq="orders:dlq")
    swept = reclaim.sweep("orders", "workers")
    assert swept == {"claimed": 0, "dead-lettered": 3, "deleted": 0, "dlq-trimmed": 0, "tombstones": 0}
    st = reclaim.stats("orders", "workers")
    assert st["dead-lettered"] == 3 and st["passes"] == 2
    assert st["status"] == "active" and st["cursor"] == "0-0"
    assert all(isinstance(v, int) for k, v in st.items() if k not in ("cursor", "status"))
    assert sorted(f["reclaim-id"] for _, f in r.xrange("orders:dlq")) == sorted(ids)

    h = reclaim.health("orders", "workers")
    assert set(h) == {"now-ms", "live", "last-pass", "pel-sizes", "pel-change", "deliveries",
                      "dead-letters", "status", "eviction-risk"}
    assert h["live"]["pending"] == 0 and h["live"]["by-consumer"] == []
    assert h["live"]["oldest-pending-age-ms"] is None
    assert h["last-pass"]["pending"] == 0
    assert [n for _, n in h["pel-sizes"]] == [3, 0] and h["pel-change"] == -3
    assert h["dead-letters"]["dlq-length"] == 3 and h["dead-letters"]["total"] == 3
    assert h["deliveries"]["pass"] == "full" and h["deliveries"]["entries"] == 3
    assert h["deliveries"]["buckets"] == {"1": 3, "above": 0}
    assert h["status"] == "active"
    assert h["eviction-risk"] == "no"


def test_health_lists_consumers(r: redis.Redis) -> None:
    reclaim = Reclaim(r)
    group(r)
    for i in range(3):
        r.xadd("orders", {"n": str(i)})
    r.xreadgroup("workers", "alice", {"orders": ">"}, count=2)
    r.xreadgroup("workers", "bob", {"orders": ">"}, count=1)
    reclaim.policy_set("orders", "workers", min_idle=60000)
    live = reclaim.health("orders", "workers")["live"]
    assert live["pending"] == 3 and live["consumers"] == 2 and live["max-consumer-pending"] == 2
    assert live["by-consumer"] == [("alice", 2), ("bob", 1)]


def test_simulate_what_if(r: redis.Redis) -> None:
    reclaim = Reclaim(r)
    group(r)
    ids = [r.xadd("orders", {"n": str(i)}) for i in range(2)]
    r.xreadgroup("workers", "gone", {"orders": ">"})
    stale_after_first_pass(r, reclaim, ids, max_deliveries=3, dlq="orders:dlq")
    plan = reclaim.simulate("orders", "workers", limit=1)
    assert plan["policy"] == reclaim.policy_get("orders", "workers")
    assert plan["halted"] is None and plan["more"] is True and plan["now-ms"] > 0
    assert [(e["id"], e["consumer"], e["deliveries"], e["action"], e["rule"]) for e in plan["entries"]] == [
        (ids[0], "gone", 1, "move", "stale"),
    ]
    assert plan["entries"][0]["idle"] >= 120000
    assert plan["totals"] == {"move": 1, "dead-letter": 0, "purge": 0, "none": 0}
    what_if = reclaim.simulate("orders", "workers", max_deliveries=1)
    assert what_if["policy"].max_deliveries == 1
    assert [(e["action"], e["rule"]) for e in what_if["entries"]] == [("dead-letter", "over-delivered")] * 2
    assert what_if["more"] is False
    # Nothing was done.
    assert reclaim.stats("orders", "workers")["dead-lettered"] == 0
    assert r.xpending("orders", "workers")["pending"] == 2
    reclaim.policy_pause("orders", "workers")
    assert reclaim.simulate("orders", "workers")["halted"] == "paused"


def test_readgroup_is_parsed_as_xreadgroup(r: redis.Redis) -> None:
    """The same entries read with XREADGROUP in one group and RECLAIM.READGROUP in another give
    the same Python value, in every protocol and redis-py version; so do the empty reads."""
    reclaim = Reclaim(r)
    for s in ("s1", "s2"):
        group(r, s, "plain")
        group(r, s, "reclaim")
    r.xadd("s1", {"item": "book", "qty": "1"})
    r.xadd("s1", {"item": "pen"})
    r.xadd("s2", {"item": "ink", "note": "h\u00e9llo"})
    reclaim.policy_set("s1", "reclaim", min_idle=60000)
    for block in (None, 10):
        want = r.xreadgroup("plain", "c", {"s1": ">", "s2": ">"}, count=10, block=block)
        got = reclaim.readgroup("reclaim", "c", {"s1": ">", "s2": ">"}, count=10, block=block)
        assert got == want and type(got) is type(want)
    assert r.xpending("s1", "reclaim")["pending"] == 2


def test_readgroup_hands_out_redeliveries_first(r: redis.Redis) -> None:
    reclaim = Reclaim(r)
    group(r)
    first = r.xadd("orders", {"n": "1"})
    r.xreadgroup("workers", "gone", {"orders": ">"})
    second = r.xadd("orders", {"n": "2"})
    reclaim.policy_set("orders", "workers", min_idle=1, interval=10)
    wait_for("the sweep to move the quiet consumer's entry to the inbox",
             lambda: reclaim.stats("orders", "workers")["inbox"] == 1)
    reclaim.policy_set("orders", "workers", min_idle=60000)  # what the reader takes stays with it
    got = reclaim.read_entries("workers", "w", ["orders"], count=10)
    assert got == [("orders", [(first, {"n": "1"}), (second, {"n": "2"})])]
    assert reclaim.read_entries("workers", "w", "orders", block=10) == []
    assert reclaim.stats("orders", "workers")["redelivered"] == 1


def test_forget_idle_deletes_idle_consumers_without_pending_entries(r: redis.Redis) -> None:
    reclaim = Reclaim(r)
    group(r)
    r.xadd("orders", {"n": "1"})
    r.xreadgroup("workers", "busy", {"orders": ">"})
    r.xgroup_createconsumer("orders", "workers", "pod-gone")
    reclaim.policy_set("orders", "workers", min_idle=3600000, interval=20, forget_idle=200)
    assert reclaim.policy_get("orders", "workers").forget_idle == 200  # type: ignore[union-attr]
    wait_for("pod-gone forgotten", lambda: reclaim.stats("orders", "workers")["consumers-forgotten"] == 1)
    assert [text(c["name"]) for c in r.xinfo_consumers("orders", "workers")] == ["busy"]
    with pytest.raises(redis.ResponseError, match="FORGET-IDLE must be a non-negative integer"):
        reclaim.policy_set("orders", "workers", min_idle=1000, forget_idle=-1)


def test_readgroup_with_delivery_metadata(r: redis.Redis) -> None:
    """DELIVERY-METADATA: every entry a Delivery (id, fields, idle, deliveries) in every protocol,
    as Redis 8.4's XREADGROUP ... CLAIM replies: a new entry 0 and 0, one handed over again its
    idle time and the deliveries before this one."""
    reclaim = Reclaim(r)
    group(r)
    group(r, "other")
    # A pass every 10 minutes: the sweep does not move the entry made stale below.
    reclaim.policy_set(
        "orders", "workers", min_idle=300, max_deliveries=5, dlq="orders:dlq", interval=600000
    )
    wait_for("the policy's first pass", lambda: reclaim.stats("orders", "workers")["passes"] >= 1)
    first = r.xadd("orders", {"n": "1"})
    got = reclaim.readgroup("workers", "alice", {"orders": ">"}, count=1, delivery_metadata=True)
    assert got == [("orders", [(first, {"n": "1"}, 0, 0)])]
    d = got[0][1][0]
    assert isinstance(d, Delivery) and (d.id, d.idle, d.deliveries, d.attempt) == (first, 0, 0, 1)
    # alice's entry, made idle 5 s after two deliveries (a client's XCLAIM, JUSTID: none added).
    r.xclaim("orders", "workers", "alice", 0, [first], idle=5000, retrycount=2, justid=True)
    second = r.xadd("orders", {"n": "2"})
    other = r.xadd("other", {"o": "x"})
    got = reclaim.readgroup("workers", "bob", ["orders", "other"], count=10, delivery_metadata=True)
    assert [s for s, _ in got] == ["orders", "other"]
    (redelivered, new), others = got[0][1], got[1][1]
    assert (redelivered.id, redelivered.fields, redelivered.deliveries) == (first, {"n": "1"}, 2)
    assert 5000 <= redelivered.idle < 60000 and redelivered.attempt == 3
    assert new == Delivery(second, {"n": "2"}, 0, 0)
    assert others == [Delivery(other, {"o": "x"}, 0, 0)]
    assert r.xpending_range("orders", "workers", first, first, 1)[0]["times_delivered"] == 3
    # Nothing left: empty, blocking or not; read_entries keeps its shape without the option.
    assert reclaim.readgroup("workers", "bob", "orders", block=10, delivery_metadata=True) == []
    r.xadd("orders", {"n": "3"})
    assert reclaim.read_entries("workers", "bob", "orders")[0][1][0][1] == {"n": "3"}


def test_readgroup_arguments() -> None:
    from redis_reclaim._commands import readgroup_args

    assert readgroup_args("g", "c", {"a": ">", "b": ">"}, 5, 100) == (
        ("RECLAIM.READGROUP", "GROUP", "g", "c", "COUNT", 5, "BLOCK", 100, "STREAMS", "a", "b", ">", ">"),
        "a",
    )
    assert readgroup_args("g", "c", "a", None, None)[0] == (
        "RECLAIM.READGROUP", "GROUP", "g", "c", "STREAMS", "a", ">",
    )
    assert readgroup_args("g", "c", ["a", "b"], 1, None, True)[0] == (
        "RECLAIM.READGROUP", "GROUP", "g", "c", "COUNT", 1, "DELIVERY-METADATA", "STREAMS", "a", "b", ">", ">",
    )
    with pytest.raises(ValueError, match="'>' only"):
        readgroup_args("g", "c", {"a": "0"}, None, None)
    with pytest.raises(ValueError):
        readgroup_args("g", "c", [], None, None)


def test_extend_nack_term(r: redis.Redis) -> None:
    reclaim = Reclaim(r)
    group(r)
    ids = [r.xadd("orders", {"n": str(i)}) for i in range(4)]
    reclaim.policy_set("orders", "workers", min_idle=10000, dlq="orders:dlq")
    reclaim.read_entries("workers", "alice", "orders", count=4)
    assert reclaim.extend("orders", "workers", "alice", ids[0], ids[1], "0-1") == [ids[0], ids[1]]
    assert reclaim.extend("orders", "workers", "bob", ids[0]) == []
    assert reclaim.nack("orders", "workers", "alice", ids[0]) == 1
    assert reclaim.nack("orders", "workers", "alice", ids[1], delay=5000) == 1
    with pytest.raises(redis.ResponseError, match=r"^DELAY must be an integer from 0 to 2592000000 \(ms, 30 days\)$"):
        reclaim.nack("orders", "workers", "alice", ids[2], delay=-1)
    with pytest.raises(redis.ResponseError, match=r"^REASON is longer than 1024 bytes$"):
        reclaim.nack("orders", "workers", "alice", ids[2], delay=20000, reason=b"x" * 1025)
    assert reclaim.term("orders", "workers", "alice", ids[2], reason="schema v1 rejected") == 1
    assert reclaim.term("orders", "workers", "alice", ids[3]) == 1
    owners = {p["message_id"]: p["consumer"] for p in r.xpending_range("orders", "workers", "-", "+", 10)}
    assert owners == {ids[0]: "reclaim", ids[1]: "reclaim:delayed"}
    dlq = r.xrange("orders:dlq")
    assert [(f["reclaim-id"], f["reclaim-reason"], f["reclaim-consumer"]) for _, f in dlq] == [
        (ids[2], "schema v1 rejected", "alice"),
        (ids[3], "term", "alice"),
    ]


def three_dead_letters(r: redis.Redis) -> tuple[Reclaim, list[Any]]:
    """Three entries of ``orders workers`` dead-lettered into ``orders:dlq`` (RECLAIM.TERM)."""
    reclaim = Reclaim(r)
    group(r)
    reclaim.policy_set("orders", "workers", min_idle=10000, dlq="orders:dlq")
    ids = [r.xadd("orders", {"n": str(i)}) for i in range(3)]
    reclaim.read_entries("workers", "alice", "orders", count=3)
    assert reclaim.term("orders", "workers", "alice", *ids) == 3
    return reclaim, ids


def test_redrive(r: redis.Redis) -> None:
    reclaim, ids = three_dead_letters(r)
    assert reclaim.redrive_status("orders:dlq") is None
    assert reclaim.redrive_cancel("orders:dlq") is False
    task = reclaim.redrive("orders:dlq", source=("orders", "workers"), rate=1)
    assert task == 1
    st = reclaim.redrive_status("orders:dlq")
    assert st is not None
    assert st["id"] == 1 and st["state"] == "running" and st["source"] == ("orders", "workers")
    assert st["rate"] == 1 and st["total"] == 3 and st["user"] == "default"
    assert isinstance(st["end-id"], str) and isinstance(st["cursor"], str)
    assert reclaim.redrive_cancel("orders:dlq") is True
    st = reclaim.redrive_status("orders:dlq")
    assert st is not None and st["state"] == "canceled"
    assert reclaim.redrive("orders:dlq", count=10) == 2
    wait_for("the three dead letters back in their group", lambda: r.xlen("orders:dlq") == 0)
    st = reclaim.redrive_status("orders:dlq")
    assert st is not None and st["state"] == "done"
    assert sorted(p["message_id"] for p in r.xpending_range("orders", "workers", "-", "+", 10)) == ids


def test_redrive_selected_ids(r: redis.Redis) -> None:
    reclaim, ids = three_dead_letters(r)
    dead = [e[0] for e in r.xrange("orders:dlq")]
    # The first and the last DLQ entries, and one that is not in the DLQ (skipped).
    assert reclaim.redrive("orders:dlq", ids=[dead[0], dead[2], "1-1"]) == 1
    wait_for("the task done", lambda: (reclaim.redrive_status("orders:dlq") or {}).get("state") == "done")
    st = reclaim.redrive_status("orders:dlq")
    assert st is not None and (st["ids"], st["moved"], st["skipped"]) == (3, 2, 1)
    assert [e[0] for e in r.xrange("orders:dlq")] == [dead[1]]
    assert sorted(p["message_id"] for p in r.xpending_range("orders", "workers", "-", "+", 10)) == [ids[0], ids[2]]
    with pytest.raises(redis.ResponseError, match="IDS must be an integer from 1 to 1000"):
        reclaim.redrive("orders:dlq", ids=[])


def test_bytes_client_keeps_names_as_bytes(rb: redis.Redis) -> None:
    """Without decode_responses, names and entry IDs stay bytes; field names and the module's
    words are str."""
    reclaim = Reclaim(rb)
    rb.xgroup_create(b"orders", b"workers", id="0", mkstream=True)
    reclaim.policy_set(b"orders", b"workers", min_idle=1000, max_deliveries=2, dlq=b"orders:\xffdlq")
    p = reclaim.policy_get(b"orders", b"workers")
    assert p is not None
    assert (p.dlq, p.claimant, p.state, str(p.backoff)) == (b"orders:\xffdlq", b"reclaim", "active", "FIXED")
    assert reclaim.policy_list()[0].stream == b"orders"
    entry = rb.xadd(b"orders", {b"k": b"\x00v"})
    assert reclaim.read_entries(b"workers", b"w", b"orders") == [(b"orders", [(entry, {b"k": b"\x00v"})])]
    assert reclaim.extend(b"orders", b"workers", b"w", entry) == [entry]
    assert reclaim.stats(b"orders", b"workers")["status"] == "active"
    assert json.loads(reclaim.policy_export())["policies"][0]["dlq"] == {"hex": "6f72646572733aff646c71"}
