"""Run by test_worker.py: a worker process that the test stops with SIGTERM while the first
entry of its batch is in hand.

    python3 sigterm_worker.py PORT thread|asyncio

Prints ``start <id>`` when the handler takes an entry, ``done <id>`` when it finishes it (which it
does only once the worker is stopping), and ``given-back <n>`` after ``run`` returned.
"""

import asyncio
import sys
import time

import redis
import redis.asyncio

from redis_reclaim import Worker
from redis_reclaim.asyncio import AsyncWorker


def main() -> int:
    port, flavour = int(sys.argv[1]), sys.argv[2]
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


if __name__ == "__main__":
    sys.exit(main())
