"""What the thread worker and the asyncio worker share: the handler's outcomes, the entries a
worker holds, and the whole loop (read, handle, settle, give back) written once as *steps*: a
generator that yields what to do (a command, a pipeline of commands, a call of the handler, a
pause) and gets the result back. :class:`~redis_reclaim.Worker` runs the steps with a client,
:class:`~redis_reclaim.asyncio.AsyncWorker` with an asyncio client. No I/O here."""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Generator, Generic, Iterable, Mapping, Optional, TypeVar, Union

from redis.exceptions import (
    ClusterDownError,
    ConnectionError,
    NoPermissionError,
    ReadOnlyError,
    RedisError,
    ResponseError,
    TimeoutError,
    TryAgainError,
)

from . import _commands as c
from ._commands import Command, Fields, Name, Policy

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

#: The longest NACK REASON the worker sends (characters of "Type: message"; longer is cut).
REASON_MAX = 256

#: The statuses of a policy (``RECLAIM.POLICY GET``'s ``status``) a worker starts with: the policy
#: runs (``active``), or runs and holds back for a while (its STORM breaker, memory, the cluster).
RUNNING = ("active", "storm", "oom", "cluster-down")


class Retry(Exception):
    """Raise it from a handler to give the entry back (``RECLAIM.NACK ... DELAY delay_ms``): it
    is delivered again ``delay_ms`` from now (0: at once), to this worker or another. The attempt
    counts as a delivery. A delay the server cannot keep (longer than the entry's lease on a
    module without long delays) is refused: logged, counted as ``refused``, and the entry comes
    back when its lease ends."""

    def __init__(self, delay_ms: int = 0, reason: str = "") -> None:
        super().__init__(reason or f"retry in {delay_ms} ms")
        self.delay_ms = delay_ms
        self.reason = reason


class Permanent(Exception):
    """Raise it from a handler to dead-letter the entry at once (``RECLAIM.TERM ... REASON
    reason``): never retried, whatever its delivery count. The DLQ entry's ``reclaim-reason`` is
    ``reason`` (``term`` when empty). Needs a policy with a DLQ; without one (or while the policy
    is paused or its STORM breaker is open) the TERM is refused (counted as ``refused``) and the
    entry given back instead, as after any other exception."""

    def __init__(self, reason: Name = "") -> None:
        super().__init__(reason)
        self.reason = reason


class PolicyError(RuntimeError):
    """A worker's stream and group have no running policy (none, paused, or waiting for its
    stream or group: a typo); raised by ``run`` at start unless ``wait_for_policy``."""


@dataclass(frozen=True)
class Context:
    """What a handler that takes a third argument gets: ``handler(entry_id, fields, ctx)``."""

    stream: Name
    group: Name
    consumer: Name
    #: This delivery's number: 1 on the first, MAX-DELIVERIES on the last (None: unknown).
    attempt: Optional[int]


@dataclass(frozen=True)
class Outcome:
    """What the worker does with an entry once its handler is done."""

    #: ``ack`` (XACK), ``nack`` (RECLAIM.NACK) or ``term`` (RECLAIM.TERM).
    action: str
    #: The DELAY of a nack: ms, or None for "when its lease would end".
    delay: Optional[int] = None
    #: The REASON of a term, or the exception of a failed handler.
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


def reason_text(error: BaseException) -> str:
    """The NACK REASON of a failed handler: the exception's type and message, at most
    ``REASON_MAX`` characters."""
    message = error.reason if isinstance(error, Retry) else str(error)
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return text if len(text) <= REASON_MAX else text[: REASON_MAX - 3] + "..."


