"""The web dashboard's cost for the server's other clients: their latency with and without a
dashboard that shows 1,000 policies, refreshed every second.

Usage: PYTHONPATH=clients/python/src:.cache/py:.cache/py-web python3 bench/web_load.py [MODULE.so]

Starts redis-server (REDIS_SERVER) with the module on a free port, sets N policies (default 1,000:
a stream each, a group, `MAX-DELIVERIES 3 DLQ`, 10 pending entries held by a consumer and 5 dead
letters), then for SECS seconds each (default 30) measures the round trip of another client's
`XADD` + `XRANGE ... COUNT 1` (one at a time):

1. without the dashboard;
2. with `python -m redis_reclaim.web --sample-interval 1` running and a reader that fetches every
   page of the overview (all N policies: N/50 pages) once a second, after a first pass over the
   N policy pages (so the dashboard samples all N policies' counters every second too).

It prints p50, p99 and max of each, the pages fetched, and the server's own view:
`LATENCY LATEST` with `latency-monitor-threshold 1` (every event of 1 ms or more) and the
`usec_per_call` of the commands the dashboard sends (`INFO commandstats`). Not run by `make bench`.
"""

import os
import subprocess
import sys
import threading
import time
import urllib.request

import redis

import probe

SO = sys.argv[1] if len(sys.argv) > 1 else "target/release/libredis_reclaim.so"
N = int(os.environ.get("N", "1000"))
SECS = float(os.environ.get("SECS", "30"))


def fill(r):
    for start in range(0, N, 100):
        p = r.pipeline(transaction=False)
        for i in range(start, min(start + 100, N)):
            s = f"s:{i:05d}"
            p.xgroup_create(s, "g", "$", mkstream=True)
            p.execute_command("RECLAIM.POLICY", "SET", s, "g", "MIN-IDLE", 600000,
                              "MAX-DELIVERIES", 3, "DLQ", f"{s}:dlq")
            for j in range(15):
                p.xadd(s, {"n": j, "body": "x" * 100})
            p.xreadgroup("g", "w", {s: ">"}, count=15)
        p.execute()
        p = r.pipeline(transaction=False)
        for i in range(start, min(start + 100, N)):
            s = f"s:{i:05d}"
            ids = [e[0] for e in r.xrange(s, count=5)]
            p.execute_command("RECLAIM.TERM", s, "g", "w", *ids)
        p.execute()


def measure(r, secs):
    out = []
    end = time.monotonic() + secs
    while time.monotonic() < end:
        t = time.perf_counter()
        r.xadd("probe", {"k": "v"}, maxlen=1000, approximate=True)
        r.xrange("probe", count=1)
        out.append(time.perf_counter() - t)
    out.sort()
    return {"n": len(out), "p50": out[len(out) // 2] * 1e3, "p99": out[int(len(out) * 0.99)] * 1e3,
            "max": out[-1] * 1e3}


def fetch(url):
    return urllib.request.urlopen(url, timeout=30).read().decode()


def reader(base, stop, counts):
    """Every page of the overview, once a second."""
    while not stop.is_set():
        t = time.monotonic()
        after = ""
        while True:
            page = fetch(base + "/?db=0" + after)
            counts["pages"] += 1
            if 'id="next-page"' not in page:
                break
            href = page.split('id="next-page" href="', 1)[1].split('"', 1)[0]
            after = "&" + href.split("&amp;", 1)[1].replace("&amp;", "&")
        counts["rounds"] += 1
        counts["round_s"].append(time.monotonic() - t)
        stop.wait(max(0.0, 1.0 - (time.monotonic() - t)))


def show(name, m):
    print(f"{name}: {m['n']} round trips, p50 {m['p50']:.3f} ms, p99 {m['p99']:.3f} ms, "
          f"max {m['max']:.3f} ms")


def main():
    with probe.server(SO, prefix="web-load-") as srv:
        r = srv.r
        fill(r)
        port = r.connection_pool.connection_kwargs["port"]
        r.config_set("latency-monitor-threshold", 1)
        show("without the dashboard", measure(r, SECS))
        r.execute_command("LATENCY", "RESET")
        r.config_resetstat()
        web = probe.free_port()
        dash = subprocess.Popen([sys.executable, "-m", "redis_reclaim.web", "--url",
                                 f"redis://127.0.0.1:{port}", "--port", str(web),
                                 "--sample-interval", "1"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            base = f"http://127.0.0.1:{web}"
            for _ in range(300):
                try:
                    fetch(base + "/static/style.css")
                    break
                except OSError:
                    time.sleep(0.1)
            for i in range(N):  # every policy seen once: the sampler reads all N every second
                fetch(f"{base}/policy?db=0&key=s:{i:05d}&group=g")
            stop = threading.Event()
            counts = {"pages": 0, "rounds": 0, "round_s": []}
            t = threading.Thread(target=reader, args=(base, stop, counts))
            t.start()
            m = measure(r, SECS)
            stop.set()
            t.join()
        finally:
            dash.terminate()
            dash.wait()
        show("with the dashboard", m)
        rounds = sorted(counts["round_s"])
        print(f"the reader: {counts['rounds']} rounds of the whole overview, {counts['pages']} pages;"
              f" a round took {rounds[len(rounds) // 2]:.2f} s (median), {rounds[-1]:.2f} s (max)")
        print("LATENCY LATEST (events of 1 ms or more):", r.execute_command("LATENCY", "LATEST"))
        stats = r.info("commandstats")
        for k in sorted(stats):
            if any(w in k for w in ("reclaim", "xpending", "xrevrange", "xlen", "info")):
                v = stats[k]
                print(f"  {k}: {v['calls']} calls, {v['usec_per_call']} us per call")


if __name__ == "__main__":
    main()
