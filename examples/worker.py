#!/usr/bin/env python3
"""A redis-reclaim worker on the Python client (clients/python): run as many as you like, each
with its own --consumer.

The Worker reads with RECLAIM.READGROUP instead of XREADGROUP ... >: it gets the entries due for
redelivery (left by crashed or failing workers) before new ones, so there is no recovery process.
A handler that returns has its entry acknowledged; one that raises gives it back, to be delivered
again once its lease (the policy's MIN-IDLE) would have ended, and the module dead-letters it after
MAX-DELIVERIES attempts. SIGTERM or Ctrl-C stops it cleanly, holding nothing.

    python3 examples/worker.py --consumer w1 [--port 6379] [--stream orders] [--group workers]

--until-idle MS stops the worker once it has been given nothing for MS milliseconds (0: never).
It prints "ok <id>" or "failed <id>: why" per entry handled.
"""
import argparse
import logging
import sys
from pathlib import Path

import redis

try:
    from redis_reclaim import Worker
except ImportError:  # run from a checkout, without `pip install ./clients/python`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients/python/src"))
    from redis_reclaim import Worker


def handle(entry_id, fields):
    """The work. An entry with a "poison" field fails, every time."""
    if "poison" in fields:
        print(f"failed {entry_id}: poison entry", flush=True)
        raise ValueError("poison entry")
    print(f"ok {entry_id}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=6379)
    p.add_argument("--stream", default="orders")
    p.add_argument("--group", default="workers")
    p.add_argument("--consumer", required=True)
    p.add_argument("--until-idle", type=int, default=0, metavar="MS")
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")

    r = redis.Redis(host=a.host, port=a.port, decode_responses=True)
    worker = Worker(r, a.stream, a.group, a.consumer, handle, stop_after_idle_ms=a.until_idle or None)
    worker.run()


if __name__ == "__main__":
    main()
