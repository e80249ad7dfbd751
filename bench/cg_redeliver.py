"""Instructions of RECLAIM.READGROUP redeliveries and of an XAUTOCLAIM loop, under callgrind.

Usage: PYTHONPATH=.cache/py python3 bench/cg_redeliver.py [MODULE.so] [N]

Starts redis-server (REDIS_SERVER, default redis-server) under `valgrind --tool=callgrind` with
instrumentation off; one stream of N entries (default 20,000; `n <i> body <64 bytes>`), two
groups whose every entry is pending at a consumer that never acknowledges; a policy on one
(`MIN-IDLE 100 INTERVAL 3600000`: its first pass runs before the entries are stale, then none).
Once they are stale, instrumented: an `XAUTOCLAIM ... COUNT 100` loop takes the first group's,
`RECLAIM.READGROUP ... COUNT 100` calls take the second's; prints the server's instructions for
each (the whole server: command, network, event loop) and their ratio. Needs valgrind
(callgrind_control, callgrind_annotate). Not run by `make bench`: a deterministic count where
server time is noisy.
"""

import sys
import time

import probe

SO = sys.argv[1] if len(sys.argv) > 1 else "target/release/libredis_reclaim.so"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
BODY = "x" * 64


def entries(reply):
    """How many entries a READGROUP reply holds (RESP2 list or RESP3 map)."""
    if not reply:
        return 0
    if isinstance(reply, dict):
        return sum(len(v) for v in reply.values())
    return sum(len(s[1]) for s in reply)


def autoclaim_all(r):
    """A worker's XAUTOCLAIM loop over group ga, to the end of its PEL; how many it took."""
    cursor, n = "0-0", 0
    while True:
        rep = r.execute_command("XAUTOCLAIM", "s", "ga", "worker", 100, cursor, "COUNT", 100)
        cursor, n = rep[0], n + len(rep[1])
        if cursor in (b"0-0", "0-0"):
            return n


def readgroup_all(r):
    """RECLAIM.READGROUP calls on group gr until all N are taken (or one finds none)."""
    n = 0
    while n < N:
        k = entries(r.execute_command("RECLAIM.READGROUP", "GROUP", "gr", "worker", "COUNT", 100,
                                      "STREAMS", "s", ">"))
        if k == 0:
            break
        n += k
    return n


def main():
    with probe.server(SO, callgrind=True, prefix="cg-redeliver-") as srv:
        r = srv.r
        probe.fill_stream(r, "s", N, BODY)
        for g in ("ga", "gr"):
            r.xgroup_create("s", g, "0")
            r.execute_command("XREADGROUP", "GROUP", g, "dead", "COUNT", N, "STREAMS", "s", ">")
        r.execute_command("RECLAIM.POLICY", "SET", "s", "gr", "MIN-IDLE", 100, "INTERVAL", 3600000)
        time.sleep(1.0)
        probe.compare(srv, f"{N} stale entries",
                      (("XAUTOCLAIM loop", autoclaim_all), ("RECLAIM.READGROUP", readgroup_all)))

if __name__ == "__main__":
    main()
