"""The Starlette application: routes render templates from what :mod:`._data` reads; every
action is a POST carrying the CSRF token; ``read_only`` hides and refuses every action; an
access token or a reverse proxy's header guards every request when one is configured."""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Optional
from urllib.parse import quote

import redis
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from . import _present as p
from ._data import PAGE, Data
from ._gate import CSRF_COOKIE, HEADERS, Refused, admit, check_csrf, number, server_message
from ._prometheus import Prometheus, chart_samples, shown
from ._sampler import PolicyId, Sampler, chart

HERE = Path(__file__).parent
log = logging.getLogger("redis_reclaim.web")
Handler = Callable[[Request], Awaitable[Response]]
WHAT_IF = ("min_idle", "max_deliveries", "count", "interval", "liveness", "dlq_maxlen", "dlq_maxage")


@dataclass
class Settings:
    url: str = "redis://127.0.0.1:6379"
    read_only: bool = False
    #: An access token every request must carry (cookie set by ``/?token=...``, or a
    #: ``Authorization: Bearer`` header); None: no token.
    token: Optional[str] = None
    #: A header a reverse proxy sets on every request it authenticated (``X-Forwarded-User``);
    #: requests without it are refused.
    proxy_header: Optional[str] = None
    refresh: int = 5
    sample_interval: float = 10.0
    #: Prometheus's URL: the policy chart reads the module's counters there (``query_range``)
    #: instead of the dashboard's own samples; None: the dashboard's samples.
    prometheus: Optional[str] = None
    #: The chart's step when read from Prometheus, s.
    prometheus_step: float = 15.0


def _env() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE / "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True))
    env.filters.update(label=p.label, param=p.param, duration=p.duration, when=p.when, show=p.show,
                       rate=p.rate)
    return env


def _link(path: str, db: int, **names: Any) -> str:
    args = "".join(f"&{k}={quote(p.param(v), safe='')}" for k, v in names.items())
    return f"{path}?db={db}{args}"


#: Most DLQ entries one action takes (RECLAIM.REDRIVE ... IDS's maximum).
MAX_SELECTED = 1000


def selection(form: Any) -> list[str]:
    """The checked DLQ entries of a form, each once, in order; refused above ``MAX_SELECTED``."""
    ids = list(dict.fromkeys(str(v) for v in form.getlist("id")))
    if len(ids) > MAX_SELECTED:
        raise Refused(400, f"{len(ids)} entries selected: at most {MAX_SELECTED} at a time")
    return ids


