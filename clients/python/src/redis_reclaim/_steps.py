"""Running *steps*: a generator that yields what to do and gets each result back (or, when it
failed, the exception thrown in at that point), so that one piece of logic serves the sync and
the asyncio clients, each doing the I/O its way. ``_worker.Loop`` and ``_cluster.to_key`` are
written as steps."""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Generator, Optional, TypeVar

S = TypeVar("S")
R = TypeVar("R")


def run(steps: Generator[S, Any, R], do: Callable[[S], Any]) -> R:
    """Runs ``steps``, each with ``do``. Any exception of ``do`` is thrown into the steps (which
    decide, and re-raise what they do not handle)."""
    reply: Any = None
    error: Optional[BaseException] = None
    while True:
        try:
            step = steps.send(reply) if error is None else steps.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        reply, error = None, None
        try:
            reply = do(step)
        except BaseException as e:  # noqa: BLE001 - the steps decide
            error = e


async def run_async(steps: Generator[S, Any, R], do: Callable[[S], Awaitable[Any]]) -> R:
    """:func:`run` with a coroutine ``do``."""
    reply: Any = None
    error: Optional[BaseException] = None
    while True:
        try:
            step = steps.send(reply) if error is None else steps.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        reply, error = None, None
        try:
            reply = await do(step)
        except BaseException as e:  # noqa: BLE001 - the steps decide
            error = e
