"""Who may use the dashboard and how a refusal or an error looks: the access token or the reverse
proxy's header, the CSRF token of every action, the headers of every page, the server's errors."""

from __future__ import annotations

import hmac
from typing import Any, Optional

import redis
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

CSRF_COOKIE = "reclaim_csrf"
TOKEN_COOKIE = "reclaim_token"

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


class Refused(Exception):
    """A request refused with an HTTP status and a message shown on the error page."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def admit(request: Request, token: Optional[str], proxy_header: Optional[str]) -> Optional[Response]:
    """None when the request may go on; else the response that refuses it (or, for
    ``?token=<token>``, sets the token's cookie and drops it from the address)."""
    if proxy_header and not request.headers.get(proxy_header):
        return PlainTextResponse(f"refused: no {proxy_header} header", 401)
    if not token:
        return None
    given = request.query_params.get("token")
    if given is not None and hmac.compare_digest(given, token):
        resp = RedirectResponse(request.url.path, 303)
        resp.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
        return resp
    cookie = request.cookies.get(TOKEN_COOKIE, "")
    auth = request.headers.get("authorization", "")
    bearer = auth[7:] if auth.lower().startswith("bearer ") else ""
    if hmac.compare_digest(cookie, token) or hmac.compare_digest(bearer, token):
        return None
    return PlainTextResponse("refused: open the dashboard with ?token=<token>", 401)


def check_csrf(request: Request, form: dict[str, Any]) -> None:
    """The form's ``csrf`` must be the value of the CSRF cookie (SameSite=Strict, HTTP-only)."""
    cookie = request.cookies.get(CSRF_COOKIE, "")
    sent = str(form.get("csrf", ""))
    if not cookie or not sent or not hmac.compare_digest(cookie, sent):
        raise Refused(403, "refused: missing or wrong CSRF token (reload the page)")


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


def number(form: Any, field: str) -> Optional[int]:
    """A form's whole number, None when left empty."""
    v = str(form.get(field, "") or "").strip()
    if not v:
        return None
    if not v.isdigit():
        raise Refused(400, f"{field} must be a number")
    return int(v)
