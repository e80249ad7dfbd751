"""``redis-reclaim-web``: safe by default (loopback only; another address needs an access token
or a reverse proxy's header)."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import sys
from typing import Optional, Sequence

from ._app import Settings, create_app
from ._present import redact
from ._sampler import HOUR

TOKEN_ENV = "RECLAIM_WEB_TOKEN"


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse(argv: Optional[Sequence[str]] = None) -> tuple[argparse.Namespace, Settings]:
    ap = argparse.ArgumentParser(prog="redis-reclaim-web", description=__doc__)
    ap.add_argument("--url", default=os.environ.get("RECLAIM_WEB_URL", "redis://127.0.0.1:6379"),
                    help="the server, as redis://[user:password@]host:port[/db] "
                    "(env RECLAIM_WEB_URL); the ACL user decides what the dashboard sees and may do")
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    ap.add_argument("--port", type=int, default=8080, help="port to listen on (8080)")
    ap.add_argument("--token", default=None,
                    help=f"access token every request must carry (env {TOKEN_ENV}); "
                    "required to listen on another address than loopback")
    ap.add_argument("--proxy-header", default=None, metavar="HEADER",
                    help="trust a reverse proxy that authenticates users and sets HEADER "
                    "(X-Forwarded-User): requests without it are refused")
    ap.add_argument("--read-only", action="store_true", help="hide and refuse every action")
    ap.add_argument("--refresh", type=int, default=5, help="seconds between page refreshes (5)")
    ap.add_argument("--sample-interval", type=float, default=10.0,
                    help="seconds between the samples of the policy charts (10)")
    ap.add_argument("--prometheus", default=os.environ.get("RECLAIM_WEB_PROMETHEUS") or None,
                    metavar="URL",
                    help="Prometheus (http://host:9090) that scrapes the server through "
                    "prometheus-redis-exporter with contrib/prometheus: the policy chart reads "
                    "the last hour there (env RECLAIM_WEB_PROMETHEUS)")
    ap.add_argument("--prometheus-step", type=float, default=15.0, metavar="SECONDS",
                    help="the chart's step when read from Prometheus (15)")
    args = ap.parse_args(argv)
    token = args.token or os.environ.get(TOKEN_ENV) or None
    settings = Settings(url=args.url, read_only=args.read_only, token=token,
                        proxy_header=args.proxy_header, refresh=max(1, args.refresh),
                        sample_interval=max(0.1, args.sample_interval),
                        prometheus=args.prometheus,
                        prometheus_step=min(max(1.0, args.prometheus_step), HOUR / 10))
    return args, settings


def main(argv: Optional[Sequence[str]] = None) -> int:
    args, settings = parse(argv)
    if not loopback(args.host) and not settings.token and not settings.proxy_header:
        print(f"redis-reclaim-web: refusing to listen on {args.host} without --token "
              f"(or {TOKEN_ENV}) or --proxy-header", file=sys.stderr)
        return 2
    import uvicorn

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    print(f"redis-reclaim-web: {redact(settings.url)} on http://{args.host}:{args.port}/",
          file=sys.stderr, flush=True)
    uvicorn.run(create_app(settings), host=args.host, port=args.port, log_level="warning",
                access_log=False)
    return 0
