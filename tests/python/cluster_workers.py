"""Producers and workers on a Redis Cluster, through redis-py's RedisCluster, for
tests/cluster_chaos.rs: what a team runs against the module, with every event written to a log.

Per stream: one producer (XADD at --rate entries/s, every --poison-every-th entry a poison one)
and --consumers workers, each in its own thread with its own RedisCluster client, looping on
`RECLAIM.READGROUP GROUP g <consumer> COUNT 10 BLOCK <ms> STREAMS <stream> >`. A worker's
handler succeeds on a normal entry (XACK) and fails on a poison one, which it gives back at once
with `RECLAIM.NACK`; the module dead-letters it once it has had MAX-DELIVERIES deliveries.

The workers do nothing about the cluster: redis-py follows MOVED/ASK, retries TRYAGAIN and
CLUSTERDOWN, and refreshes its slot map. Any exception that reaches the worker code is logged
(type and message) and the worker goes on after 50 ms, as a worker does after a lost connection;
after a ConnectionError it also gives redis-py another default node (see `worker`).

The log (--log, JSON lines; `t` is ms since the epoch):
  {"ev":"add","s":stream,"id":id,"poison":0|1,"t":..}      XADD returned this ID
  {"ev":"deliver","s":..,"id":..,"c":consumer,"t":..}       the handler starts on an entry
  {"ev":"ack","s":..,"id":..,"n":XACK's reply,"t":..}       the handler succeeded, XACK sent
  {"ev":"nack","s":..,"id":..,"t":..}                        the handler failed, NACK sent
  {"ev":"error","who":"producer"|"worker","s":..,"type":..,"msg":..,"t":..}
  {"ev":"ready"} once every client is connected; {"ev":"producers-stopped"} once every producer
  ended after `stop-producers` (no XADD after it); {"ev":"stopped"} at the end.

Standard input controls it: the line `stop-producers` stops the producers; `stop`, or the end of
input, stops everything.
"""

import argparse
import json
import sys
import threading
import time

from redis.backoff import ExponentialWithJitterBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import ConnectionError
from redis.retry import Retry


def now_ms():
    return int(time.time() * 1000)


class Log:
    def __init__(self, path):
        self.f = open(path, "a", buffering=1)
        self.lock = threading.Lock()

    def write(self, **ev):
        ev.setdefault("t", now_ms())
        line = json.dumps(ev, separators=(",", ":"))
        with self.lock:
            self.f.write(line + "\n")


def client(seeds):
    nodes = [ClusterNode(h, int(p)) for h, p in (s.rsplit(":", 1) for s in seeds)]
    # Retries on connection errors and CLUSTERDOWN for about 10 s: longer than a failover takes
    # (node timeout + election), so the worker code sees none of it.
    retry = Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), 30)
    return RedisCluster(
        startup_nodes=nodes,
        decode_responses=True,
        socket_timeout=10,
        socket_connect_timeout=2,
        retry=retry,
    )


def producer(args, stream, stop, log):
    rc = client(args.seeds)
    n = 0
    period = 1.0 / args.rate
    next_t = time.monotonic()
    while not stop.is_set():
        n += 1
        poison = 1 if n % args.poison_every == 0 else 0
        try:
            eid = rc.xadd(stream, {"n": n, "poison": poison})
            log.write(ev="add", s=stream, id=eid, poison=poison)
        except Exception as e:  # noqa: BLE001 - logged for the test to judge
            log.write(ev="error", who="producer", s=stream, type=type(e).__name__, msg=str(e))
            time.sleep(0.05)
        next_t += period
        delay = next_t - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            next_t = time.monotonic()


def entries(reply):
    """The (id, fields) of a READGROUP reply: [[key, [[id, [f, v, ...]], ...]]] in RESP2, a map
    of key to entries in RESP3 (what redis-py 8 speaks to a cluster)."""
    out = []
    pairs = reply.items() if isinstance(reply, dict) else (reply or [])
    for _key, items in pairs:
        for eid, fields in items:
            out.append((eid, dict(zip(fields[::2], fields[1::2]))))
    return out


def worker(args, stream, consumer, stop, log):
    rc = client(args.seeds)
    g = args.group
    while not stop.is_set():
        try:
            reply = rc.execute_command(
                "RECLAIM.READGROUP", "GROUP", g, consumer, "COUNT", 10,
                "BLOCK", args.block, "STREAMS", stream, ">",
            )
            for eid, fields in entries(reply):
                log.write(ev="deliver", s=stream, id=eid, c=consumer)
                if fields.get("poison") == "1":
                    rc.execute_command("RECLAIM.NACK", stream, g, consumer, eid)
                    log.write(ev="nack", s=stream, id=eid)
                else:
                    n = rc.xack(stream, g, eid)
                    log.write(ev="ack", s=stream, id=eid, n=n)
        except ConnectionError as e:
            log.write(ev="error", who="worker", s=stream, type=type(e).__name__, msg=str(e))
            # RECLAIM.READGROUP, like XREADGROUP, has movable keys: redis-py asks its default node
            # for them (COMMAND GETKEYS) and does not replace that node when it is the one that
            # died. Pick another primary.
            try:
                rc.replace_default_node()
            except Exception:  # noqa: BLE001 - the next round tries again
                pass
            time.sleep(0.05)
        except Exception as e:  # noqa: BLE001 - logged for the test to judge
            log.write(ev="error", who="worker", s=stream, type=type(e).__name__, msg=str(e))
            time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", required=True, type=lambda s: s.split(","))
    ap.add_argument("--streams", required=True, type=lambda s: s.split(","))
    ap.add_argument("--group", default="g")
    ap.add_argument("--consumers", type=int, default=2)
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--poison-every", type=int, default=50)
    ap.add_argument("--block", type=int, default=500)
    ap.add_argument("--log", required=True)
    args = ap.parse_args()
    log = Log(args.log)
    stop_producers, stop_all = threading.Event(), threading.Event()
    producers, threads = [], []
    for s in args.streams:
        producers.append(threading.Thread(target=producer, args=(args, s, stop_producers, log)))
        for k in range(args.consumers):
            threads.append(threading.Thread(target=worker, args=(args, s, f"c{k}", stop_all, log)))
    threads += producers
    for t in threads:
        t.daemon = True
        t.start()
    log.write(ev="ready")
    for line in sys.stdin:
        if line.strip() == "stop-producers":
            stop_producers.set()
            # A producer's XADD in flight (redis-py retries through a cluster change) ends
            # within its socket timeout.
            for t in producers:
                t.join(timeout=15)
            log.write(ev="producers-stopped")
        elif line.strip() == "stop":
            break
    stop_producers.set()
    stop_all.set()
    for t in threads:
        t.join(timeout=5 + args.block / 1000)
    log.write(ev="stopped")


if __name__ == "__main__":
    main()
