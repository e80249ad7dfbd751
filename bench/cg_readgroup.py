"""Instructions per call of RECLAIM.READGROUP and XREADGROUP with nothing due, under callgrind.

Usage: PYTHONPATH=.cache/py python3 bench/cg_readgroup.py [MODULE.so] [PEL] [COUNT]

Starts redis-server (REDIS_SERVER, default redis-server) under `valgrind --tool=callgrind` with
instrumentation off, builds a stream whose group holds PEL entries pending at a live consumer
(`MIN-IDLE 600000`: nothing is due) and waits for the policy's first pass; then, instrumented,
300 pipelined calls of each command (COUNT new entries each), and prints the inclusive
instructions per call of the server's `call` (the whole command) and of the parts named below.
Needs valgrind (callgrind_control, callgrind_annotate). Not run by `make bench`: a deterministic
breakdown where server time is noisy.
"""

import re
import subprocess
import sys
import time

import probe

SO = sys.argv[1] if len(sys.argv) > 1 else "target/release/libredis_reclaim.so"
PEL = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
COUNT = int(sys.argv[3]) if len(sys.argv) > 3 else 1
CALLS = 300
PARTS = [
    "call", "xreadCommand", "RM_Call", "call'2", "RedisModuleCommandDispatcher",
    "readgroup_cmd", "check_access", "Caller::of", "RM_ACLCheckCommandPermissions",
    "readgroup::parse", "quick_read", "xreadgroup_argv", "decode_args",
    "moduleCreateArgvFromUserFormat", "moduleReleaseTempClient", "sdscatlen",
    "RM_ReplyWithCallReply",
]


def per_call(path):
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", path],
                         capture_output=True, text=True).stdout
    got = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s.*?(\S+) \[", line)
        if not m:
            continue
        name = m.group(2).split(":")[-1]
        for p in PARTS:
            if (name == p or name.endswith("::" + p) or name == "???:" + p) and p not in got:
                got[p] = int(m.group(1).replace(",", "")) / CALLS
    return got


def main():
    with probe.server(SO, callgrind=True, prefix="cg-readgroup-") as srv:
        r = srv.r
        fill = "for i=1,tonumber(ARGV[1]) do redis.call('XADD',KEYS[1],'*','n',i) end"
        left = PEL + 1 + 2 * CALLS * COUNT
        while left > 0:
            r.eval(fill, 1, "s", min(left, 10000))
            left -= 10000
        for g in ("gx", "gr"):
            r.xgroup_create("s", g, "0")
            r.xreadgroup(g, "live", {"s": ">"}, count=PEL + 1)
        r.execute_command("RECLAIM.POLICY", "SET", "s", "gr", "MIN-IDLE", 600000)
        while True:
            st = r.execute_command("RECLAIM.STATS", "s", "gr")
            st = st if isinstance(st, dict) else dict(zip(st[::2], st[1::2]))
            if int(st.get(b"passes", 0)) >= 1:
                break
            time.sleep(0.2)
        res = {}
        for cmd, g in (("XREADGROUP", "gx"), ("RECLAIM.READGROUP", "gr")):
            p = r.pipeline(transaction=False)
            for _ in range(CALLS):
                p.execute_command(cmd, "GROUP", g, "reader", "COUNT", COUNT, "STREAMS", "s", ">")
            with srv.counting(cmd) as dump:
                p.execute()
            res[cmd] = per_call(dump.path)
        x, m = res["XREADGROUP"], res["RECLAIM.READGROUP"]
        print(f"PEL {PEL}, COUNT {COUNT}: instructions per call (inclusive)")
        print(f"  XREADGROUP          call {x.get('call', 0):8.0f}")
        print(f"  RECLAIM.READGROUP   call {m.get('call', 0):8.0f}  ratio {m.get('call', 0) / max(x.get('call', 1), 1):.3f}")
        for p in PARTS[1:]:
            if p in m:
                print(f"    {p:34} {m[p]:8.0f}")


if __name__ == "__main__":
    main()
