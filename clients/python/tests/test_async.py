"""AsyncReclaim and AsyncWorker on redis.asyncio, against a real server, in every protocol: the
same replies and the same worker contract as their thread twins."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable, Optional

import redis.asyncio
from conftest import Server, fail_as_asked

from redis_reclaim import Backoff
from redis_reclaim.asyncio import AsyncReclaim, AsyncWorker

MAX_DELIVERIES = 3


def run(server: Server, protocol: Optional[int], test: Callable[[redis.asyncio.Redis], Awaitable[None]]) -> None:
    async def main() -> None:
        kwargs: dict[str, Any] = {"decode_responses": True}
        if protocol is not None:
            kwargs["protocol"] = protocol
        c = redis.asyncio.Redis(port=server.port, **kwargs)
        await c.flushall()
        try:
            await test(c)
        finally:
            await c.aclose() if hasattr(c, "aclose") else await c.close()

    asyncio.run(main())


async def owners(r: redis.asyncio.Redis) -> dict[str, str]:
    pel = await r.xpending_range("orders", "workers", "-", "+", 1000)
    return {p["message_id"]: p["consumer"] for p in pel}


async def wait_for(what: str, check: Callable[[], Awaitable[bool]], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)


def test_commands(server: Server, protocol: Optional[int]) -> None:
    async def test(r: redis.asyncio.Redis) -> None:
        reclaim = AsyncReclaim(r)
        for g in ("plain", "workers"):
            await r.xgroup_create("orders", g, id="0", mkstream=True)
        assert await reclaim.policy_set(
            "orders", "workers", min_idle=10000, dlq="orders:dlq", backoff="exponential 20000"
        ) is True
        p = await reclaim.policy_get("orders", "workers")
        assert p is not None and p.backoff == Backoff.exponential(20000) and p.dlq == "orders:dlq"
        assert [x.stream for x in await reclaim.policy_list()] == ["orders"]
        ids = [await r.xadd("orders", {"n": str(i)}) for i in range(3)]
        want = await r.xreadgroup("plain", "c", {"orders": ">"}, count=10)
        got = await reclaim.readgroup("workers", "c", {"orders": ">"}, count=10)
        assert got == want and type(got) is type(want)
        assert await reclaim.readgroup("workers", "c", {"orders": ">"}, block=10) == await r.xreadgroup(
            "plain", "c", {"orders": ">"}, block=10
        )
        assert await reclaim.extend("orders", "workers", "c", *ids) == ids
        assert await reclaim.nack("orders", "workers", "c", ids[0]) == 1
        assert await reclaim.term("orders", "workers", "c", ids[1], reason="bad") == 1
        assert await owners(r) == {ids[0]: "reclaim", ids[2]: "c"}
        st = await reclaim.stats("orders", "workers")
        assert st["dead-lettered"] == 1 and st["inbox"] == 1
        assert (await reclaim.health("orders", "workers"))["live"]["inbox"] == 1
        assert (await reclaim.sweep("orders", "workers"))["claimed"] == 0
        assert (await reclaim.simulate("orders", "workers"))["totals"]["none"] == 2
        assert await reclaim.redrive_status("orders:dlq") is None
        # DELIVERY-METADATA: the NACKed entry (delivered once), then a new one (never).
        new = await r.xadd("orders", {"n": "new"})
        got = await reclaim.readgroup("workers", "d", "orders", delivery_metadata=True)
        assert [(e.id, e.deliveries, e.attempt) for e in got[0][1]] == [(ids[0], 1, 2), (new, 0, 1)]
        assert await reclaim.policy_del("orders", "workers") is True

    run(server, protocol, test)


def test_worker_contract(server: Server, protocol: Optional[int]) -> None:
    """Two asyncio workers in one loop: good entries acknowledged once, a Retry handled twice, a
    Permanent dead-lettered with its reason, a poison entry handled MAX-DELIVERIES times then
    dead-lettered, a long handler that keeps its lease; nothing pending."""

    async def test(r: redis.asyncio.Redis) -> None:
        await r.xgroup_create("orders", "workers", id="0", mkstream=True)
        reclaim = AsyncReclaim(r)
        await reclaim.policy_set("orders", "workers", min_idle=1000, max_deliveries=MAX_DELIVERIES,
                                 dlq="orders:dlq", interval=50)
        long = await r.xadd("orders", {"ms": "3000"})
        good = [await r.xadd("orders", {"n": str(i)}) for i in range(5)]
        retry = await r.xadd("orders", {"kind": "retry"})
        perm = await r.xadd("orders", {"kind": "perm"})
        poison = await r.xadd("orders", {"kind": "poison"})
        calls: list[tuple[str, str, Optional[int]]] = []
        workers: list[AsyncWorker] = []

        def handler_for(i: int) -> Callable[[str, dict[str, str]], Awaitable[None]]:
            async def handle(entry_id: str, fields: dict[str, str]) -> None:
                n = await workers[i].deliveries(entry_id)
                calls.append((f"w{i}", entry_id, n))
                if "ms" in fields:
                    await asyncio.sleep(int(fields["ms"]) / 1000)  # the scenario: a long job
                fail_as_asked(fields, n)

            return handle

        workers = [AsyncWorker(r, "orders", "workers", f"w{i}", handler_for(i), count=3) for i in range(2)]
        tasks = [asyncio.ensure_future(w.run()) for w in workers]

        async def drained() -> bool:
            return await r.xlen("orders:dlq") == 2 and not await owners(r) and len(
                [c for c in calls if c[1] == retry]
            ) == 2

        await wait_for("every entry acknowledged or dead-lettered", drained)
        for w in workers:
            w.stop()
        await asyncio.wait_for(asyncio.gather(*tasks), 30)

        def of(e: str) -> list[Optional[int]]:
            return [n for _, i, n in calls if i == e]

        for g in [long, *good]:
            assert of(g) == [1], (g, calls)
        assert of(retry) == [1, 2] and of(perm) == [1] and of(poison) == [1, 2, 3]
        dlq = {f["reclaim-id"]: f for _, f in await r.xrange("orders:dlq")}
        assert dlq[perm]["reclaim-reason"] == "bad input"
        assert dlq[poison]["reclaim-deliveries"] == str(MAX_DELIVERIES)
        assert (await reclaim.stats("orders", "workers"))["redelivered"] == 3  # retry once, poison twice
        total = workers[0].counts + workers[1].counts
        assert (total["acked"], total["retried"], total["dead-lettered"], total["failed"]) == (7, 1, 1, 3)
        assert total["lost"] == 0

    run(server, protocol, test)


def test_worker_stop_gives_back_the_rest(server: Server, protocol: Optional[int]) -> None:
    async def test(r: redis.asyncio.Redis) -> None:
        await r.xgroup_create("orders", "workers", id="0", mkstream=True)
        await AsyncReclaim(r).policy_set("orders", "workers", min_idle=60000)
        ids = [await r.xadd("orders", {"n": str(i)}) for i in range(4)]
        handled: list[str] = []
        w: AsyncWorker

        def handle(entry_id: str, fields: dict[str, str]) -> None:  # a plain function works too
            handled.append(entry_id)
            w.stop()

        w = AsyncWorker(r, "orders", "workers", "w", handle)
        await w.run()
        assert handled == ids[:1]
        assert await owners(r) == {i: "reclaim" for i in ids[1:]}
        assert w.counts["acked"] == 1 and w.counts["given-back"] == 3 and w.held() == []

    run(server, protocol, test)
