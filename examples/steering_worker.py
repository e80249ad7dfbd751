#!/usr/bin/env python3
"""A redis-reclaim worker that steers its own entries with RECLAIM.EXTEND, NACK and TERM.

Run as many as you like, each with its own --consumer. Like examples/worker.py it reads with
RECLAIM.READGROUP; it also tells the module what happened to each entry instead of waiting for its
lease (the policy's MIN-IDLE) to run out:

- a heartbeat thread renews the lease of the entries it holds (RECLAIM.EXTEND), so a job that
  runs longer than MIN-IDLE is never handed to another worker; an entry the heartbeat could not
  renew was lost and is not acknowledged;
- a transient failure gives the entry back, to be retried after --retry-delay-ms (RECLAIM.NACK
  ... DELAY, at most MIN-IDLE);
- a permanent failure dead-letters it at once with the reason (RECLAIM.TERM ... REASON);
- any other exception leaves it pending: it is retried once its lease ends (growing with the
  policy's BACKOFF), and dead-lettered after MAX-DELIVERIES attempts.

    python3 examples/steering_worker.py --consumer w1 [--port 6379] [--stream orders] [--group workers]

--until-idle MS stops the worker once it has been given nothing for MS milliseconds (0: never).
It prints a line per entry handled: "ok|nack|term|failed|lost <id> [delivery <n>][: why]".
"""
import argparse
import threading
import time

import redis


class Transient(Exception):
    """Worth retrying soon: a timeout, a dependency restarting."""


class Permanent(Exception):
    """Never worth retrying: the entry itself is wrong."""


def handle(fields, delivery):
    """The work, simulated from the entry's fields: "ms" takes that long, "flaky" fails on its
    first delivery, "bad" always fails for good."""
    time.sleep(int(fields.get("ms", 0)) / 1000)
    if "flaky" in fields and delivery == 1:
        raise Transient("upstream timed out")
    if "bad" in fields:
        raise Permanent(f"cannot parse {fields['bad']!r}")


class Heartbeat(threading.Thread):
    """Renews the lease of the entries this worker holds every `every` seconds (RECLAIM.EXTEND),
    for at most `max_hold` seconds each: a job that hangs longer loses its entry to another
    worker."""

    def __init__(self, r, stream, group, consumer, every, max_hold):
        super().__init__(daemon=True)
        self.r, self.key, self.every, self.max_hold = r, (stream, group, consumer), every, max_hold
        self.held, self.lock = {}, threading.Lock()  # entry ID -> when it was taken

    def hold(self, ids):
        with self.lock:
            self.held.update(dict.fromkeys(ids, time.monotonic()))

    def release(self, entry_id):
        """Stops renewing `entry_id`; whether it was still ours."""
        with self.lock:
            return self.held.pop(entry_id, None) is not None

    def run(self):
        while True:
            time.sleep(self.every)
            now = time.monotonic()
            with self.lock:
                # A job past max_hold hangs: give its entry up, another worker will get it.
                self.held = {i: t for i, t in self.held.items() if now - t < self.max_hold}
                ids = list(self.held)
            if not ids:
                continue
            try:
                renewed = set(self.r.execute_command("RECLAIM.EXTEND", *self.key, *ids))
            except redis.RedisError:
                continue  # try again at the next beat
            with self.lock:
                for i in set(ids) - renewed:  # taken by the policy meanwhile: lost
                    self.held.pop(i, None)


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

    r = redis.Redis(host=a.host, port=a.port, decode_responses=True)
    # RECLAIM.READGROUP replies exactly as XREADGROUP does: parse it with redis-py's XREADGROUP parser.
    r.set_response_callback("RECLAIM.READGROUP", r.response_callbacks["XREADGROUP"])
    policy = r.execute_command("RECLAIM.POLICY", "GET", a.stream, a.group)
    if isinstance(policy, list):  # RESP2: field, value, field, value...
        policy = dict(zip(policy[::2], policy[1::2]))
    min_idle = policy["min-idle"]
    beat = Heartbeat(r, a.stream, a.group, a.consumer, min_idle / 3000, a.max_job_ms / 1000)
    beat.start()
    mine = (a.stream, a.group, a.consumer)

    last = time.monotonic()
    while not a.until_idle or time.monotonic() - last < a.until_idle / 1000:
        reply = r.execute_command(
            "RECLAIM.READGROUP", "GROUP", a.group, a.consumer,
            "COUNT", 10, "BLOCK", 1000, "STREAMS", a.stream, ">",
        )
        for _stream, entries in reply or []:
            beat.hold(entry_id for entry_id, _ in entries)
            for entry_id, fields in entries:
                # The delivery count: 1 on the first delivery, 2 on the first retry...
                pel = r.xpending_range(a.stream, a.group, entry_id, entry_id, 1, a.consumer)
                if not pel:
                    beat.release(entry_id)
                    print(f"lost {entry_id}", flush=True)
                    continue
                n = pel[0]["times_delivered"]
                try:
                    handle(fields, n)
                    failure = None
                except Exception as e:
                    failure = e
                if not beat.release(entry_id):  # the lease ran out: another worker may have it
                    print(f"lost {entry_id} delivery {n}", flush=True)
                elif failure is None:
                    r.xack(a.stream, a.group, entry_id)
                    print(f"ok {entry_id} delivery {n}", flush=True)
                elif isinstance(failure, Transient):
                    r.execute_command("RECLAIM.NACK", *mine, entry_id, "DELAY", a.retry_delay_ms)
                    print(f"nack {entry_id} delivery {n}: {failure}", flush=True)
                elif isinstance(failure, Permanent):
                    r.execute_command("RECLAIM.TERM", *mine, entry_id, "REASON", str(failure))
                    print(f"term {entry_id} delivery {n}: {failure}", flush=True)
                else:  # no XACK: retried after its lease (BACKOFF), the DLQ after MAX-DELIVERIES
                    print(f"failed {entry_id} delivery {n}: {failure}", flush=True)
                last = time.monotonic()  # busy until now: --until-idle counts from here


if __name__ == "__main__":
    main()
