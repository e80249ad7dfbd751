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

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import redis

SO = sys.argv[1] if len(sys.argv) > 1 else "target/release/libredis_reclaim.so"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
BODY = "x" * 64


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def ctl(pid, *args):
    subprocess.run(["callgrind_control", *args, str(pid)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def total(path):
    out = subprocess.run(["callgrind_annotate", path], capture_output=True, text=True).stdout
    m = re.search(r"([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", out)
    return int(m.group(1).replace(",", "")) if m else 0


def entries(reply):
    """How many entries a READGROUP reply holds (RESP2 list or RESP3 map)."""
    if not reply:
        return 0
    if isinstance(reply, dict):
        return sum(len(v) for v in reply.values())
    return sum(len(s[1]) for s in reply)


def main():
    d = tempfile.mkdtemp(prefix="cg-redeliver-")
    port = free_port()
    out = os.path.join(d, "cg.out")
    srv = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
         os.environ.get("REDIS_SERVER", "redis-server"), "--port", str(port), "--save", "",
         "--dir", d, "--appendonly", "no", "--loadmodule", os.path.abspath(SO)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        r = redis.Redis(port=port, socket_timeout=600)
        for _ in range(600):
            try:
                r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.1)
        fill = "for i=1,tonumber(ARGV[1]) do redis.call('XADD',KEYS[1],'*','n',i,'body',ARGV[2]) end"
        for start in range(0, N, 10000):
            r.eval(fill, 1, "s", min(10000, N - start), BODY)
        for g in ("ga", "gr"):
            r.xgroup_create("s", g, "0")
            r.execute_command("XREADGROUP", "GROUP", g, "dead", "COUNT", N, "STREAMS", "s", ">")
        r.execute_command("RECLAIM.POLICY", "SET", "s", "gr", "MIN-IDLE", 100, "INTERVAL", 3600000)
        time.sleep(1.0)
        got = {}
        for name in ("XAUTOCLAIM", "RECLAIM.READGROUP"):
            ctl(srv.pid, "-z")
            ctl(srv.pid, "-i", "on")
            n = 0
            if name == "XAUTOCLAIM":
                cursor = "0-0"
                while True:
                    rep = r.execute_command("XAUTOCLAIM", "s", "ga", "worker", 100, cursor, "COUNT", 100)
                    cursor, n = rep[0], n + len(rep[1])
                    if cursor in (b"0-0", "0-0"):
                        break
            else:
                while n < N:
                    k = entries(r.execute_command("RECLAIM.READGROUP", "GROUP", "gr", "worker",
                                                  "COUNT", 100, "STREAMS", "s", ">"))
                    if k == 0:
                        break
                    n += k
            ctl(srv.pid, "-d", name)
            ctl(srv.pid, "-i", "off")
            dumps = sorted((os.path.join(d, f) for f in os.listdir(d) if f.startswith("cg.out")),
                           key=os.path.getmtime)
            got[name] = (n, total(dumps[-1]))
        (xn, xi), (mn, mi) = got["XAUTOCLAIM"], got["RECLAIM.READGROUP"]
        print(f"{N} stale entries: instructions of the whole server")
        print(f"  XAUTOCLAIM loop     {xi:>14,} for {xn} entries ({xi / max(xn, 1):,.0f} each)")
        print(f"  RECLAIM.READGROUP   {mi:>14,} for {mn} entries ({mi / max(mn, 1):,.0f} each)")
        print(f"  READGROUP's rate / XAUTOCLAIM's: {(xi / max(xn, 1)) / max(mi / max(mn, 1), 1):.3f}x")
    finally:
        srv.kill()
        srv.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
