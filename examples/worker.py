#!/usr/bin/env python3
"""A redis-reclaim worker in redis-py: run as many as you like, each with its own --consumer.

Every worker calls RECLAIM.READGROUP instead of XREADGROUP ... >: it gets the entries due for
redelivery (left by crashed or failing workers) before new ones, so there is no recovery process.
A handler that fails leaves its entry unacknowledged: the entry comes back to some worker once
MIN-IDLE has passed, and lands in the DLQ after MAX-DELIVERIES attempts.

    python3 examples/worker.py --consumer w1 [--port 6379] [--stream orders] [--group workers]

--until-idle MS stops the worker once it has been given nothing for MS milliseconds (0: never).
"""
import argparse
import time

import redis


def handle(fields):
    """The work. An entry with a "poison" field fails, every time."""
    if "poison" in fields:
        raise ValueError("poison entry")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=6379)
    p.add_argument("--stream", default="orders")
    p.add_argument("--group", default="workers")
    p.add_argument("--consumer", required=True)
    p.add_argument("--until-idle", type=int, default=0, metavar="MS")
    a = p.parse_args()

    r = redis.Redis(host=a.host, port=a.port, decode_responses=True)
    # RECLAIM.READGROUP replies exactly as XREADGROUP does: parse it with redis-py's XREADGROUP parser.
    r.set_response_callback("RECLAIM.READGROUP", r.response_callbacks["XREADGROUP"])

    last = time.monotonic()
    while not a.until_idle or time.monotonic() - last < a.until_idle / 1000:
        reply = r.execute_command(
            "RECLAIM.READGROUP", "GROUP", a.group, a.consumer,
            "COUNT", 10, "BLOCK", 1000, "STREAMS", a.stream, ">",
        )
        for _stream, entries in reply or []:
            for entry_id, fields in entries:
                last = time.monotonic()
                try:
                    handle(fields)
                except Exception as e:
                    # No XACK: redelivered after MIN-IDLE, dead-lettered after MAX-DELIVERIES.
                    print(f"failed {entry_id}: {e}", flush=True)
                    continue
                r.xack(a.stream, a.group, entry_id)
                print(f"ok {entry_id}", flush=True)


if __name__ == "__main__":
    main()
