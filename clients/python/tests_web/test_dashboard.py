"""The dashboard in a real browser against real servers: what it shows is what the module says,
its actions do what they say, and nothing from a stream or a forged request gets through."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Callable

import redis
from redis_reclaim._commands import fields_of, text
from conftest import DOCS, Cluster, Dashboard, Watched, wait_for
from urllib.parse import quote

from playwright.sync_api import Error as PlaywrightError

from redis_reclaim import Reclaim
from redis_reclaim.web._present import rate

PASSWORD = "s3cr3t-Pa55w0rd"


def url(server: Any, user: str = "", password: str = "") -> str:
    auth = f"{user}:{password}@" if user or password else ""
    return f"redis://{auth}127.0.0.1:{server.port}/0"


def dead_letters(r: redis.Redis, stream: str, group: str, n: int, **fields: Any) -> list[str]:
    """``n`` entries of ``stream`` read by ``alice`` and dead-lettered (RECLAIM.TERM)."""
    r.xgroup_create(stream, group, "$", mkstream=True)
    r.execute_command("RECLAIM.POLICY", "SET", stream, group, "MIN-IDLE", 60000,
                      "MAX-DELIVERIES", 3, "DLQ", f"{stream}:dlq")
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        pipe.xadd(stream, {"item": f"item-{i}", **fields})
    ids = [text(x) for x in pipe.execute()]
    r.xreadgroup(group, "alice", {stream: ">"}, count=n)
    for i in range(0, n, 500):
        r.execute_command("RECLAIM.TERM", stream, group, "alice", *ids[i:i + 500],
                          "REASON", "bad-payload")
    return ids


def listed(r: redis.Redis) -> list[tuple[str, str]]:
    out = []
    for p in r.execute_command("RECLAIM.POLICY", "LIST"):
        m = fields_of(p)
        out.append((text(m["key"]), text(m["group"])))
    return out


def reading(check: Callable[[], bool]) -> bool:
    """``check()``, False when it read a page that was being replaced (a reload of its own)."""
    try:
        return check()
    except PlaywrightError:
        return False


def go(page: Any, selector: str) -> None:
    """Clicks what loads another page, and waits for that page (a read right after a click could
    read the page before)."""
    with page.expect_navigation():
        page.click(selector)


def state(r: redis.Redis) -> str:
    """``state`` of RECLAIM.POLICY GET orders workers."""
    return text(fields_of(r.execute_command("RECLAIM.POLICY", "GET", "orders", "workers"))["state"])


def rows(page: Any) -> list[tuple[str, str]]:
    cells = page.locator("#policies tbody tr").evaluate_all(
        "rs => rs.filter(r => r.cells.length > 2).map(r => [r.cells[0].innerText, r.cells[1].innerText])")
    return [(a, b) for a, b in cells]


def test_overview_lists_what_policy_list_lists(server: Any, dashboard: Any, page: Watched) -> None:
    r = server.client()
    dead_letters(r, "orders", "workers", 30)
    for i in range(5):
        r.xadd("orders", {"item": f"late-{i}"})
    late = r.xreadgroup("workers", "bob", {"orders": ">"})[0][1]
    assert r.execute_command("RECLAIM.NACK", "orders", "workers", "bob", late[0][0], "DELAY", 30000) == 1
    r.xgroup_create("payments", "billing", "$", mkstream=True)
    r.execute_command("RECLAIM.POLICY", "SET", "payments", "billing", "MIN-IDLE", 5000)
    r.execute_command("RECLAIM.POLICY", "SET", "shipping", "labels", "MIN-IDLE", 5000)
    r.execute_command("RECLAIM.POLICY", "PAUSE", "payments", "billing")
    r1 = redis.Redis(port=server.port, db=1)
    r1.xgroup_create("audit", "readers", "$", mkstream=True)
    r1.execute_command("RECLAIM.POLICY", "SET", "audit", "readers", "MIN-IDLE", 1000)
    r.execute_command("ACL", "SETUSER", "admin", "on", f">{PASSWORD}", "~*", "&*", "+@all")
    d = dashboard(url(server, "admin", PASSWORD))
    page.page.goto(d.base + "/")
    assert rows(page.page) == listed(r)
    assert page.page.locator("header .server").inner_text() == f"redis://admin:***@127.0.0.1:{server.port}/0"
    first = page.page.locator("#policies tbody tr").first.locator("td")
    assert (first.nth(3).inner_text(), first.nth(5).inner_text()) == ("5", "1")  # pending, delayed
    statuses = page.page.locator("#policies tbody td.status").all_inner_texts()
    assert [s.strip() for s in statuses] == ["active", "paused", "waiting: no stream shipping"]
    # the red mark: 30 dead letters in the last minute (ReclaimDeadLetters), a waiting policy
    marks = page.page.locator("#policies tbody tr.alert td:first-child").all_inner_texts()
    assert marks == ["orders", "shipping"]
    assert "ReclaimDeadLetters" in page.page.locator("#policies tbody tr").first.inner_text()
    page.page.screenshot(path=str(DOCS / "dashboard-overview.png"), full_page=True)
    # every database: db1's policy under its own tab
    go(page.page, "text=db1")
    assert rows(page.page) == listed(r1)
    assert PASSWORD not in page.page.content()
    assert PASSWORD not in d.output()
    # sortable: a click on "stream" sorts descending after ascending
    page.page.goto(d.base + "/")
    page.page.click("#policies th:has-text('stream')")
    page.page.click("#policies th:has-text('stream')")
    assert [a for a, _ in rows(page.page)] == ["shipping", "payments", "orders"]


def test_the_overview_refreshes_itself(server: Any, dashboard: Any, page: Watched) -> None:
    r = server.client()
    r.execute_command("RECLAIM.POLICY", "SET", "orders", "workers", "MIN-IDLE", 1000)
    d = dashboard(url(server), "--refresh", "1")
    page.page.goto(d.base + "/")
    assert rows(page.page) == [("orders", "workers")]
    r.execute_command("RECLAIM.POLICY", "SET", "payments", "billing", "MIN-IDLE", 1000)

    wait_for("the new policy on the page, without a reload by the test", lambda: reading(
        lambda: rows(page.page) == [("orders", "workers"), ("payments", "billing")]))


def test_overview_pages_with_after_and_count(server: Any, dashboard: Any, page: Watched) -> None:
    r = server.client()
    for i in range(100):
        r.execute_command("RECLAIM.POLICY", "SET", f"s{i:03d}", "g", "MIN-IDLE", 1000)
    d0 = dashboard(url(server))
    page.page.goto(d0.base + "/?after_key=s049&after_group=g")
    assert len(rows(page.page)) == 50 and page.page.locator("#next-page").count() == 0  # no empty page
    for i in range(100, 120):
        r.execute_command("RECLAIM.POLICY", "SET", f"s{i:03d}", "g", "MIN-IDLE", 1000)
    d = dashboard(url(server))
    page.page.goto(d.base + "/")
    seen = rows(page.page)
    pages = 1
    while page.page.locator("#next-page").count():
        go(page.page, "#next-page")
        seen += rows(page.page)
        pages += 1
    assert seen == listed(r)
    assert (len(seen), pages) == (120, 3)


def test_a_dlq_of_1000_entries_pages(server: Any, dashboard: Any, page: Watched) -> None:
    r = server.client()
    dead_letters(r, "orders", "workers", 1000)
    assert r.xlen("orders:dlq") == 1000
    newest_first = [text(e[0]) for e in r.xrevrange("orders:dlq", "+", "-")]
    d = dashboard(url(server))
    page.page.goto(d.base + "/dlq?db=0&key=orders:dlq")
    ids: list[str] = []
    pages = 0
    while True:
        got = page.page.locator("#entries td.id").all_inner_texts()
        assert len(got) == 50, page.page.locator("main").inner_text()[:2000]
        ids += got
        pages += 1
        if not page.page.locator("#older").count():
            break
        go(page.page, "#older")
    assert pages == 20
    assert ids == newest_first
    first = page.page.locator("#entries tr.entry").last.inner_text()
    assert "orders / workers" in first and "bad-payload" in first and "alice" in first


def test_redrive_in_the_page_moves_entries_back(server: Any, dashboard: Any, page: Watched) -> None:
    r = server.client()
    dead_letters(r, "orders", "workers", 200, note="<b>bold?</b>", blob=b"\x00\xff\x10binary")
    r.xadd("orders:dlq", {"reclaim-stream": "orders", "reclaim-group": "workers",
                          "reclaim-reason": "max-deliveries", "reclaim-deliveries": "3",
                          "reclaim-last-error": "TimeoutError: upstream took 30 s " * 6,
                          "payload": "x" * 400})
    assert r.xpending("orders", "workers")["pending"] == 0
    d = dashboard(url(server))
    page.page.goto(d.base + "/dlq?db=0&key=orders:dlq")
    page.page.screenshot(path=str(DOCS / "dashboard-dlq.png"), full_page=False)
    page.page.fill("#redrive-form input[name=rate]", "400")
    go(page.page, "#redrive-start")
    wait_for("the bar at 100% and the task done", lambda: reading(lambda: (
        page.page.locator("#pct").inner_text() == "100%"
        and page.page.locator("#task-state").inner_text() == "done")), timeout=60)
    assert page.page.locator("#moved").inner_text() == "200"
    # when the task ends the page reloads: the DLQ as it is now
    wait_for("the page to show what is left",
             lambda: reading(lambda: page.page.locator("#entries td.id").count() == 1))
    # the hand-written record without reclaim-id stays (skipped), the 200 are back
    assert r.xlen("orders:dlq") == 1
    pending = r.xpending("orders", "workers")
    assert pending["pending"] == 200
    assert pending["consumers"] == [{"name": b"reclaim", "pending": 200}]
    page.page.screenshot(path=str(DOCS / "dashboard-redrive.png"), full_page=False)


def test_redrive_selected_entries_in_the_page(server: Any, dashboard: Any, page: Watched) -> None:
    r = server.client()
    dead_letters(r, "orders", "workers", 10)
    source_of = {text(e[0]): text(e[1][b"reclaim-id"]) for e in r.xrange("orders:dlq")}
    newest = [text(e[0]) for e in r.xrevrange("orders:dlq", "+", "-")]
    chosen = [newest[0], newest[3], newest[7]]
    d = dashboard(url(server))
    page.page.goto(d.base + "/dlq?db=0&key=orders:dlq")
    # nothing checked: refused, no task started
    go(page.page, "#redrive-selected")
    assert "no entry selected" in page.page.locator("main").inner_text()
    assert r.execute_command("RECLAIM.REDRIVE", "STATUS", "orders:dlq") is None
    page.page.goto(d.base + "/dlq?db=0&key=orders:dlq")
    for i in chosen:
        page.page.check(f"#entries input[value='{i}']")
    page.page.fill("#redrive-form input[name=rate]", "50")
    go(page.page, "#redrive-selected")
    wait_for("the bar at 100% and the task done", lambda: reading(lambda: (
        page.page.locator("#pct").inner_text() == "100%"
        and page.page.locator("#task-state").inner_text() == "done")), timeout=60)
    assert page.page.locator("#moved").inner_text() == "3"
    st = fields_of(r.execute_command("RECLAIM.REDRIVE", "STATUS", "orders:dlq"))
    assert (st["ids"], st["rate"], st["moved"], st["skipped"], st["total"]) == (3, 50, 3, 0, 3)
    # the three checked entries are back in their group (the inbox), the other seven stay
    assert r.xlen("orders:dlq") == 7
    assert sorted(text(e[0]) for e in r.xrange("orders:dlq")) == sorted(set(newest) - set(chosen))
    pending = r.xpending("orders", "workers")
    assert pending["pending"] == 3
    assert pending["consumers"] == [{"name": b"reclaim", "pending": 3}]
    back = [text(p["message_id"]) for p in r.xpending_range("orders", "workers", "-", "+", 10)]
    assert sorted(back) == sorted(source_of[i] for i in chosen)
    wait_for("the page to show what is left",
             lambda: reading(lambda: page.page.locator("#entries td.id").count() == 7))


def test_selections_are_kept_across_pages(server: Any, dashboard: Any, page: Watched) -> None:
    r = server.client()
    dead_letters(r, "orders", "workers", 120)
    source_of = {text(e[0]): text(e[1][b"reclaim-id"]) for e in r.xrange("orders:dlq")}
    newest = [text(e[0]) for e in r.xrevrange("orders:dlq", "+", "-")]
    chosen = [newest[1], newest[2], newest[60], newest[119]]  # on pages 1, 1, 2 and 3
    d = dashboard(url(server))
    pg = page.page
    count = pg.locator("#selection-count")
    pg.goto(d.base + "/dlq?db=0&key=orders:dlq")
    for i in chosen[:2]:
        pg.check(f"#entries input[value='{i}']")
    assert count.inner_text() == "2 selected"
    go(pg, "#older")
    pg.check(f"#entries input[value='{chosen[2]}']")
    assert count.inner_text() == "3 selected (2 on other pages)"
    go(pg, "#older")
    pg.check(f"#entries input[value='{chosen[3]}']")
    # back on the newest page: its two boxes are still checked
    pg.goto(d.base + "/dlq?db=0&key=orders:dlq")
    assert count.inner_text() == "4 selected (2 on other pages)"
    checked = pg.locator("#entries input[name=id]:checked").evaluate_all("bs => bs.map(b => b.value)")
    assert sorted(checked) == sorted(chosen[:2])
    # unchecking one forgets it
    pg.uncheck(f"#entries input[value='{chosen[1]}']")
    assert count.inner_text() == "3 selected (2 on other pages)"
    go(pg, "#redrive-selected")
    moved = [chosen[0], chosen[2], chosen[3]]
    wait_for("the task done", lambda: reading(lambda: pg.locator("#task-state").inner_text() == "done"),
             timeout=60)
    st = fields_of(r.execute_command("RECLAIM.REDRIVE", "STATUS", "orders:dlq"))
    assert (st["ids"], st["moved"], st["skipped"]) == (3, 3, 0)
    back = [text(p["message_id"]) for p in r.xpending_range("orders", "workers", "-", "+", 10)]
    assert sorted(back) == sorted(source_of[i] for i in moved)
    assert r.xlen("orders:dlq") == 117
    # the selection went with the redrive
    pg.goto(d.base + "/dlq?db=0&key=orders:dlq")
    assert count.inner_text() == "0 selected"
    # at most 1000: with 1000 kept, another box stays unchecked
    pg.evaluate("k => sessionStorage.setItem(k, JSON.stringify(Array.from({length: 1000}, (_, i) => '1-' + i)))",
                "reclaim-selected:0:orders:dlq")
    pg.reload()
    assert count.inner_text() == "1000 selected (1000 on other pages)"
    pg.click(f"#entries input[value='{newest[5]}']")
    assert not pg.is_checked(f"#entries input[value='{newest[5]}']")
    assert count.inner_text() == "1000 selected (1000 on other pages): at most 1000 at a time"
    pg.click("#clear-selection")
    assert count.inner_text() == "0 selected"


def test_more_than_1000_entries_are_refused(server: Any, dashboard: Any, page: Watched) -> None:
    r = server.client()
    dead_letters(r, "orders", "workers", 3)
    d = dashboard(url(server))
    page.page.goto(d.base + "/dlq?db=0&key=orders:dlq")
    csrf = page.page.locator("#redrive-form input[name=csrf]").get_attribute("value")
    ids = "&".join(f"id=1-{i}" for i in range(1001))
    for verb in ("redrive-selected", "delete"):
        resp = page.page.request.post(
            d.base + "/dlq/action", data=f"csrf={csrf}&db=0&key=orders:dlq&do={verb}&{ids}",
            headers={"Content-Type": "application/x-www-form-urlencoded"}, max_redirects=0)
        assert resp.status == 400
        assert "1001 entries selected: at most 1000 at a time" in resp.text()
    assert r.execute_command("RECLAIM.REDRIVE", "STATUS", "orders:dlq") is None
    assert r.xlen("orders:dlq") == 3


def test_deliveries_per_minute_on_the_overview(server: Any, dashboard: Any, page: Watched) -> None:
    r = server.client()
    r.xgroup_create("orders", "workers", "$", mkstream=True)
    r.execute_command("RECLAIM.POLICY", "SET", "orders", "workers", "MIN-IDLE", 50)
    r.xgroup_create("payments", "billing", "$", mkstream=True)
    r.execute_command("RECLAIM.POLICY", "SET", "payments", "billing", "MIN-IDLE", 5000)
    d = dashboard(url(server), "--sample-interval", "0.2")

    def cells(name: str) -> list[str]:
        return [t.strip() for t in page.page.locator(f"#policies td.{name}").all_inner_texts()]

    t0 = time.time()
    page.page.goto(d.base + "/")
    assert rows(page.page) == [("orders", "workers"), ("payments", "billing")]
    assert cells("deliveries") == ["-", "-"]  # one sample so far
    # orders: 20 first deliveries to alice (XREADGROUP), then the same 20 again to bob
    for i in range(20):
        r.xadd("orders", {"n": str(i)})
    r.xreadgroup("workers", "alice", {"orders": ">"}, count=20)

    def redelivered() -> bool:
        # alice's entries, idle past MIN-IDLE, handed to bob by RECLAIM.READGROUP
        r.execute_command("RECLAIM.READGROUP", "GROUP", "workers", "bob", "COUNT", 20,
                          "STREAMS", "orders", ">")
        return int(fields_of(r.execute_command("RECLAIM.STATS", "orders", "workers"))["redelivered"]) == 20

    wait_for("the 20 entries redelivered to bob", redelivered)
    # payments: 7 first deliveries, none again
    for i in range(7):
        r.xadd("payments", {"n": str(i)})
    r.xreadgroup("billing", "carol", {"payments": ">"}, count=7)
    cell = page.page.locator("#policies td.deliveries")

    def sampled_all() -> bool:
        # a page after samples that counted them all (the dashboard samples every 0.2 s)
        page.page.reload()
        return [cell.nth(i).get_attribute("data-count") for i in (0, 1)] == ["40", "7"]

    wait_for("samples with the 40 and the 7 deliveries", sampled_all)
    t1 = time.time()
    for i, (first, again) in enumerate([(20, 20), (7, 0)]):
        c = cell.nth(i)
        over = float(c.get_attribute("data-over") or "0")
        # between the first sample (taken at t0 or later) and one taken by t1
        assert 0 < over <= t1 - t0
        assert (c.get_attribute("data-first"), c.get_attribute("data-again")) == (str(first), str(again))
        assert c.inner_text().strip() == rate((first + again) * 60 / over)
        assert c.get_attribute("title") == f"{first + again} in {over:.1f} s: {first} first, {again} again"
    assert cells("dead-per-min") == ["0", "0"]


def test_deliveries_without_entries_read(server: Any, dashboard: Any, page: Watched) -> None:
    """A group whose entries-read the server does not know (nil: an entry deleted in the stream
    before the group read up to it): the first deliveries are left out, and the tooltip says so."""
    r = server.client()
    for i in range(1, 6):
        r.xadd("orders", {"n": str(i)}, id=f"{i}-1")
    r.xdel("orders", "3-1")
    r.xgroup_create("orders", "workers", "0")
    r.execute_command("RECLAIM.POLICY", "SET", "orders", "workers", "MIN-IDLE", 60000)
    r.xreadgroup("workers", "alice", {"orders": ">"}, count=2)
    assert r.xinfo_groups("orders")[0]["entries-read"] is None
    d = dashboard(url(server), "--sample-interval", "0.2")
    page.page.goto(d.base + "/")
    c = page.page.locator("#policies td.deliveries").first

    def sampled() -> bool:
        page.page.reload()
        return c.get_attribute("data-over") is not None

    wait_for("two samples", sampled)
    over = float(c.get_attribute("data-over") or "0")
    assert [c.get_attribute(a) for a in ("data-count", "data-first", "data-again")] == ["0", "", "0"]
    assert c.get_attribute("title") == (f"0 in {over:.1f} s: 0 again "
                                        "(first deliveries unknown: no entries-read)")


def test_delete_selected_entries(server: Any, dashboard: Any, page: Watched) -> None:
    r = server.client()
    dead_letters(r, "orders", "workers", 5)
    newest = [text(e[0]) for e in r.xrevrange("orders:dlq", "+", "-")]
    d = dashboard(url(server))
    page.page.goto(d.base + "/dlq?db=0&key=orders:dlq")
    page.page.check(f"#entries input[value='{newest[0]}']")
    page.page.check(f"#entries input[value='{newest[2]}']")
    go(page.page, "#delete")
    assert [text(e[0]) for e in r.xrevrange("orders:dlq", "+", "-")] == [
        newest[1], newest[3], newest[4]]
    assert page.page.locator("#entries td.id").all_inner_texts() == [newest[1], newest[3], newest[4]]


def test_pause_in_the_page_shows_in_policy_get(server: Any, dashboard: Any, page: Watched) -> None:
    r = server.client(decode_responses=True)
    ids = dead_letters(r, "orders", "workers", 3)
    r.xadd("orders", {"item": "late"})
    r.xreadgroup("workers", "bob", {"orders": ">"})
    d = dashboard(url(server), "--sample-interval", "0.2")

    page.page.goto(d.base + "/policy?db=0&key=orders&group=workers")
    assert page.page.locator("#pending tbody tr").count() == 1
    assert "bob" in page.page.locator("#consumers").inner_text()
    go(page.page, "#pause")
    assert state(r) == "paused"
    assert page.page.locator("#state").inner_text() == "paused"
    go(page.page, "#resume")
    assert state(r) == "active"
    # the what-if form
    page.page.fill("#whatif input[name=min_idle]", "1")
    go(page.page, "#simulate")
    assert "Would move 1" in page.page.locator("#sim-totals").inner_text()
    # traffic for the chart: entries delivered, some dead-lettered, while the dashboard samples
    for round in range(12):
        fresh = [text(r.xadd("orders", {"item": f"r{round}-{i}"})) for i in range(round % 4 + 2)]
        r.xreadgroup("workers", "carol", {"orders": ">"})
        r.execute_command("RECLAIM.TERM", "orders", "workers", "carol", *fresh[: round % 3 + 1])
        seen = int(page.page.goto(d.base + "/policy?db=0&key=orders&group=workers") and
                   page.page.locator("#chart-points").inner_text())
        wait_for("one more sample", lambda: int(
            page.page.reload() and page.page.locator("#chart-points").inner_text()) > seen)
    assert ids
    assert page.page.locator("#chart polyline.dead").count() == 1
    page.page.screenshot(path=str(DOCS / "dashboard-policy.png"), full_page=True)


def test_a_payload_with_script_runs_nothing(server: Any, dashboard: Any, page: Watched) -> None:
    r = server.client()
    payloads = {
        "script": "<script>alert('xss')</script>",
        "img": '<img src=x onerror="alert(1);window.__xss=1">',
        "link": "javascript:alert(document.cookie)",
        "<svg onload=alert(2)>": "field name too",
    }
    dead_letters(r, "orders", "workers", 1, **payloads)
    r.execute_command("RECLAIM.POLICY", "SET", "<script>alert(3)</script>", "g<img src=x onerror=alert(4)>")
    d = dashboard(url(server))
    for path in ("/", "/dlq?db=0&key=orders:dlq"):
        page.page.goto(d.base + path)
        page.page.wait_for_load_state("load")
        assert page.dialogs == []
        assert page.page.evaluate("window.__xss") is None
        assert page.page.locator("script").count() == 1  # the dashboard's own app.js
        assert page.page.locator("main img, main svg[onload]").count() == 0
    texts = page.page.locator("#entries .fvalue").all_inner_texts()
    for value in ("<script>alert('xss')</script>", '<img src=x onerror="alert(1);window.__xss=1">',
                  "javascript:alert(document.cookie)"):
        assert value in texts
    assert "<svg onload=alert(2)>" in page.page.locator("#entries .fname").all_inner_texts()
    assert page.page.locator("a[href^='javascript']").count() == 0
    page.page.goto(d.base + "/")
    assert "<script>alert(3)</script>" in page.page.locator("#policies").inner_text()
    assert page.dialogs == []
    assert not [m for m in page.console if "pageerror" in m]


def post(page: Any, path: str, form: dict[str, str]) -> int:
    resp = page.request.post(page.url.split("/", 3)[0] + "//" + page.url.split("/", 3)[2] + path,
                             form=form, max_redirects=0)
    return int(resp.status)


def test_a_post_without_the_csrf_token_is_refused(server: Any, dashboard: Any, page: Watched) -> None:
    r = server.client(decode_responses=True)
    dead_letters(r, "orders", "workers", 3)
    d = dashboard(url(server))
    page.page.goto(d.base + "/policy?db=0&key=orders&group=workers")
    token = page.page.locator("input[name=csrf]").first.input_value()
    form = {"db": "0", "key": "orders", "group": "workers", "do": "pause"}
    assert post(page.page, "/policy/action", form) == 403
    assert post(page.page, "/policy/action", {**form, "csrf": "forged"}) == 403
    assert post(page.page, "/dlq/action", {"db": "0", "key": "orders:dlq", "do": "redrive"}) == 403
    assert post(page.page, "/dlq/action", {"db": "0", "key": "orders:dlq", "do": "delete",
                                           "id": r.xrange("orders:dlq")[0][0]}) == 403
    assert state(r) == "active"
    assert r.xlen("orders:dlq") == 3
    assert r.execute_command("RECLAIM.REDRIVE", "STATUS", "orders:dlq") is None
    # the same request with the token goes through
    assert post(page.page, "/policy/action", {**form, "csrf": token}) == 303
    assert state(r) == "paused"


def test_read_only_hides_and_refuses_every_action(server: Any, dashboard: Any, page: Watched) -> None:
    r = server.client(decode_responses=True)
    dead_letters(r, "orders", "workers", 3)
    d = dashboard(url(server), "--read-only")
    page.page.goto(d.base + "/policy?db=0&key=orders&group=workers")
    assert page.page.locator("#pause, #resume").count() == 0
    assert page.page.locator("#whatif").count() == 1  # a simulation changes nothing
    token = page.page.locator("input[name=csrf]").first.input_value()
    page.page.goto(d.base + "/dlq?db=0&key=orders:dlq")
    assert page.page.locator("#redrive-form, #delete, #entries input[name=id]").count() == 0
    first = r.xrange("orders:dlq")[0][0]
    for path, form in (
        ("/policy/action", {"db": "0", "key": "orders", "group": "workers", "do": "pause"}),
        ("/dlq/action", {"db": "0", "key": "orders:dlq", "do": "redrive"}),
        ("/dlq/action", {"db": "0", "key": "orders:dlq", "do": "delete", "id": first}),
    ):
        assert post(page.page, path, {**form, "csrf": token}) == 403
    assert state(r) == "active"
    assert r.xlen("orders:dlq") == 3
    assert r.execute_command("RECLAIM.REDRIVE", "STATUS", "orders:dlq") is None


def test_a_user_restricted_by_acl_sees_only_its_policies(server: Any, dashboard: Any, page: Watched) -> None:
    r = server.client(decode_responses=True)
    dead_letters(r, "orders", "workers", 2)
    dead_letters(r, "payments", "billing", 2)
    # the monitor of docs/security.md ("ACL lines to use"): reads only, on orders*
    r.execute_command("ACL", "SETUSER", "monitor", "on", f">{PASSWORD}", "%R~orders*", "+@read",
                      "+reclaim.stats", "+reclaim.health", "+reclaim.simulate", "+reclaim.policy|get",
                      "+reclaim.policy|list", "+reclaim.policy|export", "+reclaim.redrive|status")
    d = dashboard(url(server, "monitor", PASSWORD))
    page.page.goto(d.base + "/")
    assert rows(page.page) == [("orders", "workers")]
    assert listed(r) == [("orders", "workers"), ("payments", "billing")]
    page.page.goto(d.base + "/dlq?db=0&key=orders:dlq")
    assert len(page.page.locator("#entries td.id").all_inner_texts()) == 2
    go(page.page, "#redrive-start")
    assert page.page.locator("#error").inner_text().startswith("NOPERM")
    assert r.execute_command("RECLAIM.REDRIVE", "STATUS", "orders:dlq") is None
    page.page.goto(d.base + "/policy?db=0&key=payments&group=billing")
    assert "NOPERM" in page.page.locator("#error").inner_text()
    page.page.goto(d.base + "/policy?db=0&key=orders&group=workers")
    go(page.page, "#pause")
    assert page.page.locator("#error").inner_text().startswith("NOPERM")
    assert state(r) == "active"
    assert PASSWORD not in page.page.content()
    assert PASSWORD not in d.output()


def status(address: str, **headers: str) -> int:
    """The HTTP status of a GET (a refusal is an answer, not an exception)."""
    try:
        return int(urllib.request.urlopen(urllib.request.Request(address, headers=headers),
                                          timeout=10).status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def test_another_address_needs_a_token(server: Any, dashboard: Any) -> None:
    out = subprocess.run([sys.executable, "-m", "redis_reclaim.web", "--url", url(server),
                          "--host", "0.0.0.0", "--port", "1"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2
    assert "refusing to listen on 0.0.0.0 without --token" in out.stderr
    d: Dashboard = dashboard(url(server), "--token", "tok-123")
    assert status(d.base + "/") == 401
    assert status(d.base + "/", Authorization="Bearer wrong") == 401
    assert status(d.base + "/", Authorization="Bearer tok-123") == 200
    p: Dashboard = dashboard(url(server), "--proxy-header", "X-Forwarded-User")
    assert status(p.base + "/") == 401
    assert status(p.base + "/", **{"X-Forwarded-User": "ann"}) == 200


def test_the_token_in_the_address_becomes_a_cookie(server: Any, dashboard: Any, page: Watched) -> None:
    d: Dashboard = dashboard(url(server), "--token", "tok-123")
    page.page.goto(d.base + "/?token=tok-123")
    assert page.page.url == d.base + "/"
    assert page.page.locator("h1").inner_text() == "Policies"
    page.page.context.clear_cookies()
    page.page.goto(d.base + "/")
    assert "refused" in page.page.content()


def test_the_dlq_filters_by_reason_and_source(server: Any, dashboard: Any, page: Watched) -> None:
    r = server.client()
    for i in range(120):
        r.xadd("all:dlq", {"reclaim-stream": "orders" if i % 2 else "payments",
                           "reclaim-group": "workers",
                           "reclaim-reason": "timeout" if i % 3 == 0 else "max-deliveries",
                           "n": str(i)})
    d = dashboard(url(server))
    page.page.goto(d.base + "/dlq?db=0&key=all:dlq")
    page.page.fill("#filter input[name=reason]", "timeout")
    page.page.fill("#filter input[name=source]", "orders")
    go(page.page, "#filter button")
    want = [str(i) for i in range(119, -1, -1) if i % 2 and i % 3 == 0]
    got = [t.strip() for t in page.page.locator("#entries .fvalue").all_inner_texts()]
    assert got == want
    assert "Filtered within the 120 entries read" in page.page.locator("#filter-note").inner_text()


def test_a_cluster_url_shows_every_primary(dashboard: Any, page: Watched) -> None:
    cluster = Cluster()
    try:
        rc = cluster.client(None)
        reclaim = Reclaim(rc)
        streams = ["orders", "payments", "shipping", "audit", "users"]
        assert len({cluster.node_of(s).port for s in streams}) == 3  # every node holds one
        for s in streams:
            rc.xgroup_create(s, "g", "$", mkstream=True)
            reclaim.policy_set(s, "g", min_idle=1000, max_deliveries=2, dlq=f"{{{s}}}:dlq")
        ids = [rc.xadd("payments", {"item": f"p{i}"}) for i in range(3)]
        rc.xreadgroup("g", "alice", {"payments": ">"})
        reclaim.term("payments", "g", "alice", *ids)
        d = dashboard(f"redis://127.0.0.1:{cluster.nodes[0].port}")
        page.page.goto(d.base + "/")
        assert rows(page.page) == [(text(p.stream), text(p.group)) for p in reclaim.policy_list()]
        assert len(rows(page.page)) == 5
        page.page.goto(d.base + "/dlq?db=0&key=" + quote("{payments}:dlq"))
        assert len(page.page.locator("#entries td.id").all_inner_texts()) == 3
        page.page.goto(d.base + "/policy?db=0&key=shipping&group=g")
        go(page.page, "#pause")
        got = reclaim.policy_get("shipping", "g")
        assert got is not None and got.state == "paused"
    finally:
        cluster.stop()
