"""Run by test_worker.py: a worker process that the test stops with SIGTERM while the first
entry of its batch is in hand.

    python3 sigterm_worker.py PORT thread|asyncio|kill-thread|kill-asyncio

Prints ``start <id>`` when the handler takes an entry, ``done <id>`` when it finishes it (which it
does only once the worker is stopping), and ``given-back <n>`` after ``run`` returned. With
``kill-...``, the handler returns at once for the first two entries (``done <id>``) and SIGKILLs
its own process in the third.
"""

import asyncio
import os
import signal
import sys
import time

import redis
import redis.asyncio

from redis_reclaim import Worker
from redis_reclaim.asyncio import AsyncWorker


def main() -> int:
    port, flavour = int(sys.argv[1]), sys.argv[2]
    if flavour.startswith("kill-"):
        return kill(port, flavour[5:])
    if flavour == "thread":
        w = Worker(redis.Redis(port=port, decode_responses=True), "orders", "workers", "w1", None)  # type: ignore[arg-type]

        def handle(entry_id: str, fields: dict[str, str]) -> None:
            print("start", entry_id, flush=True)
            deadline = time.monotonic() + 30
            while not w.stopping and time.monotonic() < deadline:
                time.sleep(0.01)
            print("done", entry_id, flush=True)

        w.handler = handle
        w.run()
        print("given-back", w.counts["given-back"], flush=True)
        return 0

    async def run() -> int:
        a = AsyncWorker(redis.asyncio.Redis(port=port, decode_responses=True), "orders", "workers", "w1", None)  # type: ignore[arg-type]

        async def handle(entry_id: str, fields: dict[str, str]) -> None:
            print("start", entry_id, flush=True)
            deadline = time.monotonic() + 30
            while not a.stopping and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            print("done", entry_id, flush=True)

        a.handler = handle
        await a.run()
        print("given-back", a.counts["given-back"], flush=True)
        return 0

    return asyncio.run(run())


def kill(port: int, flavour: str) -> int:
    handled: list[str] = []

    def handle(entry_id: str, fields: dict[str, str]) -> None:
        if len(handled) == 2:
            print("kill", entry_id, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        handled.append(entry_id)
        print("done", entry_id, flush=True)

    if flavour == "thread":
        Worker(redis.Redis(port=port, decode_responses=True), "orders", "workers", "w1", handle, count=10).run()
        return 0

    async def run() -> None:
        client = redis.asyncio.Redis(port=port, decode_responses=True)
        await AsyncWorker(client, "orders", "workers", "w1", handle, count=10).run()

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
