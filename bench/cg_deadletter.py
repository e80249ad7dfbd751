"""Instructions of dead-letter moves: the module's against the best Lua script, under callgrind.

Usage: PYTHONPATH=.cache/py python3 bench/cg_deadletter.py [MODULE.so] [N]

Starts redis-server (REDIS_SERVER, default redis-server) under `valgrind --tool=callgrind` with
instrumentation off; one stream of N entries (default 20,000; `n <i> body <64 bytes>`), two
groups whose every entry is pending at a consumer that never acknowledges, delivered 5 times
(`XCLAIM ... RETRYCOUNT 5`). Once they are stale, instrumented: examples/bench/lua/dlq_best.lua
(XPENDING IDLE + XRANGE + XADD each + XACK, one EVALSHA per batch of 100) moves the first
group's entries to a DLQ; then a policy (`MIN-IDLE 50 MAX-DELIVERIES 1 DLQ ...`) moves the
second's. Prints the server's instructions for each (the whole server: commands, network, event
loop, the module's timer) per entry and their ratio. Needs valgrind (callgrind_control,
callgrind_annotate). Not run by `make bench`: a deterministic count where server time is noisy.
"""

import os
import sys
import time

import probe

SO = sys.argv[1] if len(sys.argv) > 1 else "target/release/libredis_reclaim.so"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
BODY = "x" * 64
LUA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "bench", "lua")


def lua_all(r):
    """The Lua script, a batch of 100 per EVALSHA, until a batch moves nothing."""
    with open(os.path.join(LUA, "dlq_best.lua")) as f:
        sha = r.script_load(f.read())
    n = 0
    while True:
        k = r.evalsha(sha, 2, "s", "dlq:lua", "gl", 50, 100, int(time.time() * 1000))
        if k == 0:
            return n
        n += k


def module_all(r):
    """A policy that dead-letters every entry of group gm; waits until STATS shows all moved.
    The tick budget is 50x the default: under callgrind the server runs about 50 times slower,
    and a step sizes its batches by time."""
    r.config_set("reclaim.tick-budget-us", 100000)
    r.execute_command("RECLAIM.POLICY", "SET", "s", "gm", "MIN-IDLE", 50, "MAX-DELIVERIES", 1,
                      "DLQ", "dlq:mod", "INTERVAL", 3600000)
    while True:
        st = r.execute_command("RECLAIM.STATS", "s", "gm")
        st = st if isinstance(st, dict) else dict(zip(st[::2], st[1::2]))
        n = int(st.get(b"dead-lettered", 0))
        if n >= N:
            return n
        time.sleep(0.2)


def main():
    with probe.server(SO, callgrind=True, prefix="cg-deadletter-") as srv:
        r = srv.r
        probe.fill_stream(r, "s", N, BODY)
        raise_ = "local p = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', ARGV[2]) " \
                 "for _, e in ipairs(p) do redis.call('XCLAIM', KEYS[1], ARGV[1], 'dead', 0, " \
                 "e[1], 'RETRYCOUNT', 5, 'JUSTID') end"
        for g in ("gl", "gm"):
            r.xgroup_create("s", g, "0")
            r.execute_command("XREADGROUP", "GROUP", g, "dead", "COUNT", N, "STREAMS", "s", ">")
            r.eval(raise_, 1, "s", g, N)
        time.sleep(0.5)
        probe.compare(srv, f"{N} dead-letter moves", (("Lua script", lua_all), ("module", module_all)))
        assert r.xlen("dlq:lua") == N and r.xlen("dlq:mod") == N, "not every entry moved"

if __name__ == "__main__":
    main()