class Held:
    """The entries a worker holds: read and not settled yet (an entry whose handler returned is
    held until its XACK is answered). Thread-safe (the heartbeat thread renews them while the
    worker's thread handles them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: dict[Any, float] = {}  # entry ID -> when it was read (time.monotonic())
        self._done: set[Any] = set()  # handled, acknowledgement on its way

    def add(self, ids: list[Any]) -> None:
        now = time.monotonic()
        with self._lock:
            for i in ids:
                self._since[i] = now

    def done(self, entry_id: Any) -> None:
        with self._lock:
            self._done.add(entry_id)

    def release(self, ids: Iterable[Any]) -> None:
        with self._lock:
            for i in ids:
                self._since.pop(i, None)
                self._done.discard(i)

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
        another worker or the policy) and let go, but for those handled (their XACK may have
        come first). Returns those lost."""
        got = set(renewed)
        with self._lock:
            lost = [i for i in asked if i not in got and i in self._since and i not in self._done]
            for i in lost:
                del self._since[i]
        return lost

    def unhandled(self) -> list[Any]:
        """The entries held whose handler has not run."""
        with self._lock:
            return [i for i in self._since if i not in self._done]

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


# -- the steps ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pipeline:
    """A step: send these commands in one round trip; the reply is the list of their parsed
    replies, a command that failed by its RedisError in its place."""

    commands: tuple[Command[Any], ...]


class Call:
    """A step: call the handler; the reply is None, or the Exception it raised. (A plain class
    with slots: one is made per entry.)"""

    __slots__ = ("entry_id", "fields", "ctx")

    def __init__(self, entry_id: Any, fields: Fields, ctx: Optional[Context]) -> None:
        self.entry_id, self.fields, self.ctx = entry_id, fields, ctx


@dataclass(frozen=True)
class Pending:
    """A step: ``client.xpending_range(stream, group, first, last, count, consumer)``; the reply
    is redis-py's list of dicts."""

    first: Any
    last: Any
    count: int


@dataclass(frozen=True)
class Pause:
    """A step: wait ``seconds`` (less when the worker is stopped meanwhile)."""

    seconds: float


Step = Union[Command[Any], Pipeline, Call, Pending, Pause]

#: A sequence of steps without I/O: it yields each step and gets its reply back (or, when a
#: command failed, its RedisError thrown in); its return value is the result.
Steps = Generator[Step, Any, R]

#: An entry as the loop keeps it: ID, fields, delivery count (None: unknown).
Entry = tuple[Any, Fields, Optional[int]]


def _flatten(reply: Any) -> Iterable[str]:
    if isinstance(reply, Mapping):
        for k, v in reply.items():
            yield from _flatten(k)
            yield from _flatten(v)
    elif isinstance(reply, (list, tuple)):
        for v in reply:
            yield from _flatten(v)
    elif isinstance(reply, (str, bytes)):
        yield c.text(reply).lower()


def has_token(token: str) -> Callable[[Any], bool]:
    """A parser of ``COMMAND DOCS`` that tells whether an argument's token is ``token``."""
    return lambda reply: token.lower() in set(_flatten(reply))


def meta_batches(reply: Any) -> list[Entry]:
    """The entries of a ``RECLAIM.READGROUP ... DELIVERY-METADATA`` reply (RESP2 or RESP3, raw):
    each ``[id, fields, ms-since-last-delivery, deliveries-before]``; the attempt is the count + 1."""
    out: list[Entry] = []
    pairs: Iterable[Any] = reply.items() if isinstance(reply, Mapping) else (reply or [])
    for _stream, entries in pairs:
        for e in entries or []:
            if e is None:
                continue
            values = e[1]
            if isinstance(values, Mapping):
                fields = dict(values)
            else:
                values = values or []
                fields = {values[i]: values[i + 1] for i in range(0, len(values), 2)}
            # The deliveries before this one (Redis 8.4's XREADGROUP ... CLAIM: 0 for a new entry).
            out.append((e[0], fields, int(e[3]) + 1 if len(e) > 3 and e[3] is not None else None))
    return out


def plain_batches(reply: Any) -> list[Entry]:
    return [(i, f, None) for _s, entries in c.batches(reply) for i, f in entries]


def _id_key(entry_id: Any) -> tuple[int, int]:
    ms, _, seq = c.text(entry_id).partition("-")
    return int(ms), int(seq or 0)


