"""What the thread worker and the asyncio worker share: the handler's outcomes, the entries a
worker holds, and how it settles them (as steps of commands, which each worker sends with its
own client). No I/O here."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Generator, Optional, TypeVar

from redis.exceptions import (
    ClusterDownError,
    ConnectionError,
    ReadOnlyError,
    RedisError,
    ResponseError,
    TimeoutError,
    TryAgainError,
)

from . import _commands as c
from ._commands import Command, Name

R = TypeVar("R")

log = logging.getLogger("redis_reclaim")

#: Errors a worker waits out (the server restarting, a failover, a cluster reconfiguring): it
#: reads again after a pause that doubles up to ``MAX_PAUSE_S``.
TRANSIENT = (ConnectionError, TimeoutError, ClusterDownError, TryAgainError, ReadOnlyError)
FIRST_PAUSE_S = 0.1
MAX_PAUSE_S = 5.0

#: ``RECLAIM.NACK ... DELAY`` with this asks for "as late as the lease allows": the module
#: refuses it and says how long that is, and the worker gives the entry back with that delay.
LEASE_DELAY = 2**63 - 1


class Retry(Exception):
    """Raise it from a handler to give the entry back (``RECLAIM.NACK ... DELAY delay_ms``): it
    is delivered again ``delay_ms`` from now (0: at once), to this worker or another. The attempt
    counts as a delivery. A delay longer than the entry's lease (``MIN-IDLE`` or its ``BACKOFF``
    step) is cut to the lease."""

    def __init__(self, delay_ms: int = 0, reason: str = "") -> None:
        super().__init__(reason or f"retry in {delay_ms} ms")
        self.delay_ms = delay_ms


class Permanent(Exception):
    """Raise it from a handler to dead-letter the entry at once (``RECLAIM.TERM ... REASON
    reason``): never retried, whatever its delivery count. The DLQ entry's ``reclaim-reason`` is
    ``reason`` (``term`` when empty). Needs a policy with a DLQ; without one (or while the policy
    is paused or its STORM breaker is open) the entry is given back instead, as after any other
    exception."""

    def __init__(self, reason: Name = "") -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Outcome:
    """What the worker does with an entry once its handler is done."""

    #: ``ack`` (XACK), ``nack`` (RECLAIM.NACK) or ``term`` (RECLAIM.TERM).
    action: str
    #: The DELAY of a nack: ms, or None for "when its lease would end".
    delay: Optional[int] = None
    #: The REASON of a term, or the exception of a failed handler (for the log).
    reason: Any = None


def outcome(error: Optional[BaseException], failure_delay_ms: Optional[int]) -> Outcome:
    """The outcome of a handler that returned (``error`` None) or raised ``error``."""
    if error is None:
        return Outcome("ack")
    if isinstance(error, Retry):
        return Outcome("nack", error.delay_ms, error)
    if isinstance(error, Permanent):
        return Outcome("term", None, error.reason or None)
    return Outcome("nack", failure_delay_ms, error)


class Held:
    """The entries a worker holds: read and not settled yet. Thread-safe (the heartbeat thread
    renews them while the worker's thread handles them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: dict[Any, float] = {}  # entry ID -> when it was read (time.monotonic())

    def add(self, ids: list[Any]) -> None:
        now = time.monotonic()
        with self._lock:
            for i in ids:
                self._since[i] = now

    def release(self, entry_id: Any) -> None:
        with self._lock:
            self._since.pop(entry_id, None)

    def holds(self, entry_id: Any) -> bool:
        with self._lock:
            return entry_id in self._since

    def to_renew(self, max_hold_s: Optional[float]) -> list[Any]:
        """The entries whose lease to renew: all, but those held longer than ``max_hold_s`` (a
        handler that hangs), which are let go."""
        now = time.monotonic()
        with self._lock:
            return [
                i for i, t in self._since.items() if max_hold_s is None or now - t < max_hold_s
            ]

    def renewed(self, asked: list[Any], renewed: list[Any]) -> list[Any]:
        """Records what RECLAIM.EXTEND renewed of ``asked``; the others are lost (taken by
        another worker or the policy) and let go. Returns those lost."""
        got = set(renewed)
        with self._lock:
            lost = [i for i in asked if i not in got and i in self._since]
            for i in lost:
                del self._since[i]
        return lost

    def all(self) -> list[Any]:
        with self._lock:
            return list(self._since)


def heartbeat_ms(min_idle: Optional[int]) -> int:
    """How often to renew leases by default: a third of ``MIN-IDLE``, at least every 10 ms; every
    second without a policy (then there is no lease to renew)."""
    if min_idle is None:
        return 1000
    return max(10, min_idle // 3)


def entry_name(entry_id: Any) -> str:
    return entry_id.decode("utf-8", "replace") if isinstance(entry_id, bytes) else str(entry_id)


#: A sequence of commands without I/O: it yields each command and gets its reply back (or, when
#: it failed, its RedisError thrown in); its return value is the result. Worker and AsyncWorker
#: run the same steps, one with a client, the other with an asyncio client.
Steps = Generator[Command[Any], Any, R]


class Settler:
    """How a worker settles its entries, the same for Worker and AsyncWorker."""

    def __init__(
        self, stream: Name, group: Name, consumer: Name, failure_delay_ms: Optional[int], counts: Counter[str]
    ) -> None:
        self.stream, self.group, self.consumer = stream, group, consumer
        self.failure_delay_ms = failure_delay_ms
        self.counts = counts

    def _count(self, what: str, entry_id: Any) -> None:
        """Counts an outcome; ``lost``: the entry was no longer this consumer's when it was
        settled (its lease ran out and another worker took it, or settled it already)."""
        self.counts[what] += 1
        if what == "lost":
            log.warning("entry %s was no longer ours when its handler returned (its lease ran out)", entry_name(entry_id))

    def settle(self, entry_id: Any, o: Outcome) -> Steps[None]:
        """XACK, RECLAIM.TERM or RECLAIM.NACK the entry, as its handler's outcome says. An entry
        that cannot be settled for a transient error stays pending (its lease brings it back)."""
        try:
            if o.action == "ack":
                done = yield Command(("XACK", self.stream, self.group, entry_id), self.stream, int)
                self._count("acked" if done else "lost", entry_id)
            elif o.action == "term":
                yield from self._term(entry_id, o.reason)
            else:
                if isinstance(o.reason, Retry):
                    self.counts["retried"] += 1
                else:
                    self.counts["failed"] += 1
                    log.warning("entry %s failed: %r", entry_name(entry_id), o.reason, exc_info=o.reason)
                yield from self._nack(entry_id, o.delay)
        except TRANSIENT as e:
            log.warning(
                "could not settle entry %s (%s): it stays pending, and comes back when its lease ends",
                entry_name(entry_id),
                e,
            )

    def _term(self, entry_id: Any, reason: Optional[Name]) -> Steps[None]:
        try:
            done = yield c.term(self.stream, self.group, self.consumer, entry_id, reason=reason)
            self._count("dead-lettered" if done else "lost", entry_id)
        except ResponseError as e:
            log.warning("could not dead-letter entry %s (%s): giving it back", entry_name(entry_id), e)
            yield from self._nack(entry_id, self.failure_delay_ms)

    def _nack(self, entry_id: Any, delay: Optional[int]) -> Steps[None]:
        """Gives the entry back with ``delay`` ms (None, or longer than its lease: the lease)."""
        try:
            done = yield c.nack(
                self.stream, self.group, self.consumer, entry_id,
                delay=LEASE_DELAY if delay is None else delay,
            )
        except ResponseError as e:
            due = c.due_from_error(str(e))
            if due is None:
                log.warning("could not give entry %s back (%s): it stays pending", entry_name(entry_id), e)
                return
            done = yield c.nack(self.stream, self.group, self.consumer, entry_id, delay=due)
        if not done:
            self._count("lost", entry_id)

    def give_back(self, ids: list[Any]) -> Steps[None]:
        """Gives back at once the entries held and not handled (at a stop, or after an error)."""
        if not ids:
            return
        try:
            yield c.nack(self.stream, self.group, self.consumer, *ids)
            self.counts["given-back"] += len(ids)
        except RedisError as e:
            log.warning("could not give back %d entries (%s): they stay pending", len(ids), e)
