"""The Python Worker against the loop it replaces and against RQ: jobs/s with a no-op handler.

Usage: PYTHONPATH=target/python:.cache/py:.cache/bench python3 bench/worker.py [MODULE.so]
(``make bench-worker`` installs what it needs and runs it).

One redis-server with the module (REDIS_SERVER, default redis-server), no persistence. Each round
fills a stream with N entries (BENCH_WORKER_N, 20,000) under a policy (MIN-IDLE 30000), then
drains it with each contender in turn, the order rotating from round to round; the time counted
is the drain's only (filling and enqueuing are not counted). Contenders:

- hand loop: ``Reclaim.read_entries(... COUNT 100)``, the handler on each entry, one ``XACK`` of
  the batch's IDs (what a user writes without the Worker);
- ``Worker(..., count=100).run()`` and ``AsyncWorker(..., count=100).run()``, stopped by the
  handler once it has had N entries;
- RQ's ``SimpleWorker.work(burst=True)`` on BENCH_WORKER_RQ_N (2,000) jobs of a no-op function
  (RQ is slower by two orders of magnitude: 20,000 jobs would take minutes a round).

Prints the table (median of BENCH_WORKER_ROUNDS rounds, 5) and writes it into docs/performance.md
(BENCH_OUT) between its markers, leaving the rest of the file as it is.
"""

import asyncio
import os
import statistics
import sys
import time

import redis
import redis.asyncio

import links
import probe
from redis_reclaim import Reclaim, Worker
from redis_reclaim.asyncio import AsyncReclaim, AsyncWorker

SO = sys.argv[1] if len(sys.argv) > 1 else "target/release/libredis_reclaim.so"
N = int(os.environ.get("BENCH_WORKER_N", "20000"))
RQ_N = int(os.environ.get("BENCH_WORKER_RQ_N", "2000"))
ROUNDS = int(os.environ.get("BENCH_WORKER_ROUNDS", "5"))
OUT = os.environ.get("BENCH_OUT", "docs/performance.md")
COUNT = 100
BEGIN, END = "<!-- bench/worker.py: begin -->", "<!-- bench/worker.py: end -->"


def noop(*args):
    return None


def fill(r):
    r.flushall()
    r.xgroup_create("jobs", "workers", id="0", mkstream=True)
    probe.fill_stream(r, "jobs", N, "x" * 16)
    Reclaim(r).policy_set("jobs", "workers", min_idle=30000)


def hand(port):
    r = redis.Redis(port=port, decode_responses=True)
    reclaim = Reclaim(r)
    began = time.perf_counter()
    done = 0
    while done < N:
        ids = []
        for _stream, entries in reclaim.read_entries("workers", "hand", "jobs", count=COUNT, block=1000):
            for entry_id, fields in entries:
                noop(entry_id, fields)
                ids.append(entry_id)
        if ids:
            r.xack("jobs", "workers", *ids)
            done += len(ids)
    return done, time.perf_counter() - began


def async_hand(port):
    async def run():
        r = redis.asyncio.Redis(port=port, decode_responses=True)
        reclaim = AsyncReclaim(r)
        began = time.perf_counter()
        done = 0
        while done < N:
            ids = []
            for _stream, entries in await reclaim.read_entries("workers", "hand", "jobs", count=COUNT, block=1000):
                for entry_id, fields in entries:
                    await anoop(entry_id, fields)
                    ids.append(entry_id)
            if ids:
                await r.xack("jobs", "workers", *ids)
                done += len(ids)
        took = time.perf_counter() - began
        await r.aclose() if hasattr(r, "aclose") else await r.close()
        return done, took

    return asyncio.run(run())


async def anoop(*args):
    return None


def sync_worker(port):
    r = redis.Redis(port=port, decode_responses=True)
    seen = [0]
    w = None

    def handle(entry_id, fields):
        seen[0] += 1
        if seen[0] == N:
            w.stop()

    w = Worker(r, "jobs", "workers", "sync", handle, count=COUNT, handle_signals=False)
    began = time.perf_counter()
    w.run()
    return w.counts["acked"], time.perf_counter() - began


def async_worker(port):
    async def run():
        r = redis.asyncio.Redis(port=port, decode_responses=True)
        seen = [0]
        w = None

        async def handle(entry_id, fields):
            seen[0] += 1
            if seen[0] == N:
                w.stop()

        w = AsyncWorker(r, "jobs", "workers", "async", handle, count=COUNT, handle_signals=False)
        began = time.perf_counter()
        await w.run()
        took = time.perf_counter() - began
        await r.aclose() if hasattr(r, "aclose") else await r.close()
        return w.counts["acked"], took

    return asyncio.run(run())


