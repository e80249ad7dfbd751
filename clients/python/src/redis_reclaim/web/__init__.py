"""A web dashboard for redis-reclaim: policies, pending entries and DLQs in a browser.

``pip install "redis-reclaim[web]"``, then ``redis-reclaim-web --url redis://127.0.0.1:6379``
(or ``python -m redis_reclaim.web``). See docs/dashboard.md."""

from ._app import Settings, create_app
from ._cli import main

__all__ = ["Settings", "create_app", "main"]