class Dashboard:
    """The pages and actions; one per application."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.data = Data(settings.url)
        self.sampler = Sampler(settings.sample_interval)
        self.prometheus = (Prometheus(settings.prometheus, settings.prometheus_step)
                           if settings.prometheus else None)
        self.env = _env()
        self.stop = threading.Event()

    # -- plumbing ------------------------------------------------------------------------------

    def sample(self, watched: list[PolicyId]) -> None:
        for db, key, group in watched:
            try:
                stats, read = self.data.counters(db, key, group)
                self.sampler.record((db, key, group), stats, viewed=False, read=read)
            except redis.RedisError:
                continue

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        s = self.settings
        log.info("redis-reclaim-web: %s, %s", p.redact(s.url),
                 "read-only" if s.read_only else "actions allowed")
        thread = threading.Thread(target=self.sampler.run, args=(self.sample, self.stop), daemon=True)
        thread.start()
        yield
        self.stop.set()
        self.data.close()

    def render(self, request: Request, name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        s = self.settings
        csrf = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32)
        html = self.env.get_template(name).render(
            request=request, csrf=csrf, read_only=s.read_only, refresh=s.refresh,
            server=p.redact(s.url), **ctx)
        resp = HTMLResponse(html, status_code=status)
        if CSRF_COOKIE not in request.cookies:
            resp.set_cookie(CSRF_COOKIE, csrf, httponly=True, samesite="strict")
        return resp

    def db_of(self, src: Any) -> int:
        try:
            return int(src.get("db", self.data.db))
        except ValueError:
            raise Refused(400, "bad db") from None

    @staticmethod
    def name(src: Any, field: str) -> bytes:
        value = src.get(field)
        if not value:
            raise Refused(400, f"missing {field}")
        try:
            return p.unparam(str(value))
        except ValueError:
            raise Refused(400, f"bad {field}") from None

    async def action_form(self, request: Request) -> Any:
        """The form of an action: refused in read-only mode and without the CSRF token."""
        if self.settings.read_only:
            raise Refused(403, "refused: the dashboard runs with --read-only")
        # the selected DLQ entries (at most MAX_SELECTED, refused above) and the form's own fields
        form = await request.form(max_fields=MAX_SELECTED + 100)
        check_csrf(request, dict(form))
        return form

    def guarded(self, handler: Handler) -> Handler:
        """The handler behind the gate, its errors as pages, the headers of every page."""

        async def run(request: Request) -> Response:
            resp = admit(request, self.settings.token, self.settings.proxy_header)
            if resp is None:
                resp = await self.answer(handler, request)
            for k, v in HEADERS.items():
                resp.headers.setdefault(k, v)
            return resp

        return run

    async def answer(self, handler: Handler, request: Request) -> Response:
        try:
            return await handler(request)
        except Refused as e:
            return self.render(request, "error.html", status=e.status, message=str(e))
        except LookupError as e:
            return self.render(request, "error.html", status=404, message=str(e.args[0]))
        except redis.ResponseError as e:  # the server's own message: NOPERM ..., ERR ...
            message = server_message(e)
            code = 403 if message.startswith("NOPERM") else 400
            return self.render(request, "error.html", status=code, message=message)
        except redis.ConnectionError as e:
            return self.render(request, "error.html", status=502,
                               message=f"cannot reach {p.redact(self.settings.url)}: {e}")

    # -- pages ---------------------------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        q = request.query_params
        db = self.db_of(q)
        after = None
        if q.get("after_key") is not None and q.get("after_group") is not None:
            after = (self.name(q, "after_key"), self.name(q, "after_group"))
        dbs = await run_in_threadpool(self.data.databases)
        rows, more = await run_in_threadpool(self.data.policies, db, after)
        for r in rows:
            pid = (db, bytes(r["key"]), bytes(r["group"]))
            if r.get("stats") is not None:
                self.sampler.record(pid, r["stats"], read=r.get("entries_read"))
            r["per_min"] = self.sampler.per_minute(pid)
        nxt = rows[-1] if more else None
        return self.render(request, "overview.html", rows=rows, dbs=dbs, db=db, next=nxt,
                           paged=after is not None, page=PAGE)

    async def policy_page(self, request: Request, src: Any, sim: Any = None) -> Response:
        db, key, group = self.db_of(src), self.name(src, "key"), self.name(src, "group")
        info = await run_in_threadpool(self.data.policy, db, key, group)
        self.sampler.record((db, key, group), info["stats"], read=info["entries_read"])
        samples, from_prom, chart_error = self.sampler.series((db, key, group)), None, None
        interval = self.sampler.interval
        if self.prometheus is not None:
            got, chart_error = await run_in_threadpool(chart_samples, self.prometheus, db, key,
                                                       group)
            if got is not None:
                samples, from_prom, interval = got, shown(self.prometheus.url), self.prometheus.step
        return self.render(request, "policy.html", p_=info, db=db, key=key, group=group,
                           chart=chart(samples), interval=interval, from_prom=from_prom,
                           chart_error=chart_error, sim=sim,
                           sim_form=dict(src) if sim is not None else {})

    async def policy(self, request: Request) -> Response:
        return await self.policy_page(request, request.query_params)

    async def simulate(self, request: Request) -> Response:
        """The what-if form: allowed in read-only mode (it changes nothing), with the CSRF token."""
        # the selected DLQ entries (at most MAX_SELECTED, refused above) and the form's own fields
        form = await request.form(max_fields=MAX_SELECTED + 100)
        check_csrf(request, dict(form))
        db, key, group = self.db_of(form), self.name(form, "key"), self.name(form, "group")
        opts: dict[str, Any] = {f: number(form, f) for f in WHAT_IF if number(form, f) is not None}
        if str(form.get("backoff", "")).strip():
            opts["backoff"] = str(form["backoff"]).strip()
        limit = max(1, min(number(form, "limit") or 100, 1000))
        sim = await run_in_threadpool(self.data.simulate, db, key, group, limit, opts)
        return await self.policy_page(request, form, sim)

    async def dlq(self, request: Request) -> Response:
        q = request.query_params
        db, key = self.db_of(q), self.name(q, "key")
        before = q.get("before") or None
        reason, source = q.get("reason", ""), q.get("source", "")
        page = await run_in_threadpool(self.data.dlq_page, db, key, before, reason, source)
        task = await run_in_threadpool(self.data.redrive_status, db, key)
        return self.render(request, "dlq.html", db=db, key=key, page=page, reason=reason,
                           source=source, task=task, before=before)

    async def redrive_status(self, request: Request) -> Response:
        q = request.query_params
        st = await run_in_threadpool(self.data.redrive_status, self.db_of(q), self.name(q, "key"))
        if st is None:
            return JSONResponse(None)
        return JSONResponse({k: v for k, v in st.items() if isinstance(v, (int, str)) or v is None})

    # -- actions -------------------------------------------------------------------------------

    async def act_policy(self, request: Request) -> Response:
        form = await self.action_form(request)
        db, key, group = self.db_of(form), self.name(form, "key"), self.name(form, "group")
        verb = form.get("do")
        if verb == "pause":
            await run_in_threadpool(self.data.pause, db, key, group)
        elif verb == "resume":
            await run_in_threadpool(self.data.resume, db, key, group)
        else:
            raise Refused(400, "unknown action")
        return RedirectResponse(_link("/policy", db, key=key, group=group), 303)

    async def act_dlq(self, request: Request) -> Response:
        form = await self.action_form(request)
        db, key = self.db_of(form), self.name(form, "key")
        verb = form.get("do")
        if verb in ("redrive", "redrive-selected"):
            opts: dict[str, Any] = {f: number(form, f) for f in ("rate", "count", "canary", "window")}
            if form.get("source_key") and form.get("source_group"):
                opts["source"] = (self.name(form, "source_key"), self.name(form, "source_group"))
            if verb == "redrive-selected":
                opts["ids"] = selection(form)
                if not opts["ids"]:
                    raise Refused(400, "no entry selected: check the entries to redrive")
            await run_in_threadpool(self.data.redrive, db, key, **opts)
        elif verb == "cancel":
            await run_in_threadpool(self.data.redrive_cancel, db, key)
        elif verb == "delete":
            await run_in_threadpool(self.data.delete, db, key, selection(form))
        else:
            raise Refused(400, "unknown action")
        return RedirectResponse(_link("/dlq", db, key=key), 303)

    def routes(self) -> list[Any]:
        g = self.guarded
        return [
            Route("/", g(self.overview)),
            Route("/policy", g(self.policy)),
            Route("/policy/simulate", g(self.simulate), methods=["POST"]),
            Route("/policy/action", g(self.act_policy), methods=["POST"]),
            Route("/dlq", g(self.dlq)),
            Route("/dlq/action", g(self.act_dlq), methods=["POST"]),
            Route("/api/redrive-status", g(self.redrive_status)),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ]


def create_app(settings: Settings) -> Starlette:
    """The ASGI application (uvicorn serves it; ``redis-reclaim-web`` does that)."""
    dash = Dashboard(settings)
    app = Starlette(routes=dash.routes(), lifespan=dash.lifespan)
    app.state.dashboard = dash
    return app
