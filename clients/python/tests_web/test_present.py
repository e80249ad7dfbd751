"""The dashboard's pure parts: how values are shown, names in URLs, the URL without its
password, the alert marks, the chart."""

from __future__ import annotations

from redis_reclaim.web._data import alerts, entries_read
from redis_reclaim.web._present import label, param, rate, redact, show, unparam
from redis_reclaim.web._sampler import HOUR, Sampler, chart


def test_text_shows_as_text_binary_as_hex_long_values_folded() -> None:
    assert show(b"<script>alert(1)</script>") == {
        "text": "<script>alert(1)</script>", "hex": False, "folded": False,
        "short": "<script>alert(1)</script>"}
    assert show(b"\x00\xffab") == {"text": "00ff6162", "hex": True, "folded": False,
                                   "short": "00ff6162"}
    long = show("é" * 130)
    assert long["folded"] and long["text"] == "é" * 130 and long["short"] == "é" * 120 + "…"
    assert show(None)["text"] == "(nil)"
    assert show(b"line\nnext\ttab")["hex"] is False


def test_names_in_urls_round_trip() -> None:
    for name in (b"orders", b"\xff\x00bin", b"hex:looks-like-hex", "ünï".encode()):
        assert unparam(param(name)) == name
    assert param(b"orders") == "orders"
    assert param(b"\xff") == "hex:ff"
    assert label(b"a\xffb\\") == "a\\xffb\\x5c"


def test_the_url_without_its_password() -> None:
    assert redact("redis://user:pw@host:6379/0") == "redis://user:***@host:6379/0"
    assert redact("redis://:pw@host:6379") == "redis://:***@host:6379"
    assert redact("rediss://pw@host") == "rediss://***@host"
    assert redact("redis://host:6379") == "redis://host:6379"
    assert redact("redis://u:p@ss@host") == "redis://u:***@host"


def row(status: str = "active", **kw: object) -> dict[str, object]:
    return {"status": status, **kw}


def live(pending: int, inbox: int, consumers: int, most: int) -> dict[str, int]:
    return {"pending": pending, "inbox": inbox, "consumers": consumers, "max-consumer-pending": most}


def test_alert_marks_follow_the_rules() -> None:
    assert alerts(row()) == []
    assert alerts(row("storm")) == ["ReclaimStormBreakerOpen"]
    assert alerts(row("error: stream key holds the wrong kind of value")) == ["ReclaimPolicyInError"]
    assert alerts(row("invalid: DLQ in another slot")) == ["ReclaimPolicyInvalid"]
    assert alerts(row("waiting: no group g")) == ["ReclaimPolicyWaiting"]
    assert alerts(row(dead_per_min=2)) == ["ReclaimDeadLetters"]
    assert alerts(row(dead_per_min=1)) == []
    # one consumer holds 500 of 520, the two others 10 each: hoarding
    assert alerts(row(live=live(520, 0, 3, 500))) == ["ReclaimConsumerHoarding"]
    assert alerts(row(live=live(300, 0, 3, 101))) == []
    assert alerts(row(live=live(200, 0, 1, 200), pel_change=5)) == ["ReclaimPelGrowing"]
    assert alerts(row(live=live(200, 0, 1, 200), pel_change=0)) == []
    assert alerts(row(live=live(3, 3, 0, 0), inbox_before=2)) == ["ReclaimInboxNotDrained"]


