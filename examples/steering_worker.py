#!/usr/bin/env python3
"""A redis-reclaim worker that steers its own entries, on the Python client (clients/python).

Run as many as you like, each with its own --consumer. Like examples/worker.py it is a Worker on
RECLAIM.READGROUP; its handler also tells the module what happened to each entry instead of
waiting for its lease (the policy's MIN-IDLE) to run out:

- a job that runs longer than MIN-IDLE keeps its entry: the Worker's heartbeat renews the lease
  of what it holds (RECLAIM.EXTEND), for at most --max-job-ms (a job that hangs longer loses its
  entry to another worker);
- a transient failure raises Retry: the entry is given back, to be retried after
  --retry-delay-ms (RECLAIM.NACK ... DELAY, at most MIN-IDLE);
- a permanent failure raises Permanent: the entry is dead-lettered at once with the reason
  (RECLAIM.TERM ... REASON);
- any other exception gives it back for when its lease would end (growing with the policy's
  BACKOFF), and the module dead-letters it after MAX-DELIVERIES attempts.

    python3 examples/steering_worker.py --consumer w1 [--port 6379] [--stream orders] [--group workers]

--until-idle MS stops the worker once it has been given nothing for MS milliseconds (0: never).
It prints a line per entry handled: "ok|nack|term <id> delivery <n>[: why]".
"""
import argparse
import logging
import sys
import time
from pathlib import Path

import redis

try:
    from redis_reclaim import Permanent, Retry, Worker
except ImportError:  # run from a checkout, without `pip install ./clients/python`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients/python/src"))
    from redis_reclaim import Permanent, Retry, Worker


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=6379)
    p.add_argument("--stream", default="orders")
    p.add_argument("--group", default="workers")
    p.add_argument("--consumer", required=True)
    p.add_argument("--retry-delay-ms", type=int, default=1000)
    p.add_argument("--max-job-ms", type=int, default=600_000)
    p.add_argument("--until-idle", type=int, default=0, metavar="MS")
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")

    def handle(entry_id, fields):
        """The work, simulated from the entry's fields: "ms" takes that long, "flaky" fails on
        its first delivery, "bad" always fails for good."""
        n = worker.deliveries(entry_id)  # 1 on the first delivery, 2 on the first retry...
        time.sleep(int(fields.get("ms", 0)) / 1000)
        if "flaky" in fields and n == 1:
            print(f"nack {entry_id} delivery {n}: upstream timed out", flush=True)
            raise Retry(a.retry_delay_ms)
        if "bad" in fields:
            reason = f"cannot parse {fields['bad']!r}"
            print(f"term {entry_id} delivery {n}: {reason}", flush=True)
            raise Permanent(reason)
        print(f"ok {entry_id} delivery {n}", flush=True)

    r = redis.Redis(host=a.host, port=a.port, decode_responses=True)
    worker = Worker(
        r, a.stream, a.group, a.consumer, handle,
        max_hold_ms=a.max_job_ms, stop_after_idle_ms=a.until_idle or None,
    )
    worker.run()


if __name__ == "__main__":
    main()
