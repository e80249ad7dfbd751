"""The policy chart read from Prometheus (``--prometheus URL``): Debian's prometheus scraping
prometheus-redis-exporter with contrib/prometheus's script and relabelling (as in
tests/monitoring.rs), a policy whose names need escaping, and the chart showing the module's
claims and dead-letters from ``query_range``. ``make test-web`` installs both programs
(scripts/deps.sh --monitoring)."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest
from conftest import PROJECT, Watched, free_port, wait_for
from redis_reclaim._commands import fields_of

from redis_reclaim.web._prometheus import info_escape, query

CONTRIB = PROJECT / "contrib" / "prometheus"
STREAM = b"odd name:1"


def get(url: str) -> Optional[str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return str(resp.read().decode())
    except (urllib.error.URLError, ConnectionError, OSError):
        return None


@pytest.fixture
def monitored(server: Any, tmp_path: Path) -> Iterator[str]:
    """The exporter for ``server`` and Prometheus scraping it every second: Prometheus's URL."""
    for program in ("prometheus", "prometheus-redis-exporter"):
        assert shutil.which(program), f"{program} not found: make test-web installs it"
    exporter_port, prom_port = free_port(), free_port()
    config = (CONTRIB / "prometheus.yml").read_text() \
        .replace('"127.0.0.1:9121"', f'"127.0.0.1:{exporter_port}"') \
        .replace("scrape_interval: 15s", "scrape_interval: 1s") \
        .replace("evaluation_interval: 15s", "evaluation_interval: 1s") \
        .replace("- reclaim-rules.yml", f"- {CONTRIB / 'reclaim-rules.yml'}")
    (tmp_path / "prometheus.yml").write_text(config)
    logs = open(tmp_path / "monitoring.log", "wb")
    procs = [
        subprocess.Popen(["prometheus-redis-exporter", "-redis.addr", f"redis://127.0.0.1:{server.port}",
                          "-web.listen-address", f"127.0.0.1:{exporter_port}",
                          "-script", str(CONTRIB / "reclaim.lua")], stdout=logs, stderr=logs),
        subprocess.Popen(["prometheus", f"--config.file={tmp_path / 'prometheus.yml'}",
                          f"--storage.tsdb.path={tmp_path / 'data'}",
                          f"--web.listen-address=127.0.0.1:{prom_port}"], stdout=logs, stderr=logs),
    ]
    try:
        url = f"http://127.0.0.1:{prom_port}"
        wait_for("Prometheus ready", lambda: get(url + "/-/ready") is not None, timeout=60)
        yield url
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        logs.close()


def value(prom: str, promql: str) -> Optional[str]:
    body = get(prom + "/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
    if body is None:
        return None
    result = json.loads(body)["data"]["result"]
    return str(result[0]["value"][1]) if result else None


def test_names_are_escaped_as_the_module_writes_them() -> None:
    assert info_escape(b"odd name:1") == "odd%20name%3A1"
    assert info_escape("caf\u00e9,%=".encode()) == "caf\u00e9%2C%25%3D"
    assert info_escape(b"a\xffb\n") == "a%FFb%0A"
    assert query("reclaim_policy_claimed", 0, b'q"\\', b"g") == (
        'sum(reclaim_policy_claimed{db="0",stream="q\\"\\\\",group="g"} '
        'unless on(instance) redis_instance_info{role="slave"})')


def test_the_policy_chart_reads_prometheus(server: Any, dashboard: Any, page: Watched,
                                           monitored: str) -> None:
    r = server.client()
    r.xgroup_create(STREAM, "g", "$", mkstream=True)
    r.execute_command("RECLAIM.POLICY", "SET", STREAM, "g", "MIN-IDLE", 200, "MAX-DELIVERIES", 3,
                      "DLQ", "odd:dlq")
    claimed = query("reclaim_policy_claimed", 0, STREAM, b"g")
    # Prometheus has the policy's counters at 0 before anything moves
    wait_for("the counters at 0 in Prometheus", lambda: value(monitored, claimed) == "0", timeout=60)
    ids = [r.xadd(STREAM, {"n": str(i)}) for i in range(5)]
    r.xreadgroup("g", "w1", {STREAM: ">"})
    r.xclaim(STREAM, "g", "w1", 0, ids[:2], retrycount=3)  # two at their last delivery

    def swept() -> bool:
        r.execute_command("RECLAIM.SWEEP", STREAM, "g")
        st = fields_of(r.execute_command("RECLAIM.STATS", STREAM, "g"))
        return (int(st["claimed"]), int(st["dead-lettered"])) == (3, 2)

    wait_for("three claimed and two dead-lettered", swept)
    wait_for("Prometheus to see the sweep", lambda: value(monitored, claimed) == "3", timeout=60)
    dead = query("reclaim_policy_dead_lettered", 0, STREAM, b"g")
    wait_for("Prometheus to see the dead-letters", lambda: value(monitored, dead) == "2", timeout=60)
    # started now: its own samples have no interval yet, so what the chart shows is Prometheus's
    d = dashboard(f"redis://127.0.0.1:{server.port}/0", "--prometheus", monitored + "/",
                  "--prometheus-step", "1")
    page.page.goto(d.base + "/")
    with page.page.expect_navigation():
        page.page.click("#policies tbody a")
    assert page.page.locator("#chart-source").inner_text() == f"read from Prometheus at {monitored}"
    assert page.page.locator("#chart-error").count() == 0
    assert int(page.page.locator("#chart-points").inner_text()) > 0
    note = page.page.locator("#chart").locator("xpath=..").inner_text()
    assert "(top: 3)" in note, note
    # the top of the chart is the 3 claims of one step, the 2 dead-letters are at 2/3 of it
    # (height 120: y = 120 - v / 3 * 116 - 2)
    claims = page.page.locator("#chart polyline.claims").get_attribute("points") or ""
    dead_line = page.page.locator("#chart polyline.dead").get_attribute("points") or ""
    assert [p.split(",")[1] for p in claims.split()].count("2.0") == 1, claims
    assert [p.split(",")[1] for p in dead_line.split()].count("40.7") == 1, dead_line


def test_without_an_answer_from_prometheus_the_chart_is_the_dashboards(
        server: Any, dashboard: Any, page: Watched) -> None:
    r = server.client()
    r.xgroup_create("orders", "workers", "$", mkstream=True)
    r.execute_command("RECLAIM.POLICY", "SET", "orders", "workers", "MIN-IDLE", 1000)
    nobody = f"http://127.0.0.1:{free_port()}"
    d = dashboard(f"redis://127.0.0.1:{server.port}/0", "--prometheus", nobody)
    page.page.goto(d.base + "/policy?db=0&key=orders&group=workers")
    assert page.page.locator("#chart-source").inner_text() == "sampled by this dashboard while it runs"
    assert "Prometheus did not answer" in page.page.locator("#chart-error").inner_text()
