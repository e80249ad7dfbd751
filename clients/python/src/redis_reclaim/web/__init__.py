"""A web dashboard for redis-reclaim: policies, pending entries and DLQs in a browser.

``pip install "./clients/python[web]"`` (from a checkout of redis-reclaim), then
``redis-reclaim-web --url redis://127.0.0.1:6379`` (or ``python -m redis_reclaim.web``).
See docs/dashboard.md."""

# The dashboard's dependencies are the package's `web` extra: without them, say what to install
# instead of a bare "No module named 'jinja2'" from deep inside the app.
_WEB_EXTRA = ("starlette", "jinja2", "uvicorn", "multipart", "python_multipart")

try:
    from ._app import Settings, create_app
    from ._cli import main
except ModuleNotFoundError as missing:
    if (missing.name or "").split(".")[0] not in _WEB_EXTRA:
        raise
    raise ModuleNotFoundError(
        f"the redis-reclaim dashboard needs its `web` extra ({missing.name} is not installed): "
        'pip install "./clients/python[web]" from a checkout of redis-reclaim',
        name=missing.name,
    ) from missing

__all__ = ["Settings", "create_app", "main"]