class Loop:
    """The worker's loop, the same for Worker and AsyncWorker, as steps."""

    def __init__(
        self,
        stream: Name,
        group: Name,
        consumer: Name,
        *,
        count: int,
        block_ms: int,
        failure_delay_ms: Optional[int],
        stop_after_idle_ms: Optional[int],
        wait_for_policy: bool,
        wants_ctx: bool,
        counts: Counter[str],
        held: Held,
        stop: threading.Event,
        pipelined: bool = True,
    ) -> None:
        self.stream, self.group, self.consumer = stream, group, consumer
        self.count, self.block_ms = count, block_ms
        self.failure_delay_ms = failure_delay_ms
        self.stop_after_idle_ms = stop_after_idle_ms
        self.wait_for_policy = wait_for_policy
        self.wants_ctx = wants_ctx
        self.counts, self.held, self._stop = counts, held, stop
        #: Whether commands go together in one round trip (not in a cluster, where each goes to
        #: its own node: one after the other).
        self.pipelined = pipelined
        self.has_reason = False
        self.has_meta = False
        self._acks: list[Any] = []

    # -- start ---------------------------------------------------------------------------------

    def start(self) -> Steps[Optional[Policy]]:
        """Checks the policy (waiting for it with ``wait_for_policy``) and what the server can do
        (NACK REASON, READGROUP DELIVERY-METADATA). Returns the policy (None: stopped meanwhile,
        or the user may not read it)."""
        policy = yield from self._policy()
        docs = yield from self._features()
        self.has_reason = docs[0] is True
        self.has_meta = docs[1] is True
        return policy

    def _features(self) -> Steps[list[Any]]:
        """Whether the module has NACK REASON and READGROUP DELIVERY-METADATA (``COMMAND DOCS``).
        A client that cannot send the probe (redis-py 8.1.0's asyncio ``RedisCluster`` raises
        TypeError on the bytes command name) leaves both assumed absent, with a warning."""
        # b"COMMAND": redis-py parses a reply of "COMMAND" as COMMAND INFO's; not one of b"COMMAND".
        try:
            docs: list[Any] = yield from self._together(
                (
                    Command((b"COMMAND", "DOCS", "RECLAIM.NACK"), None, has_token("REASON")),
                    Command((b"COMMAND", "DOCS", "RECLAIM.READGROUP"), None, has_token("DELIVERY-METADATA")),
                )
            )
        except (TypeError, ValueError, AttributeError) as e:
            log.warning(
                "could not ask COMMAND DOCS (%s: %s): working without NACK REASON and "
                "READGROUP DELIVERY-METADATA (attempt numbers from XPENDING)", type(e).__name__, e,
            )
            return [False, False]
        return docs

    def _policy(self) -> Steps[Optional[Policy]]:
        logged = False
        while not self._stop.is_set():
            try:
                policy: Optional[Policy] = yield c.policy_get(self.stream, self.group)
            except NoPermissionError as e:  # a user with the worker commands only
                log.warning(
                    "cannot check the policy of stream %r group %r (%s): starting without the check "
                    "(grant +reclaim.policy|get for it)", entry_name(self.stream), entry_name(self.group), e,
                )
                return None
            problem = self._problem(policy)
            if problem is None:
                return policy
            if not self.wait_for_policy:
                raise PolicyError(problem + " (Worker(..., wait_for_policy=True) waits for it)")
            if not logged:
                log.warning("%s: waiting for it", problem)
                logged = True
            yield Pause(1.0)
        return None

    def _problem(self, policy: Optional[Policy]) -> Optional[str]:
        where = f"stream {entry_name(self.stream)!r} group {entry_name(self.group)!r}"
        if policy is None:
            return f"no redis-reclaim policy for {where} (RECLAIM.POLICY SET it first)"
        if policy.state == "paused":
            return f"the policy of {where} is paused"
        if not policy.status.startswith(RUNNING):
            return f"the policy of {where} does not run: {policy.status}"
        return None

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> Steps[None]:
        """Reads and handles entries until stopped or idle ``stop_after_idle_ms``; then
        acknowledges what was handled and gives back what was not."""
        last = time.monotonic()
        pause = FIRST_PAUSE_S
        try:
            while not self._stop.is_set():
                try:
                    batch = yield from self._read()
                except TRANSIENT as e:
                    log.warning("reading %r failed (%s): again in %.1f s", self.stream, e, pause)
                    yield Pause(pause)
                    pause = min(pause * 2, MAX_PAUSE_S)
                    continue
                pause = FIRST_PAUSE_S
                if batch:
                    yield from self._handle(batch)
                    last = time.monotonic()
                elif self.stop_after_idle_ms is not None and (
                    time.monotonic() - last >= self.stop_after_idle_ms / 1000
                ):
                    break
        finally:
            yield from self.finish()

    def finish(self) -> Steps[None]:
        """Acknowledges what was handled, gives back what was not."""
        if self._acks:
            acks, self._acks = self._acks, []
            try:
                n = yield c.Command(("XACK", self.stream, self.group, *acks), self.stream, int)
            except RedisError as e:
                n = e
            self._acked(acks, n)
        yield from self.give_back(self.held.unhandled())
        self.held.release(self.held.all())

    def _read_command(self) -> Command[list[Entry]]:
        args, key = c.readgroup_args(self.group, self.consumer, [self.stream], self.count, self.block_ms)
        if self.has_meta:
            at = args.index("STREAMS")
            return Command((*args[:at], "DELIVERY-METADATA", *args[at:]), key, meta_batches)
        return Command(args, key, plain_batches)

    def _read(self) -> Steps[list[Entry]]:
        """One RECLAIM.READGROUP, pipelined after the XACK of what the last batch handled."""
        read = self._read_command()
        if not self._acks:
            got: list[Entry] = yield read
            return got
        acks, self._acks = self._acks, []
        xack = Command(("XACK", self.stream, self.group, *acks), self.stream, int)
        try:
            replies = yield from self._together((xack, read))
        except RedisError as e:
            self._acked(acks, e)
            raise
        self._acked(acks, replies[0])
        if isinstance(replies[1], BaseException):
            raise replies[1]
        batch: list[Entry] = replies[1]
        return batch

    def _together(self, commands: tuple[Command[Any], ...]) -> Steps[list[Any]]:
        """The replies of ``commands`` (a RedisError in the place of one that failed): in one
        round trip, or one after the other when not ``pipelined``."""
        if self.pipelined:
            replies: list[Any] = yield Pipeline(commands)
            return replies
        out: list[Any] = []
        for command in commands:
            try:
                out.append((yield command))
            except RedisError as e:
                out.append(e)
        return out

    def _acked(self, ids: list[Any], reply: Any) -> None:
        self.held.release(ids)
        if isinstance(reply, BaseException):
            log.warning(
                "could not acknowledge %d entries (%s): they stay pending, and come back when their lease ends",
                len(ids), reply,
            )
            return
        self.counts["acked"] += int(reply)
        if int(reply) < len(ids):
            self.counts["lost"] += len(ids) - int(reply)
            log.warning(
                "%d entries were no longer ours when acknowledged (their lease ran out)", len(ids) - int(reply)
            )

    def _handle(self, batch: list[Entry]) -> Steps[None]:
        self.held.add([e[0] for e in batch])
        if self.wants_ctx and not self.has_meta:
            batch = yield from self._with_attempts(batch)
        for entry_id, fields, attempt in batch:
            if self._stop.is_set():
                return  # the rest is given back by finish()
            if not self.held.holds(entry_id):
                self.counts["lost"] += 1
                log.warning("entry %s lost before it was handled (its lease ran out)", entry_name(entry_id))
                continue
            ctx = Context(self.stream, self.group, self.consumer, attempt) if self.wants_ctx else None
            error = yield Call(entry_id, fields, ctx)
            if error is None:
                self.held.done(entry_id)
                self._acks.append(entry_id)
                continue
            yield from self.settle(entry_id, outcome(error, self.failure_delay_ms))
            self.held.release((entry_id,))

    def _with_attempts(self, batch: list[Entry]) -> Steps[list[Entry]]:
        """The batch with each entry's delivery count, from one XPENDING of this consumer."""
        keys = sorted((_id_key(e[0]), e[0]) for e in batch)
        try:
            pel = yield Pending(keys[0][1], keys[-1][1], len(batch) + 100)
        except RedisError as e:
            log.warning("could not read the delivery counts (%s)", e)
            return batch
        counts = {p["message_id"]: int(p["times_delivered"]) for p in pel}
        return [(i, f, counts.get(i, a)) for i, f, a in batch]

    # -- settling ------------------------------------------------------------------------------

    def settle(self, entry_id: Any, o: Outcome) -> Steps[None]:
        """RECLAIM.TERM or RECLAIM.NACK the entry, as its handler's outcome says. An entry that
        cannot be settled for a transient error stays pending (its lease brings it back)."""
        try:
            if o.action == "term":
                yield from self._term(entry_id, o.reason)
                return
            if not isinstance(o.reason, Retry):
                log.warning("entry %s failed: %r", entry_name(entry_id), o.reason, exc_info=o.reason)
            yield from self._nack(entry_id, o.delay, o.reason)
        except TRANSIENT as e:
            log.warning(
                "could not settle entry %s (%s): it stays pending, and comes back when its lease ends",
                entry_name(entry_id), e,
            )

    def _refused(self, what: str, entry_id: Any, error: BaseException, then: str) -> None:
        self.counts["refused"] += 1
        log.error("%s of entry %s refused (%s): %s", what, entry_name(entry_id), error, then)

    def _term(self, entry_id: Any, reason: Optional[Name]) -> Steps[None]:
        try:
            done = yield c.term(self.stream, self.group, self.consumer, entry_id, reason=reason)
            self.counts["dead-lettered" if done else "lost"] += 1
        except ResponseError as e:
            self._refused("RECLAIM.TERM", entry_id, e, "could not dead-letter it; giving it back")
            yield from self._nack(entry_id, self.failure_delay_ms, None, counted=False)

    def _nack_command(self, entry_id: Any, delay: int, error: Any) -> Command[int]:
        args: tuple[Any, ...] = ("RECLAIM.NACK", self.stream, self.group, self.consumer, entry_id, "DELAY", delay)
        if self.has_reason and isinstance(error, BaseException):
            args += ("REASON", reason_text(error))
        return Command(args, self.stream, int)

    def _nack(self, entry_id: Any, delay: Optional[int], error: Any, counted: bool = True) -> Steps[None]:
        """Gives the entry back with ``delay`` ms (None: when its lease would end). A Retry whose
        delay the server refuses is counted as ``refused``, never cut short."""
        retry = isinstance(error, Retry)
        try:
            done = yield self._nack_command(entry_id, LEASE_DELAY if delay is None else delay, error)
        except ResponseError as e:
            due = c.due_from_error(str(e))
            if retry or due is None:
                what = f"Retry({delay} ms)" if retry else "RECLAIM.NACK"
                self._refused(what, entry_id, e, "it stays pending, and comes back when its lease ends")
                return
            done = yield self._nack_command(entry_id, due, error)
        if done and counted:
            self.counts["retried" if retry else "failed"] += 1
        elif not done:
            self.counts["lost"] += 1
            log.warning("entry %s was no longer ours when given back (its lease ran out)", entry_name(entry_id))

    def give_back(self, ids: list[Any]) -> Steps[None]:
        """Gives back at once the entries held and not handled (at a stop, or after an error)."""
        if not ids:
            return
        try:
            yield c.nack(self.stream, self.group, self.consumer, *ids)
            self.counts["given-back"] += len(ids)
        except RedisError as e:
            log.warning("could not give back %d entries (%s): they stay pending", len(ids), e)
        finally:
            self.held.release(ids)

    # -- the heartbeat -------------------------------------------------------------------------

    def beat(self, max_hold_s: Optional[float], every_s: float) -> Steps[None]:
        """Renews the leases of the entries held, with one RECLAIM.EXTEND."""
        ids = self.held.to_renew(max_hold_s)
        if not ids:
            return
        try:
            renewed = yield c.extend(self.stream, self.group, self.consumer, *ids)
        except ResponseError as e:
            self.counts["refused"] += 1
            log.error("RECLAIM.EXTEND of %d entries refused: %s", len(ids), e)
            return
        except RedisError as e:
            log.warning("renewing %d leases failed (%s): again in %.1f s", len(ids), e, every_s)
            return
        for i in self.held.renewed(ids, renewed):
            log.warning("entry %s is no longer ours (its lease ran out)", entry_name(i))


