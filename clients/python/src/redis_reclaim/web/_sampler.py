"""Claims and dead-letters of the policies shown, sampled by the dashboard while it runs.

Bounded: at most ``MAX_POLICIES`` policies, each with a ring buffer of one hour of samples; a
policy not looked at for an hour is forgotten."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from typing import Any, Callable, Optional

MAX_POLICIES = 1000
HOUR = 3600.0

#: (db, stream, group)
PolicyId = tuple[int, bytes, bytes]
#: (time in s, claimed, dead-lettered, redelivered, read): counters of ``RECLAIM.STATS``, and the
#: group's ``entries-read`` of ``XINFO GROUPS`` (entries delivered to the group for the first
#: time; -1: unknown, e.g. nil after deletions in the stream, or a user without XINFO)
Sample = tuple[float, int, int, int, int]
#: The window of the per-minute rates, s.
MINUTE = 60.0


class Sampler:
    def __init__(self, interval: float = 10.0) -> None:
        self.interval = interval
        self._lock = threading.Lock()
        self._series: "OrderedDict[PolicyId, deque[Sample]]" = OrderedDict()
        self._seen: dict[PolicyId, float] = {}

    def _ring(self, pid: PolicyId) -> "deque[Sample]":
        ring = self._series.get(pid)
        if ring is None:
            ring = deque(maxlen=int(HOUR / self.interval) + 1)
            self._series[pid] = ring
            while len(self._series) > MAX_POLICIES:
                old, _ = self._series.popitem(last=False)
                self._seen.pop(old, None)
        return ring

    def record(self, pid: PolicyId, stats: dict[str, Any], now: Optional[float] = None,
               viewed: bool = True, read: Optional[int] = None) -> None:
        """A sample from a ``RECLAIM.STATS`` reply and the group's ``entries-read`` (``read``,
        None: unknown), at most one per interval per policy; ``viewed``: read for a page (the
        sampler's own reads keep nothing alive)."""
        now = time.time() if now is None else now
        with self._lock:
            if viewed:
                self._seen[pid] = now
                if pid in self._series:
                    self._series.move_to_end(pid)
            elif pid not in self._seen:
                return
            ring = self._ring(pid)
            if ring and now - ring[-1][0] < self.interval * 0.9:
                return
            ring.append((now, int(stats.get("claimed", 0)), int(stats.get("dead-lettered", 0)),
                         int(stats.get("redelivered", 0)), -1 if read is None else int(read)))

    def watched(self, now: Optional[float] = None) -> list[PolicyId]:
        now = time.time() if now is None else now
        with self._lock:
            for pid in [p for p, t in self._seen.items() if now - t > HOUR]:
                self._seen.pop(pid, None)
                self._series.pop(pid, None)
            return list(self._series)

    def series(self, pid: PolicyId) -> list[Sample]:
        with self._lock:
            return list(self._series.get(pid, ()))

    def per_minute(self, pid: PolicyId) -> Optional[dict[str, Any]]:
        """Claims, dead-letters and deliveries per minute, between the newest sample and the
        oldest one of the minute before it (the one just before that minute when none is in it);
        None before two samples. Deliveries: first deliveries (the group's ``entries-read``,
        counted by XREADGROUP ... > and RECLAIM.READGROUP's new entries alike) and redeliveries
        (``redelivered``: entries handed again from the PEL by ``RECLAIM.READGROUP``); first
        deliveries count as 0 when either sample does not know them (``read`` is None then). A
        counter that went down (a restarted server, XGROUP SETID) counts as 0. With them:
        ``over``, the seconds between the two samples, ``delivered``, the deliveries then, of
        which ``read`` first and ``redelivered`` again."""
        with self._lock:
            ring = self._series.get(pid)
            if not ring or len(ring) < 2:
                return None
            last = ring[-1]
            ref = ring[-2]
            for sample in reversed(ring):
                if sample is last:
                    continue
                ref = sample
                if last[0] - sample[0] >= MINUTE:
                    break
        dt = last[0] - ref[0]
        if dt <= 0:
            return None

        def count(i: int) -> int:
            return max(0, int(last[i]) - int(ref[i]))

        read = count(4) if min(last[4], ref[4]) >= 0 else None
        delivered = count(3) + (read or 0)
        return {"claims": count(1) * MINUTE / dt, "dead": count(2) * MINUTE / dt,
                "deliveries": delivered * MINUTE / dt, "over": dt, "delivered": delivered,
                "read": read, "redelivered": count(3)}

    def run(self, sample: Callable[[list[PolicyId]], None], stop: threading.Event) -> None:
        """Calls ``sample(watched policies)`` every interval until ``stop`` is set."""
        while not stop.wait(self.interval):
            try:
                sample(self.watched())
            except Exception:  # a server that went away: the next round tries again
                pass


def chart(samples: list[Sample], width: int = 600, height: int = 120) -> dict[str, Any]:
    """Polylines of claims and dead-letters per interval (deltas between samples) for an SVG."""
    deltas = []
    for (t0, c0, d0, *_), (t1, c1, d1, *_) in zip(samples, samples[1:]):
        deltas.append((t1, max(0, c1 - c0), max(0, d1 - d0)))
    if not deltas:
        return {"claims": "", "dead": "", "max": 0, "width": width, "height": height, "points": 0,
                "span": 0.0}
    top = max(1, max(max(c, d) for _, c, d in deltas))
    t_end = deltas[-1][0]
    # the last hour, or the time since the first sample when the dashboard runs for less
    span = max(min(HOUR, t_end - samples[0][0]), 1e-3)
    t_start = t_end - span

    def line(i: int) -> str:
        pts = []
        for row in deltas:
            x = (row[0] - t_start) / span * width
            y = height - row[i] / top * (height - 4) - 2
            pts.append(f"{x:.1f},{y:.1f}")
        return " ".join(pts)

    return {"claims": line(1), "dead": line(2), "max": top, "width": width, "height": height,
            "points": len(deltas), "span": span}