def test_the_sampler_keeps_one_hour_and_the_chart_shows_deltas() -> None:
    s = Sampler(interval=10)
    pid = (0, b"orders", b"workers")
    for i in range(1000):
        s.record(pid, {"claimed": 2 * i, "dead-lettered": i // 10}, now=1000.0 + 10 * i)
    got = s.series(pid)
    assert len(got) == HOUR / 10 + 1
    assert got[-1] == (1000.0 + 9990, 1998, 99, 0, -1)
    s.record(pid, {"claimed": 5000, "dead-lettered": 0}, now=1000.0 + 9991)  # within an interval
    assert s.series(pid)[-1][1] == 1998
    c = chart(s.series(pid), width=360, height=100)
    assert c["points"] == HOUR / 10 and c["max"] == 2 and c["span"] == HOUR
    assert c["claims"].split()[-1] == "360.0,2.0"  # 2 claims per interval: the top
    # the sampler's own reads keep nothing alive: an hour unseen on a page, forgotten
    s.record(pid, {"claimed": 5000, "dead-lettered": 0}, now=1000.0 + 10000 + HOUR, viewed=False)
    assert s.series(pid)[-1] == (1000.0 + 10000 + HOUR, 5000, 0, 0, -1)
    assert s.watched(now=1000.0 + 9991 + HOUR - 1) == [pid]
    assert s.watched(now=1000.0 + 9991 + HOUR + 1) == []
    assert s.series(pid) == []
    s.record(pid, {"claimed": 1, "dead-lettered": 0}, viewed=False)  # not watched: not kept
    assert s.series(pid) == []


def test_rates_per_minute_from_the_samples() -> None:
    s = Sampler(interval=10)
    pid = (0, b"orders", b"workers")
    assert s.per_minute(pid) is None
    s.record(pid, {"claimed": 0, "dead-lettered": 0, "redelivered": 0}, now=1000.0)
    assert s.per_minute(pid) is None  # one sample: no rate yet
    s.record(pid, {"claimed": 5, "dead-lettered": 1, "redelivered": 30}, now=1030.0)
    # without entries-read: the redeliveries alone
    assert s.per_minute(pid) == {"claims": 10.0, "dead": 2.0, "deliveries": 60.0, "over": 30.0,
                                 "delivered": 30, "read": None, "redelivered": 30}
    # every 10 s from then on: 12 deliveries and 1 dead-letter per interval; the rate is over the
    # last minute (72 and 6 per minute), whatever came before
    for i in range(1, 13):
        s.record(pid, {"claimed": 5, "dead-lettered": 1 + i, "redelivered": 30 + 12 * i},
                 now=1030.0 + 10 * i)
    got = s.per_minute(pid)
    assert got is not None
    assert (got["deliveries"], got["dead"], got["claims"], got["over"]) == (72.0, 6.0, 0.0, 60.0)
    assert got["delivered"] == 72
    # a restarted server's counters start again from 0: not a negative rate
    s.record(pid, {"claimed": 0, "dead-lettered": 0, "redelivered": 0}, now=1160.0)
    got = s.per_minute(pid)
    assert got is not None and got["deliveries"] == 0.0
    assert rate(None) == "-" and rate(72.0) == "72" and rate(2.25) == "2.2" and rate(0.0) == "0.0"


def test_deliveries_are_first_deliveries_and_redeliveries() -> None:
    s = Sampler(interval=10)
    pid = (0, b"orders", b"workers")
    s.record(pid, {"redelivered": 4}, now=1000.0, read=100)
    s.record(pid, {"redelivered": 10}, now=1030.0, read=124)
    got = s.per_minute(pid)
    assert got is not None
    assert (got["read"], got["redelivered"], got["delivered"]) == (24, 6, 30)
    assert got["deliveries"] == 60.0 and got["over"] == 30.0
    # a sample that does not know entries-read (nil after deletions, no XINFO right): the first
    # deliveries are left out rather than guessed
    s.record(pid, {"redelivered": 12}, now=1040.0, read=None)
    got = s.per_minute(pid)
    assert got is not None
    assert (got["read"], got["redelivered"], got["delivered"]) == (None, 8, 8)
    # XGROUP SETID moved entries-read back: counted as 0, never negative
    s2 = Sampler(interval=10)
    s2.record(pid, {"redelivered": 0}, now=1000.0, read=50)
    s2.record(pid, {"redelivered": 0}, now=1010.0, read=3)
    got = s2.per_minute(pid)
    assert got is not None and (got["read"], got["delivered"], got["deliveries"]) == (0, 0, 0.0)


def test_entries_read_of_a_group_in_xinfo_groups() -> None:
    resp2 = [[b"name", b"a", b"entries-read", 7], [b"name", b"workers", b"entries-read", 12]]
    assert entries_read(resp2, b"workers") == 12
    resp3 = [{b"name": b"workers", b"entries-read": None, b"last-delivered-id": b"2-1"}]
    assert entries_read(resp3, b"workers") is None  # nil after deletions: unknown
    fresh = [{"name": "workers", "entries-read": None, "last-delivered-id": "0-0"}]
    assert entries_read(fresh, b"workers") == 0  # never read anything
    assert entries_read(resp2, b"other") is None
    assert entries_read(Exception("NOPERM"), b"workers") is None
