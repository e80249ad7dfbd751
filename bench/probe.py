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
