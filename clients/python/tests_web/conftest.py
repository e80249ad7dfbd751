"""The dashboard's tests: real redis-server processes with the module (the servers of
clients/python/tests/conftest.py), the dashboard started as ``python -m redis_reclaim.web`` on a
free port, and Debian's chromium driven by Playwright (``make test-web``)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parents[2]
DOCS = PROJECT / "docs"
CHROMIUM = os.environ.get("CHROMIUM") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]

_spec = importlib.util.spec_from_file_location("reclaim_servers", HERE.parent / "tests" / "conftest.py")
assert _spec is not None and _spec.loader is not None
servers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(servers)
Server = servers.Server
Cluster = servers.Cluster
free_port = servers.free_port
wait_for = servers.wait_for


class Dashboard:
    """``python -m redis_reclaim.web`` with the given arguments, on a free loopback port."""

    def __init__(self, url: str, *args: str) -> None:
        if "--refresh" not in args:  # no reload under a test's reads, but in the test of it
            args = (*args, "--refresh", "600")
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"reclaim-web-{self.port}.log"
        self.log = open(self.log_path, "w+b")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "redis_reclaim.web", "--url", url, "--port", str(self.port), *args],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)

        def up() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"dashboard exited: {self.output()}")
            try:
                urllib.request.urlopen(self.base + "/static/style.css", timeout=2).read()
                return True
            except (urllib.error.URLError, ConnectionError):
                return False

        try:
            wait_for("the dashboard to answer", up)
        except BaseException:
            self.stop()
            raise

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        servers.stop_process(self.proc)
        self.log.close()


@pytest.fixture
def server() -> Iterator[Any]:
    with servers.started() as s:
        yield s


@pytest.fixture
def dashboard() -> Iterator[Callable[..., Dashboard]]:
    started: list[Dashboard] = []

    def start(url: str, *args: str) -> Dashboard:
        d = Dashboard(url, *args)
        started.append(d)
        return d

    try:
        yield start
    finally:
        for d in started:
            d.stop()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


class Watched:
    """A page, with every dialog and console message it produced."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.dialogs: list[str] = []
        self.console: list[str] = []
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        page.on("console", lambda m: self.console.append(m.text))
        page.on("pageerror", lambda e: self.console.append(f"pageerror: {e}"))


@pytest.fixture
def page(browser: Any) -> Iterator[Watched]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        yield Watched(ctx.new_page())
    finally:
        ctx.close()
