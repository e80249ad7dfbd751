"""redis-reclaim's Python client: the module's commands as methods (:class:`Reclaim`) and a
worker that consumes a stream's group with them (:class:`Worker`); their asyncio twins are in
:mod:`redis_reclaim.asyncio`. The guide is docs/python.md in the project."""

from ._commands import Backoff, Command, Delivery, Fields, Imported, Name, Policy, Reply
from ._worker import Context, Permanent, PolicyError, Retry
from .client import Reclaim
from .worker import Handler, Worker

__version__ = "0.2.0"

__all__ = [
    "Backoff",
    "Command",
    "Context",
    "Delivery",
    "Fields",
    "Handler",
    "Imported",
    "Name",
    "Permanent",
    "Policy",
    "PolicyError",
    "Reclaim",
    "Reply",
    "Retry",
    "Worker",
    "__version__",
]
