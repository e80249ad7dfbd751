"""The policy chart from Prometheus (``--prometheus URL``): the module's per-policy counters as
contrib/prometheus/prometheus.yml names them after prometheus-redis-exporter's scrape
(``reclaim_policy_claimed`` and ``reclaim_policy_dead_lettered``, labels ``db``, ``stream``,
``group``), read with ``/api/v1/query_range`` over the last hour. A policy's series of every node
are summed, leaving out replicas' copies (``redis_instance_info{role="slave"}``), as the Grafana
dashboard does. Two requests per policy page, each bounded by the hour and the step."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Optional

from ._sampler import HOUR, Sample

#: The counters the chart shows, in the order of a sample's fields.
METRICS = ("reclaim_policy_claimed", "reclaim_policy_dead_lettered")
TIMEOUT = 5.0


def info_escape(name: bytes) -> str:
    """``name`` as the module writes it in ``INFO reclaim`` and so in the labels: valid UTF-8
    kept, but ``%``, ``,``, ``=``, ``:``, spaces, control characters and every byte that is not
    valid UTF-8 written ``%XX`` (core/src/metrics.rs ``info_escape``)."""
    out = []
    for ch in name.decode("utf-8", errors="surrogateescape"):
        o = ord(ch)
        if 0xDC80 <= o <= 0xDCFF:  # a byte that is not valid UTF-8
            out.append(f"%{o - 0xDC00:02X}")
        elif o < 0x80 and (o < 0x20 or o == 0x7F or ch in "%,=: "):
            out.append(f"%{o:02X}")
        else:
            out.append(ch)
    return "".join(out)


def _label(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def query(metric: str, db: int, stream: bytes, group: bytes) -> str:
    """The PromQL of one counter of one policy, summed over the primaries that serve it."""
    sel = (f"db={_label(str(db))},stream={_label(info_escape(stream))},"
           f"group={_label(info_escape(group))}")
    return f'sum({metric}{{{sel}}} unless on(instance) redis_instance_info{{role="slave"}})'


def shown(url: str) -> str:
    """The URL without its user and password, for the page."""
    u = urllib.parse.urlsplit(url)
    host = u.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{u.port}" if u.port else ""
    return urllib.parse.urlunsplit((u.scheme, host + port, u.path, "", ""))


class Prometheus:
    def __init__(self, url: str, step: float = 15.0) -> None:
        self.url = url.rstrip("/")
        self.step = step

    def _range(self, promql: str, start: float, end: float) -> dict[float, float]:
        args = urllib.parse.urlencode({"query": promql, "start": f"{start:.3f}",
                                       "end": f"{end:.3f}", "step": f"{self.step:g}"})
        req = urllib.request.Request(f"{self.url}/api/v1/query_range?{args}")
        with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
            body = json.loads(resp.read().decode())
        if body.get("status") != "success":
            raise ValueError(body.get("error") or "query failed")
        out: dict[float, float] = {}
        for series in body["data"]["result"][:1]:  # sum(): one series at most
            for t, v in series["values"]:
                out[float(t)] = float(v)
        return out

    def samples(self, db: int, stream: bytes, group: bytes, now: Optional[float] = None
                ) -> list[Sample]:
        """The policy's claims and dead-letters counters over the last hour, one sample per step
        (a step without the dead-letters series counts them as 0). Raises OSError or ValueError
        when Prometheus cannot answer."""
        end = time.time() if now is None else now
        start = end - HOUR
        claimed, dead = (self._range(query(m, db, stream, group), start, end) for m in METRICS)
        return [(t, int(c), int(dead.get(t, 0)), 0, -1) for t, c in sorted(claimed.items())]


def chart_samples(prom: Prometheus, db: int, stream: bytes, group: bytes
                  ) -> tuple[Optional[list[Sample]], Optional[str]]:
    """The samples, or None and why not (the page then shows the dashboard's own samples)."""
    try:
        return prom.samples(db, stream, group), None
    except (OSError, ValueError, KeyError, urllib.error.URLError) as e:
        return None, f"Prometheus did not answer ({type(e).__name__}: {e})"

