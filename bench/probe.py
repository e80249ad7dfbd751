"""What the probes in bench/ share: a redis-server with the module on a free port in a temporary
directory (optionally under callgrind), always stopped, and callgrind's controls.

    with probe.server(SO, callgrind=True) as srv:
        srv.r.ping()
        with srv.counting("NAME") as dump:   # instrumented from zero to the end of the block
            ...
        dump.path                            # the callgrind output of that block

PROBE_KEEP=/tmp/x keeps a copy of each block's output as /tmp/x-NAME.out (for callgrind_annotate).
"""

import contextlib
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time

import redis


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Server:
    def __init__(self, r, pid, d):
        self.r, self.pid, self.dir = r, pid, d

    def _ctl(self, *args):
        subprocess.run(["callgrind_control", *args, str(self.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    @contextlib.contextmanager
    def counting(self, name):
        """Callgrind counts from zero for the block only; `.path` is its dump afterwards."""
        dump = type("Dump", (), {"path": None})()
        self._ctl("-z")
        self._ctl("-i", "on")
        yield dump
        self._ctl("-d", name)
        self._ctl("-i", "off")
        dumps = [os.path.join(self.dir, f) for f in os.listdir(self.dir) if f.startswith("cg.out")]
        dump.path = max(dumps, key=os.path.getmtime)
        keep = os.environ.get("PROBE_KEEP")
        if keep:
            shutil.copy(dump.path, f"{keep}-{name}.out")


def fill_stream(r, key, n, body):
    """Appends `n` entries `n <i> body <body>` to stream `key`, in EVAL chunks of 10,000."""
    fill = "for i=1,tonumber(ARGV[1]) do redis.call('XADD',KEYS[1],'*','n',i,'body',ARGV[2]) end"
    for start in range(0, n, 10000):
        r.eval(fill, 1, key, min(10000, n - start), body)


def total(path):
    """The instructions of a callgrind output (its PROGRAM TOTALS)."""
    out = subprocess.run(["callgrind_annotate", path], capture_output=True, text=True).stdout
    m = re.search(r"([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", out)
    return int(m.group(1).replace(",", "")) if m else 0


def compare(srv, what, methods):
    """Runs each `(name, take_all)` of `methods` (two) counted under callgrind, `take_all(r)`
    returning how many entries it handled; prints the whole server's instructions per entry of
    each and the second's rate over the first's."""
    got = []
    for name, take_all in methods:
        with srv.counting(name) as dump:
            n = take_all(srv.r)
        got.append((name, n, total(dump.path)))
    print(f"{what}: instructions of the whole server")
    for name, n, i in got:
        print(f"  {name:20} {i:>14,} for {n} entries ({i / max(n, 1):,.0f} each)")
    (a, an, ai), (b, bn, bi) = got
    print(f"  {b}'s rate / {a}'s: {(ai / max(an, 1)) / max(bi / max(bn, 1), 1):.3f}x")
    return got


@contextlib.contextmanager
def server(so, callgrind=False, prefix="probe-"):
    """redis-server (REDIS_SERVER, default redis-server) with module `so`, no persistence; under
    `valgrind --tool=callgrind` with instrumentation off when `callgrind`. Yields a
    :class:`Server` once it answers PING; kills it and removes its directory after."""
    d = tempfile.mkdtemp(prefix=prefix)
    port = free_port()
    cmd = [os.environ.get("REDIS_SERVER", "redis-server"), "--port", str(port), "--save", "",
           "--dir", d, "--appendonly", "no", "--loadmodule", os.path.abspath(so)]
    if callgrind:
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--compress-strings=no",
               f"--callgrind-out-file={os.path.join(d, 'cg.out')}"] + cmd
    srv = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        r = redis.Redis(port=port, socket_timeout=600)
        for _ in range(600):
            try:
                r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.1)
        yield Server(r, srv.pid, d)
    finally:
        srv.kill()
        srv.wait()
        shutil.rmtree(d, ignore_errors=True)
