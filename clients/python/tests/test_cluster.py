"""Reclaim, Worker and their asyncio twins on a real Redis Cluster of three primaries with the
module: every keyed command goes to the node that serves its stream, the policy listing and the
export gather all nodes, an import reaches each stream's node, and a slot moved under a client
(a reshard it was not told about) is followed.

The cluster is built by conftest.py's ``cluster`` fixture (``cluster-enabled yes``, ``CLUSTER
ADDSLOTSRANGE``, ``CLUSTER MEET``); the tests are skipped when the server cannot run one
(``RECLAIM_PY_CLUSTER=0`` skips them too)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Iterator

import pytest
import redis
import redis.asyncio.cluster
from conftest import Cluster, wait_for
from redis.cluster import RedisCluster

from redis_reclaim import Reclaim, Worker
from redis_reclaim.asyncio import AsyncReclaim, AsyncWorker

@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def rc(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[RedisCluster]:
    cluster.flush()
    c = cluster.client(request.param)
    try:
        yield c
    finally:
        c.close()


#: Streams whose hash tags put one on each node ({a} in slot 15495, {b} in 3300, {c} in 7365).
STREAMS = ["{b}orders", "{c}orders", "{a}orders"]


def dlq(stream: str) -> str:
    return stream.split("}")[0] + "}:dlq"


def test_streams_on_every_node(cluster: Cluster) -> None:
    assert sorted(cluster.nodes.index(cluster.node_of(s)) for s in STREAMS) == [0, 1, 2]


def test_keyed_commands_go_to_the_streams_node(cluster: Cluster, rc: RedisCluster) -> None:
    reclaim = Reclaim(rc)
    for s in STREAMS:
        rc.xgroup_create(s, "workers", id="0", mkstream=True)
        reclaim.policy_set(s, "workers", min_idle=60000, max_deliveries=2, dlq=dlq(s))
        # The policy lives on the node of its stream; the others send clients there.
        for n in cluster.nodes:
            if n is cluster.node_of(s):
                assert n.client().execute_command("RECLAIM.POLICY", "GET", s, "workers") is not None
            else:
                with pytest.raises(redis.ResponseError, match=r"^(MOVED )?\d+ 127\.0\.0\.1:"):
                    n.client().execute_command("RECLAIM.POLICY", "GET", s, "workers")
    assert [p.stream for p in reclaim.policy_list()] == sorted(STREAMS)
    # A page spans the nodes: each answers its first n after the same place, merged.
    first, *rest = sorted(STREAMS)
    assert [p.stream for p in reclaim.policy_list(count=1)] == [first]
    assert [p.stream for p in reclaim.policy_list(after=(first, "workers"), count=5)] == rest
    for s in STREAMS:
        e = rc.xadd(s, {"n": "1"})
        got = reclaim.read_entries("workers", "w", s, count=10)
        assert got == [(s, [(e, {"n": "1"})])]
        assert reclaim.extend(s, "workers", "w", e) == [e]
        assert reclaim.term(s, "workers", "w", e, reason="bad") == 1
        assert reclaim.stats(s, "workers")["dead-lettered"] == 1
        assert reclaim.health(s, "workers")["dead-letters"]["dlq-length"] == 1
        assert reclaim.simulate(s, "workers")["entries"] == []
        assert reclaim.sweep(s, "workers")["claimed"] == 0
        assert reclaim.redrive(dlq(s), count=1) == 1
        wait_for("the dead letter back in its group", lambda: rc.xlen(dlq(s)) == 0)
        assert reclaim.redrive_status(dlq(s))["state"] == "done"  # type: ignore[index]
    # XREADGROUP's parser reads RECLAIM.READGROUP's reply in a cluster too.
    s = STREAMS[0]
    rc.xgroup_create(s, "plain", id="0")
    want = rc.xreadgroup("plain", "c", {s: ">"}, count=10)
    got = reclaim.readgroup("workers", "c", {s: ">"}, count=10)
    assert got == want and len(reclaim.read_entries("workers", "c", s)) == 0


def test_export_and_import_span_the_nodes(cluster: Cluster, rc: RedisCluster) -> None:
    reclaim = Reclaim(rc)
    for i, s in enumerate(STREAMS):
        reclaim.policy_set(s, "workers", min_idle=1000 * (i + 1))
    doc = reclaim.policy_export()
    assert [p["key"] for p in json.loads(doc)["policies"]] == sorted(STREAMS)
    cluster.flush()
    assert reclaim.policy_list() == []
    # The streams went with the flush: each node names its waiting policies, at their places in
    # the whole document.
    imported = reclaim.policy_import(doc)
    assert imported == 3
    assert imported.waiting == [
        {"index": i, "key": s, "group": "workers", "status": f"waiting: no stream {s}"}
        for i, s in enumerate(sorted(STREAMS))
    ]
    for i, s in enumerate(STREAMS):
        p = reclaim.policy_get(s, "workers")
        assert p is not None and p.min_idle == 1000 * (i + 1)
    with pytest.raises(redis.ResponseError, match="have a policy already"):
        reclaim.policy_import(doc)
    assert reclaim.policy_import(doc, replace=True) == 3


def test_worker_drains_a_stream_on_its_node(cluster: Cluster, rc: RedisCluster) -> None:
    reclaim = Reclaim(rc)
    s = STREAMS[1]
    rc.xgroup_create(s, "workers", id="0", mkstream=True)
    reclaim.policy_set(s, "workers", min_idle=2000, max_deliveries=2, dlq=dlq(s), interval=50)
    ids = [rc.xadd(s, {"n": str(i)}) for i in range(5)]
    poison = rc.xadd(s, {"poison": "1"})
    seen: list[str] = []

    def handle(entry_id: str, fields: dict[str, str]) -> None:
        seen.append(entry_id)
        if "poison" in fields:
            raise ValueError("poison")

    w = Worker(rc, s, "workers", "w", handle, failure_delay_ms=0)
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    wait_for("the poison entry dead-lettered, the rest acknowledged",
             lambda: rc.xlen(dlq(s)) == 1 and rc.xpending(s, "workers")["pending"] == 0)
    w.stop()
    t.join(30)
    assert sorted(seen) == sorted(ids + [poison, poison])


def test_a_moved_slot_is_followed(cluster: Cluster, rc: RedisCluster) -> None:
    """The slot of a stream moves to another node behind the client's back: the commands and the
    worker's read follow it (MOVED for the commands whose keys the server checks; for a
    RECLAIM.READGROUP that reaches the old node, its error there makes the library read the
    slot map again)."""
    reclaim = Reclaim(rc)
    s = STREAMS[2]
    rc.xgroup_create(s, "workers", id="0", mkstream=True)
    reclaim.policy_set(s, "workers", min_idle=60000)
    e1 = rc.xadd(s, {"n": "1"})
    assert reclaim.stats(s, "workers")["status"] == "active"  # the client knows the slot's node
    old = cluster.node_of(s)
    new = next(n for n in cluster.nodes if n is not old)
    cluster.move_slot(s, old, new)
    try:
        got = reclaim.read_entries("workers", "w", s, count=10)
        assert got == [(s, [(e1, {"n": "1"})])]
        assert reclaim.extend(s, "workers", "w", e1) == [e1]
        # The new node answers (its policy came with the stream; its status may show an error
        # of a step that ran while the slot was still importing, until its next pass).
        assert reclaim.health(s, "workers")["live"]["pending"] == 1
        assert new.client().execute_command("RECLAIM.POLICY", "GET", s, "workers") is not None
    finally:
        cluster.move_slot(s, new, old)


def test_asyncio_cluster(cluster: Cluster) -> None:
    cluster.flush()

    async def main() -> None:
        rc = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port,
                                                decode_responses=True)
        try:
            reclaim = AsyncReclaim(rc)
            for s in STREAMS:
                await rc.xgroup_create(s, "workers", id="0", mkstream=True)
                await reclaim.policy_set(s, "workers", min_idle=60000, dlq=dlq(s))
            assert [p.stream for p in await reclaim.policy_list()] == sorted(STREAMS)
            doc = await reclaim.policy_export()
            for s in STREAMS:
                assert await reclaim.policy_del(s, "workers") is True
            assert await reclaim.policy_import(doc) == 3
            assert [p.dlq for p in await reclaim.policy_list()] == [dlq(s) for s in sorted(STREAMS)]
            s = STREAMS[0]
            ids = [await rc.xadd(s, {"n": str(i)}) for i in range(3)]
            handled: list[str] = []
            w: AsyncWorker

            async def handle(entry_id: str, fields: dict[str, str]) -> None:
                handled.append(entry_id)
                if len(handled) == 3:
                    w.stop()

            w = AsyncWorker(rc, s, "workers", "w", handle)
            await asyncio.wait_for(w.run(), 30)
            assert handled == ids and w.counts["acked"] == 3
            assert (await reclaim.stats(s, "workers"))["status"] == "active"
        finally:
            await rc.aclose() if hasattr(rc, "aclose") else await rc.close()

    asyncio.run(main())