def wants_context(handler: Callable[..., Any]) -> bool:
    """Whether ``handler`` takes a third positional argument (the :class:`Context`)."""
    try:
        params = inspect.signature(handler).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3 or any(p.kind == p.VAR_POSITIONAL for p in params)


H = TypeVar("H")


class WorkerBase(Generic[H]):
    """What Worker and AsyncWorker share: their options, counts, entries held and stop; ``H`` is
    the handler's type. A subclass sets ``reclaim`` (its command client) in ``_connect``."""

    def __init__(
        self,
        client: Any,
        stream: Name,
        group: Name,
        consumer: Name,
        handler: H,
        *,
        count: int = 10,
        block_ms: int = 1000,
        failure_delay_ms: Optional[int] = None,
        heartbeat_ms: Optional[int] = None,
        max_hold_ms: Optional[int] = None,
        stop_after_idle_ms: Optional[int] = None,
        handle_signals: bool = True,
        wait_for_policy: bool = False,
    ) -> None:
        self.client = client
        self.handler: Any = handler
        self._connect(client)
        self.stream, self.group, self.consumer = stream, group, consumer
        self.count, self.block_ms = count, block_ms
        self.failure_delay_ms = failure_delay_ms
        self.heartbeat_ms = heartbeat_ms
        self.max_hold_ms = max_hold_ms
        self.stop_after_idle_ms = stop_after_idle_ms
        self.handle_signals = handle_signals
        self.wait_for_policy = wait_for_policy
        self.counts: Counter[str] = Counter()
        self._stop = threading.Event()
        self._held = Held()

    #: The command client (:class:`~redis_reclaim.Reclaim` or its asyncio twin), set by ``_connect``.
    reclaim: Any

    def _connect(self, client: Any) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        """Asks ``run`` to return after the entry in hand. Safe from any thread or a signal."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def held(self) -> list[Any]:
        """The IDs of the entries the worker holds now (read, not settled yet)."""
        return self._held.all()

    def _loop(self, handler: Callable[..., Any]) -> Loop:
        return Loop(
            self.stream, self.group, self.consumer,
            count=self.count, block_ms=self.block_ms, failure_delay_ms=self.failure_delay_ms,
            stop_after_idle_ms=self.stop_after_idle_ms, wait_for_policy=self.wait_for_policy,
            wants_ctx=wants_context(handler), counts=self.counts, held=self._held, stop=self._stop,
            pipelined=not self.reclaim.is_cluster,
        )

    def _every_s(self, policy: Optional[Policy]) -> float:
        return (self.heartbeat_ms or heartbeat_ms(None if policy is None else policy.min_idle)) / 1000

    @property
    def _max_hold_s(self) -> Optional[float]:
        return None if self.max_hold_ms is None else self.max_hold_ms / 1000

    def _pending_args(self, step: Pending) -> dict[str, Any]:
        return {
            "name": self.stream, "groupname": self.group, "min": step.first, "max": step.last,
            "count": step.count, "consumername": self.consumer,
        }
