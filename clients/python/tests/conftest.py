"""Real servers for the tests: redis-server with the module, on free loopback ports, in temporary
directories, always stopped.

``REDIS_SERVER`` names the server binary (default ``redis-server``), ``RECLAIM_MODULE`` the module
(default ``target/release/libredis_reclaim.so`` of the project; ``make test-python`` sets both).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, TypeVar

import pytest
import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

from redis_reclaim import Permanent, Retry

PROJECT = Path(__file__).resolve().parents[3]
MODULE = os.environ.get("RECLAIM_MODULE") or str(PROJECT / "target/release/libredis_reclaim.so")
SERVER = os.environ.get("REDIS_SERVER") or "redis-server"

T = TypeVar("T")


def wait_for(what: str, check: Callable[[], Optional[T]], timeout: float = 30) -> T:
    """Polls ``check`` until it returns something other than None or False; fails after
    ``timeout`` seconds saying what it waited for."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got is not None and got is not False:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def fail_as_asked(fields: dict[str, str], deliveries: Optional[int]) -> None:
    """What a test handler does with an entry whose ``kind`` field asks for a failure: ``retry``
    raises Retry(100) on the first delivery, ``perm`` Permanent("bad input"), ``poison``
    ValueError("poison"); any other entry is handled."""
    kind = fields.get("kind")
    if kind == "retry" and deliveries == 1:
        raise Retry(100)
    if kind == "perm":
        raise Permanent("bad input")
    if kind == "poison":
        raise ValueError("poison")


def stop_process(proc: subprocess.Popen[Any]) -> None:
    """Ends ``proc`` if it still runs: SIGTERM, then SIGKILL after 10 s; waits for it."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


_GIVEN: set[int] = set()


def free_port(cluster: bool = False) -> int:
    """A free loopback port; for a cluster node, one whose bus port (+10000) is free too. With
    ``RECLAIM_PORT_BASE`` set (``make test-python BASE_PORT=N``), from N upward, as the Rust test
    kit's ``free_port``, never one handed out before."""
    base = os.environ.get("RECLAIM_PORT_BASE", "").strip()
    if base:
        start = max([p + 1 for p in _GIVEN if p >= int(base)], default=int(base))
        for port in range(start, 65536):
            if bindable(port) and (not cluster or (port <= 55535 and bindable(port + 10000))):
                _GIVEN.add(port)
                return port
        raise RuntimeError(f"no free port from RECLAIM_PORT_BASE={base} to 65535")
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if not cluster or (port <= 55535 and bindable(port + 10000)):
            return port


class Server:
    """One redis-server with the module."""

    def __init__(self, *extra: str) -> None:
        if not Path(MODULE).exists():
            raise RuntimeError(f"module not built: {MODULE} (make build, or set RECLAIM_MODULE)")
        self.dir = tempfile.mkdtemp(prefix="reclaim-py-")
        self.extra = extra
        self.proc: Optional[subprocess.Popen[bytes]] = None
        cluster = "--cluster-enabled" in extra
        try:
            for attempt in range(5):
                self.port = free_port(cluster)
                if self._spawn():
                    return
            raise RuntimeError(f"redis-server could not bind a port; log:\n{self.log()}")
        except BaseException:
            self.stop()
            raise

    def log(self) -> str:
        try:
            return Path(self.dir, "server.log").read_text(errors="replace")
        except OSError:
            return ""

    def _spawn(self) -> bool:
        self.proc = subprocess.Popen(
            [
                SERVER,
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--dir", self.dir,
                "--logfile", "server.log",
                "--save", "",
                "--loadmodule", MODULE,
                *self.extra,
            ],
            cwd=self.dir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                if "Address already in use" in self.log():
                    return False
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                c = redis.Redis(port=self.port, socket_connect_timeout=1)
                pid = c.info("server")["process_id"]
                c.close()
                if pid == self.proc.pid:
                    return True
            except redis.RedisError:
                pass
            time.sleep(0.02)
        raise RuntimeError(f"redis-server did not answer within 20 s:\n{self.log()}")

    def client(self, **kwargs: Any) -> redis.Redis:
        return redis.Redis(port=self.port, **kwargs)

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)


RANGES = [(0, 5460), (5461, 10922), (10923, 16383)]


