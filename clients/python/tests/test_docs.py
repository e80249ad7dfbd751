"""Every Python block of docs/python.md, run in order against a real server (the Redis Cluster
block against a real cluster), as a reader would paste them: the doc cannot drift from the
library.

The blocks connect as written (``Redis(decode_responses=True)``, ``RedisCluster(host=..., port=7000,
...)``): the test points those classes at its own servers. A block that runs a worker (``.run(``)
runs in a thread, with one entry added to ``orders`` for it; once the group has nothing pending
and nothing unread, the test stops the block's workers and checks that its thread ends."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.cluster
from conftest import PROJECT, Cluster, Server, wait_for

from redis_reclaim import Worker
from redis_reclaim.asyncio import AsyncWorker

DOC = PROJECT / "docs/python.md"
README = PROJECT / "README.md"
DELIVERY = PROJECT / "docs/delivery.md"


def python_blocks(doc: Path = DOC) -> list[str]:
    """The page's Python blocks (```` ```python run-by=clients/python ````: tests/docs.rs leaves
    them to this suite)."""
    return re.findall(r"^```python run-by=clients/python\n(.*?)^```$", doc.read_text(),
                      flags=re.S | re.M)


def drained(r: redis.Redis) -> bool:
    groups = {g["name"]: g for g in r.xinfo_groups("orders")}
    g = groups.get("workers")
    return g is not None and g["pending"] == 0 and g.get("lag", 0) == 0


def test_the_doc_has_its_blocks() -> None:
    blocks = python_blocks()
    assert len(blocks) == 7, [b.splitlines()[0] for b in blocks]


def test_python_md_blocks_run(server: Server, cluster: Cluster, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    class Redis(redis.Redis):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **{**kwargs, "port": server.port})

    class AsyncRedis(redis.asyncio.Redis):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **{**kwargs, "port": server.port})

    class RedisCluster(redis.cluster.RedisCluster):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **{**kwargs, "host": "127.0.0.1", "port": cluster.nodes[0].port})

    monkeypatch.setattr(redis, "Redis", Redis)
    monkeypatch.setattr(redis.asyncio, "Redis", AsyncRedis)
    monkeypatch.setattr(redis.cluster, "RedisCluster", RedisCluster)
    r = Redis(decode_responses=True)
    r.flushall()
    cluster.flush()
    ns: dict[str, Any] = {}
    for i, block in enumerate(python_blocks()):
        failure: list[BaseException] = []

        def run(code: str = block) -> None:
            try:
                exec(compile(code, f"{DOC}, block {i + 1}", "exec"), ns)
            except BaseException as e:  # noqa: BLE001 - reported by the test below
                failure.append(e)

        worker_block = ".run(" in block and "RedisCluster" not in block
        if worker_block:
            r.xadd("orders", {"sku": f"doc-{i}"})
        t = threading.Thread(target=run, daemon=True)
        t.start()
        if worker_block:
            wait_for(f"block {i + 1}'s worker to handle the entry", lambda: drained(r))
            for w in list(ns.values()):
                if isinstance(w, (Worker, AsyncWorker)):
                    w.stop()
        t.join(30)
        assert not t.is_alive(), f"block {i + 1} did not end"
        assert not failure, f"block {i + 1} failed: {failure[0]!r}"
    monkeypatch.undo()
    out = capsys.readouterr().out
    assert out.count("shipping book-1") == 1 and "shipping doc-1" in out and "shipping doc-4" in out
    assert "shipping doc-2 on attempt 1" in out  # the handler with a Context
    # The cluster block: its policy is on the node of {orders}.
    assert cluster.node_of("{orders}").client().execute_command(
        "RECLAIM.POLICY", "GET", "{orders}", "workers") is not None


@pytest.mark.parametrize("doc", [DOC, DELIVERY], ids=["python.md", "delivery.md"])
def test_the_raw_loop_reads_resp2_and_resp3(server: Server, protocol: Any, doc: Path,
                                            monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The loop for clients without the library (python.md's "Without the library", the last
    block, and delivery.md's) reads and acknowledges entries in RESP2, RESP3 and the client's
    default protocol."""
    blocks = python_blocks(doc)
    assert len(blocks) == (7 if doc == DOC else 1)
    block = blocks[-1]
    assert "RECLAIM.READGROUP" in block

    class Redis(redis.Redis):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            extra = {} if protocol is None else {"protocol": protocol}
            super().__init__(*args, **{**kwargs, "port": server.port, **extra})

    r = Redis(decode_responses=True)
    r.flushall()
    r.xgroup_create("orders", "workers", id="0", mkstream=True)
    r.execute_command("RECLAIM.POLICY", "SET", "orders", "workers", "MIN-IDLE", 60000)
    for sku in ("a-1", "b-2"):
        r.xadd("orders", {"sku": sku, "qty": "1"})
    monkeypatch.setattr(redis, "Redis", Redis)
    exec(compile(block, f"{doc}, last block", "exec"), {})
    assert capsys.readouterr().out.split("\n") == ["shipping a-1", "shipping b-2", ""]
    assert drained(r)


def test_readme_worker_runs(server: Server, monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
    """The README's worker, as written: a good entry is acknowledged, one without a sku goes to
    the DLQ at once with the handler's reason, and the worker stops when asked."""
    (block,) = python_blocks(README)

    class Redis(redis.Redis):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **{**kwargs, "port": server.port})

    r = Redis(decode_responses=True)
    r.flushall()
    r.xgroup_create("orders", "workers", id="0", mkstream=True)
    r.execute_command("RECLAIM.POLICY", "SET", "orders", "workers", "MIN-IDLE", 30000,
                      "MAX-DELIVERIES", 5, "DLQ", "orders:dlq")
    r.xadd("orders", {"sku": "book-1"})
    r.xadd("orders", {"title": "no sku"})
    monkeypatch.setattr(redis, "Redis", Redis)
    ns: dict[str, Any] = {}
    failure: list[BaseException] = []

    def run() -> None:
        try:
            exec(compile(block, f"{README}, the worker", "exec"), ns)
        except BaseException as e:  # noqa: BLE001 - reported below
            failure.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    wait_for("the README's worker to handle both entries", lambda: drained(r))
    wait_for("the worker object", lambda: isinstance(ns.get("worker"), Worker))
    ns["worker"].stop()
    t.join(30)
    assert not t.is_alive() and not failure, failure
    assert capsys.readouterr().out.splitlines() == ["shipping book-1"]
    (dead,) = r.xrange("orders:dlq")
    assert dead[1]["title"] == "no sku" and dead[1]["reclaim-reason"] == "no sku"
