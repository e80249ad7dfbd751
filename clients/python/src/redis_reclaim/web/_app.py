"""The Starlette application: routes render templates from what :mod:`._data` reads; every
action is a POST carrying the CSRF token; ``read_only`` hides and refuses every action; an
access token or a reverse proxy's header guards every request when one is configured."""

from __future__ import annotations

import contextlib
import hmac
import logging
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Optional

import redis
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from . import _present as p
from ._data import PAGE, Data
from ._sampler import PolicyId, Sampler, chart

HERE = Path(__file__).parent
CSRF_COOKIE = "reclaim_csrf"
TOKEN_COOKIE = "reclaim_token"
log = logging.getLogger("redis_reclaim.web")

#: What every page is sent with: no inline script runs (a stream's content cannot become code
#: even if escaping failed), no framing, no referrer.
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


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


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _env() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE / "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True))
    env.filters.update(label=p.label, param=p.param, duration=p.duration, when=p.when, show=p.show)
    return env


def create_app(settings: Settings) -> Starlette:
    data = Data(settings.url)
    sampler = Sampler(settings.sample_interval)
    env = _env()
    stop = threading.Event()

    def sample(watched: list[PolicyId]) -> None:
        for db, key, group in watched:
            try:
                sampler.record((db, key, group), data.reclaim(db).stats(key, group))
            except redis.RedisError:
                continue

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        log.info("redis-reclaim-web: %s, %s", p.redact(settings.url),
                 "read-only" if settings.read_only else "actions allowed")
        thread = threading.Thread(target=sampler.run, args=(sample, stop), daemon=True)
        thread.start()
        yield
        stop.set()
        data.close()

    def render(request: Request, name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        csrf = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32)
        html = env.get_template(name).render(
            request=request, csrf=csrf, read_only=settings.read_only, refresh=settings.refresh,
            server=p.redact(settings.url), **ctx)
        resp = HTMLResponse(html, status_code=status)
        if CSRF_COOKIE not in request.cookies:
            resp.set_cookie(CSRF_COOKIE, csrf, httponly=True, samesite="strict")
        return resp

    def name(request: Request, field: str, form: Optional[dict[str, Any]] = None) -> bytes:
        src = form if form is not None else request.query_params
        value = src.get(field)
        if not value:
            raise Refused(400, f"missing {field}")
        try:
            return p.unparam(str(value))
        except ValueError:
            raise Refused(400, f"bad {field}") from None

    def db_of(src: Any) -> int:
        try:
            return int(src.get("db", data.db))
        except ValueError:
            raise Refused(400, "bad db") from None

    # -- pages -----------------------------------------------------------------------------

    async def overview(request: Request) -> Response:
        q = request.query_params
        db = db_of(q)
        after = None
        if q.get("after_key") is not None and q.get("after_group") is not None:
            after = (p.unparam(q["after_key"]), p.unparam(q["after_group"]))
        dbs = await run_in_threadpool(data.databases)
        rows = await run_in_threadpool(data.policies, db, after)
        for r in rows:
            if r.get("stats") is not None:
                sampler.record((db, bytes(r["key"]), bytes(r["group"])), r["stats"])
        nxt = rows[-1] if len(rows) >= PAGE else None
        return render(request, "overview.html", rows=rows, dbs=dbs, db=db, next=nxt,
                      paged=after is not None, page=PAGE)

    async def policy(request: Request) -> Response:
        q = request.query_params
        db, key, group = db_of(q), name(request, "key"), name(request, "group")
        info = await run_in_threadpool(data.policy, db, key, group)
        sampler.record((db, key, group), info["stats"])
        series = sampler.series((db, key, group))
        return render(request, "policy.html", p_=info, db=db, key=key, group=group,
                      chart=chart(series), interval=sampler.interval, sim=None,
                      sim_form={})

    async def simulate(request: Request) -> Response:
        form = dict(await request.form())
        check_csrf(request, form)
        db, key, group = db_of(form), name(request, "key", form), name(request, "group", form)
        opts: dict[str, Any] = {}
        for field in ("min_idle", "max_deliveries", "count", "interval", "liveness",
                      "dlq_maxlen", "dlq_maxage"):
            v = str(form.get(field, "")).strip()
            if v:
                if not v.isdigit():
                    raise Refused(400, f"{field} must be a number")
                opts[field] = int(v)
        if str(form.get("backoff", "")).strip():
            opts["backoff"] = str(form["backoff"]).strip()
        limit_text = str(form.get("limit") or "100").strip()
        if not limit_text.isdigit():
            raise Refused(400, "limit must be a number")
        limit = int(limit_text)
        info = await run_in_threadpool(data.policy, db, key, group)
        sim = await run_in_threadpool(data.simulate, db, key, group, max(1, min(limit, 1000)), opts)
        return render(request, "policy.html", p_=info, db=db, key=key, group=group,
                      chart=chart(sampler.series((db, key, group))), interval=sampler.interval,
                      sim=sim, sim_form=form)

    async def dlq(request: Request) -> Response:
        q = request.query_params
        db, key = db_of(q), name(request, "key")
        before = q.get("before") or None
        reason, source = q.get("reason", ""), q.get("source", "")
        page = await run_in_threadpool(data.dlq_page, db, key, before, reason, source)
        status = await run_in_threadpool(data.redrive_status, db, key)
        return render(request, "dlq.html", db=db, key=key, page=page, reason=reason,
                      source=source, task=status, before=before)

    async def redrive_status(request: Request) -> Response:
        q = request.query_params
        db, key = db_of(q), name(request, "key")
        st = await run_in_threadpool(data.redrive_status, db, key)
        if st is None:
            return JSONResponse(None)
        out = {k: v for k, v in st.items() if isinstance(v, (int, str)) or v is None}
        return JSONResponse(out)

    # -- actions ---------------------------------------------------------------------------

    def check_csrf(request: Request, form: dict[str, Any]) -> None:
        cookie = request.cookies.get(CSRF_COOKIE, "")
        sent = str(form.get("csrf", ""))
        if not cookie or not sent or not hmac.compare_digest(cookie, sent):
            raise Refused(403, "refused: missing or wrong CSRF token (reload the page)")

    async def action_form(request: Request) -> dict[str, Any]:
        if settings.read_only:
            raise Refused(403, "refused: the dashboard runs with --read-only")
        form = dict(await request.form())
        check_csrf(request, form)
        return form

    async def act_policy(request: Request) -> Response:
        form = await action_form(request)
        db, key, group = db_of(form), name(request, "key", form), name(request, "group", form)
        verb = form.get("do")
        if verb == "pause":
            await run_in_threadpool(data.pause, db, key, group)
        elif verb == "resume":
            await run_in_threadpool(data.resume, db, key, group)
        else:
            raise Refused(400, "unknown action")
        return RedirectResponse(
            f"/policy?db={db}&key={quote(p.param(key))}&group={quote(p.param(group))}", 303)

    async def act_dlq(request: Request) -> Response:
        form_data = await request.form()
        if settings.read_only:
            raise Refused(403, "refused: the dashboard runs with --read-only")
        form = dict(form_data)
        check_csrf(request, form)
        db, key = db_of(form), name(request, "key", form)
        verb = form.get("do")
        if verb == "redrive":
            opts: dict[str, Any] = {}
            for field in ("rate", "count", "canary", "window"):
                v = str(form.get(field, "")).strip()
                if v:
                    if not v.isdigit():
                        raise Refused(400, f"{field} must be a number")
                    opts[field] = int(v)
            if form.get("source_key") and form.get("source_group"):
                opts["source"] = (p.unparam(str(form["source_key"])),
                                  p.unparam(str(form["source_group"])))
            await run_in_threadpool(data.redrive, db, key, **opts)
        elif verb == "cancel":
            await run_in_threadpool(data.redrive_cancel, db, key)
        elif verb == "delete":
            ids = [str(v) for v in form_data.getlist("id")]
            await run_in_threadpool(data.delete, db, key, ids)
        else:
            raise Refused(400, "unknown action")
        return RedirectResponse(f"/dlq?db={db}&key={quote(p.param(key))}", 303)

    # -- the gate: token or proxy header, errors as pages ------------------------------------

    def gate(request: Request) -> Optional[Response]:
        if settings.proxy_header and not request.headers.get(settings.proxy_header):
            return PlainTextResponse(f"refused: no {settings.proxy_header} header", 401)
        if settings.token:
            given = request.query_params.get("token")
            if given is not None and hmac.compare_digest(given, settings.token):
                resp = RedirectResponse(request.url.path, 303)
                resp.set_cookie(TOKEN_COOKIE, settings.token, httponly=True, samesite="strict")
                return resp
            cookie = request.cookies.get(TOKEN_COOKIE, "")
            auth = request.headers.get("authorization", "")
            bearer = auth[7:] if auth.lower().startswith("bearer ") else ""
            if not (hmac.compare_digest(cookie, settings.token)
                    or hmac.compare_digest(bearer, settings.token)):
                return PlainTextResponse("refused: open the dashboard with ?token=<token>", 401)
        return None

    def guarded(handler: Callable[[Request], Awaitable[Response]]
                ) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            resp = gate(request)
            if resp is None:
                try:
                    resp = await handler(request)
                except Refused as e:
                    resp = render(request, "error.html", status=e.status, message=str(e))
                except LookupError as e:
                    resp = render(request, "error.html", status=404, message=str(e.args[0]))
                except redis.ResponseError as e:
                    message = server_message(e)
                    code = 403 if message.startswith("NOPERM") else 400
                    resp = render(request, "error.html", status=code, message=message)
                except redis.ConnectionError as e:
                    resp = render(request, "error.html", status=502,
                                  message=f"cannot reach {p.redact(settings.url)}: {e}")
            for k, v in HEADERS.items():
                resp.headers.setdefault(k, v)
            return resp

        return run

    routes = [
        Route("/", guarded(overview)),
        Route("/policy", guarded(policy)),
        Route("/policy/simulate", guarded(simulate), methods=["POST"]),
        Route("/policy/action", guarded(act_policy), methods=["POST"]),
        Route("/dlq", guarded(dlq)),
        Route("/dlq/action", guarded(act_dlq), methods=["POST"]),
        Route("/api/redrive-status", guarded(redrive_status)),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.sampler = sampler
    app.state.data = data
    return app


def server_message(e: redis.ResponseError) -> str:
    """The error as the server said it: redis-py strips the code of the errors it has a class
    for (``NOPERM``, ``ERR``...); it is put back."""
    text = str(e)
    first = text.split(" ", 1)[0]
    if first.isupper() and first.isalpha():
        return text
    for cls, code in ((redis.exceptions.NoPermissionError, "NOPERM"),
                      (redis.exceptions.ReadOnlyError, "READONLY"),
                      (redis.exceptions.BusyLoadingError, "LOADING"),
                      (redis.exceptions.ExecAbortError, "EXECABORT")):
        if isinstance(e, cls):
            return f"{code} {text}"
    return f"ERR {text}"


def quote(s: str) -> str:
    from urllib.parse import quote as q

    return q(s, safe="")