def rq_worker(port):
    from rq import Queue, SimpleWorker

    r = redis.Redis(port=port)
    r.flushall()
    q = Queue("bench", connection=r)
    for _ in range(RQ_N):
        q.enqueue("worker.noop")
    class Quiet(SimpleWorker):
        def subscribe(self):
            """No pub/sub thread (RQ's channel for kill commands): it takes a minute to stop."""

    w = Quiet([q], connection=r)
    began = time.perf_counter()
    w.work(burst=True, logging_level="WARNING")
    took = time.perf_counter() - began
    return len(q.finished_job_registry) if q.count == 0 else 0, took


def rq_version():
    try:
        import rq

        return rq.__version__
    except ImportError:
        return None


HAND, ASYNC_HAND = "hand loop (READGROUP COUNT 100 + one XACK)", "asyncio hand loop (the same, redis.asyncio)"
#: (name, run, drains the stream, the hand loop it is compared with)
CONTENDERS = [
    (HAND, hand, True, HAND),
    ("Worker(count=100)", sync_worker, True, HAND),
    (ASYNC_HAND, async_hand, True, HAND),
    ("AsyncWorker(count=100)", async_worker, True, ASYNC_HAND),
]


def measure(srv):
    contenders = list(CONTENDERS)
    if rq_version():
        contenders.append((f"RQ {rq_version()} SimpleWorker", rq_worker, False, HAND))
    rates = {name: [] for name, *_ in contenders}
    cpu = {name: [] for name, *_ in contenders}
    for i in range(ROUNDS):
        order = contenders[i % len(contenders):] + contenders[: i % len(contenders)]
        if i % 2:
            order.reverse()
        for name, run, needs_stream, _ in order:
            if needs_stream:
                fill(srv.r)
            cpu0 = time.process_time()
            done, took = run(srv.port)
            cpu[name].append((time.process_time() - cpu0) / max(done, 1) * 1e6)
            expected = N if needs_stream else RQ_N
            if done != expected:
                raise SystemExit(f"{name}: {done} jobs done, {expected} expected")
            rates[name].append(done / took)
            print(f"round {i + 1}: {name}: {done / took:,.0f} jobs/s, {cpu[name][-1]:.1f} µs of client CPU a job", flush=True)
    return rates, cpu


def table(rates, cpu):
    against = {name: base for name, _, _, base in CONTENDERS}
    lines = [
        "| contender | jobs/s (median) | rounds | over its hand loop | client CPU µs a job (median) | its hand loop's over it |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for name, got in rates.items():
        m, c = statistics.median(got), statistics.median(cpu[name])
        base = against.get(name, HAND)
        each = ", ".join(f"{x:,.0f}" for x in got)
        ratio = cpu_ratio = ""
        if base != name:
            ratio = f"{m / statistics.median(rates[base]):.2f}x"
            cpu_ratio = f"{statistics.median(cpu[base]) / c:.2f}x"
        lines.append(f"| {name} | **{m:,.0f}** | {each} | {ratio} | {c:,.1f} | {cpu_ratio} |")
    return "\n".join(lines)


def section(rates, cpu):
    return f"""{BEGIN}
## 7. The Python Worker against a hand loop and RQ

`make bench-worker` ([bench/worker.py](../bench/worker.py)): one server, a no-op handler, {N:,} entries
per drain (RQ: {RQ_N:,} jobs), {ROUNDS} rounds with the contenders' order rotating, median jobs/s of the
drain alone (filling the stream or the queue not counted; RQ's worker without its pub/sub thread for
kill commands, which takes a minute to stop). Python {sys.version.split()[0]}, redis-py
{redis.__version__}. The Worker acknowledges a batch with one `XACK` sent in the same round trip as the
next `RECLAIM.READGROUP`, so what it adds to the hand loop is its own bookkeeping per entry.

{table(rates, cpu)}

Ratios are against the hand loop of the same client: the sync one for `Worker` and RQ, the asyncio
one for `AsyncWorker` (redis.asyncio parses replies at about half the speed of the sync client, with
or without the library). On a machine shared with other work the wall-clock rates swing from round to
round; the client's CPU time a job (this process's, the server's not counted) is the steadier
measure of what the library adds.
{END}"""


def write(text):
    links.put_section(OUT, BEGIN, END, text)


class _Srv:
    def __init__(self, srv):
        self.r = srv.r
        self.port = srv.r.connection_pool.connection_kwargs["port"]


def main():
    with probe.server(SO, prefix="bench-worker-") as srv:
        rates, cpu = measure(_Srv(srv))
    text = section(rates, cpu)
    print(table(rates, cpu))
    write(text)
    print(f"written into {OUT}")


if __name__ == "__main__":
    main()