class Cluster:
    def __init__(self) -> None:
        self.nodes: list[Server] = []
        try:
            for _ in RANGES:
                self.nodes.append(
                    Server("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                           "--cluster-node-timeout", "5000")
                )
            for node, (lo, hi) in zip(self.nodes, RANGES):
                node.client().execute_command("CLUSTER", "ADDSLOTSRANGE", lo, hi)
            first = self.nodes[0].client()
            for node in self.nodes[1:]:
                first.execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)
            for node in self.nodes:
                c = node.client(decode_responses=True)
                wait_for(f"node {node.port} to see a cluster of 3 in state ok", lambda: (
                    c.cluster("info")["cluster_state"] == "ok"
                    and int(c.cluster("info")["cluster_known_nodes"]) == 3
                ))
        except BaseException:
            self.stop()
            raise

    def node_of(self, key: str) -> Server:
        slot = key_slot(key.encode())
        return next(n for n, (lo, hi) in zip(self.nodes, RANGES) if lo <= slot <= hi)

    def client(self, protocol: Optional[int]) -> RedisCluster:
        kwargs: dict[str, Any] = {"decode_responses": True}
        if protocol is not None:
            kwargs["protocol"] = protocol
        return RedisCluster(host="127.0.0.1", port=self.nodes[0].port, **kwargs)

    def flush(self) -> None:
        for n in self.nodes:
            n.client().flushall()

    def move_slot(self, key: str, src: Server, to: Server) -> None:
        """Moves ``key``'s slot, with its keys, from node ``src`` to node ``to`` (as ``redis-cli
        --cluster reshard`` does), telling every node; no client is told."""
        slot = key_slot(key.encode())
        # The new owner's config epoch must come out above every other, or the old owner's
        # gossip (a slot claimed at a higher epoch) takes the slot back from it between the
        # SETSLOTs, and two nodes send clients to each other: first every node knows the last
        # epoch bump (an earlier move's).
        wait_for("the nodes to agree on the current epoch", lambda: len({
            n.client(decode_responses=True).cluster("info")["cluster_current_epoch"]
            for n in self.nodes}) == 1)
        a, b = src.client(decode_responses=True), to.client(decode_responses=True)
        ida, idb = a.execute_command("CLUSTER", "MYID"), b.execute_command("CLUSTER", "MYID")
        b.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", ida)
        a.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", idb)
        keys = a.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1000)
        if keys:
            a.execute_command("MIGRATE", "127.0.0.1", to.port, "", 0, 5000, "KEYS", *keys)
        # The new owner first (it bumps its config epoch), then the old one, then the rest, as
        # Redis's cluster tutorial orders them: the old owner's gossip cannot win the slot back.
        for n in [to, src] + [n for n in self.nodes if n is not to and n is not src]:
            n.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", idb)
        # Until every node names the new owner, a client may be sent back and forth.
        for n in self.nodes:
            c = n.client(decode_responses=True)
            wait_for(f"node {n.port} to see slot {slot} at {to.port}",
                     lambda: slot_owner(c, slot) == to.port)

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()


def slot_owner(c: redis.Redis, slot: int) -> Optional[int]:
    """The port of the node that ``c``'s node says serves ``slot`` (``CLUSTER SLOTS``)."""
    slots: list[Any] = c.execute_command("CLUSTER", "SLOTS")  # type: ignore[no-untyped-call]
    for lo, hi, primary, *_ in slots:
        if int(lo) <= slot <= int(hi):
            return int(primary[1])
    return None


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    if os.environ.get("RECLAIM_PY_CLUSTER") == "0":
        pytest.skip("RECLAIM_PY_CLUSTER=0")
    try:
        c = Cluster()
    except (RuntimeError, redis.RedisError, AssertionError) as e:
        pytest.skip(f"no cluster: {e}")
    try:
        yield c
    finally:
        c.stop()


@contextlib.contextmanager
def started(*extra: str) -> Iterator[Server]:
    """A :class:`Server` with ``extra`` arguments, stopped when the block ends."""
    s = Server(*extra)
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    with started() as s:
        yield s


#: The protocols every client test runs with: RESP2, RESP3 (``protocol=3``), and the client's
#: default (RESP2 before redis-py 8; from 8 on, RESP3 read into RESP2 shapes).
PROTOCOLS = [2, 3, None]


@pytest.fixture(params=PROTOCOLS, ids=["resp2", "resp3", "default"])
def protocol(request: pytest.FixtureRequest) -> Optional[int]:
    return request.param  # type: ignore[no-any-return]


def connect(server: Server, protocol: Optional[int], decode: bool = True) -> redis.Redis:
    kwargs: dict[str, Any] = {"decode_responses": decode}
    if protocol is not None:
        kwargs["protocol"] = protocol
    return server.client(**kwargs)


@pytest.fixture
def r(server: Server, protocol: Optional[int]) -> Iterator[redis.Redis]:
    """A client (``decode_responses=True``) in each protocol, on an empty server."""
    c = connect(server, protocol)
    c.flushall()
    c.config_set("reclaim.enabled", "yes")
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def rb(server: Server, protocol: Optional[int]) -> Iterator[redis.Redis]:
    """A client that returns bytes (``decode_responses=False``), in each protocol."""
    c = connect(server, protocol, decode=False)
    c.flushall()
    try:
        yield c
    finally:
        c.close()


def pytest_report_header() -> str:
    return f"redis-py {redis.__version__}, server {SERVER}, module {MODULE}"
