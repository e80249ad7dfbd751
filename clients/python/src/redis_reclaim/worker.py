"""``Worker``: a consumer of a stream's group on RECLAIM.READGROUP, with the handler's outcomes
settled through XACK, RECLAIM.NACK and RECLAIM.TERM, leases kept by a heartbeat thread, and a
clean stop on SIGTERM."""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from types import FrameType
from typing import Any, Callable, Optional, TypeVar, cast

from redis.exceptions import RedisError

from ._commands import Fields, Name
from ._worker import (
    FIRST_PAUSE_S,
    MAX_PAUSE_S,
    TRANSIENT,
    Held,
    Settler,
    Steps,
    entry_name,
    heartbeat_ms,
    log,
    outcome,
)
from .client import Reclaim

R = TypeVar("R")

#: A handler: called with the entry's ID and fields (as the client returns them: ``str`` with
#: ``decode_responses=True``, else ``bytes``). What it returns is ignored.
Handler = Callable[[Any, Fields], object]


class Worker:
    """Consumes ``stream`` in ``group`` as ``consumer``, one entry at a time, until :meth:`stop`
    or SIGTERM (or SIGINT).

    - It reads with ``RECLAIM.READGROUP`` (``count`` entries, waiting up to ``block_ms``): new
      entries, and those due for redelivery under the stream's policy (left by a worker that
      crashed or gave them back).
    - It calls ``handler(entry_id, fields)``. When the handler returns, the entry is acknowledged
      (``XACK``).
    - ``raise Retry(delay_ms)``: the entry is given back (``RECLAIM.NACK ... DELAY delay_ms``)
      and delivered again ``delay_ms`` from now (at most its lease).
    - ``raise Permanent(reason)``: the entry is dead-lettered at once (``RECLAIM.TERM ... REASON
      reason``).
    - Any other exception is logged and the entry given back for its next attempt, which counts
      as a delivery: after ``failure_delay_ms`` (None, the default: when its lease would end,
      ``MIN-IDLE`` or its ``BACKOFF`` step, so the policy's backoff spaces the attempts; 0: at
      once). After ``MAX-DELIVERIES`` deliveries the module dead-letters it.
    - While the worker holds entries (the one in hand and the rest of its batch), a heartbeat
      thread renews their leases (``RECLAIM.EXTEND``) every ``heartbeat_ms`` (default: a third
      of the policy's ``MIN-IDLE``), so a handler may run longer than ``MIN-IDLE`` without its
      entry being handed to another worker. ``max_hold_ms`` bounds that: an entry held longer is
      no longer renewed (a hung handler then loses it to another worker).
    - :meth:`stop`, SIGTERM or SIGINT (when ``run`` is called from the main thread and
      ``handle_signals`` is true): the worker finishes the entry in hand, gives back at once what
      it holds and has not started (``RECLAIM.NACK``), and ``run`` returns, holding nothing. A
      second signal acts as it did before ``run`` (SIGINT raises KeyboardInterrupt, SIGTERM
      ends the process). It notices a stop between entries, and while it waits for entries
      within ``block_ms``.
    - ``stop_after_idle_ms``: ``run`` also returns once nothing has come for that long (a batch
      job that drains a stream).

    ``counts`` tells what it did: ``acked``, ``dead-lettered`` (Permanent), ``retried`` (Retry),
    ``failed`` (other exceptions), ``given-back`` (held and not started at a stop), and ``lost``:
    entries that were no longer this consumer's when it came to them or settled them (their lease
    had run out and another worker took them; with the heartbeat, only after ``max_hold_ms`` or
    when Redis could not be reached for a whole lease).
    """

    def __init__(
        self,
        client: Any,
        stream: Name,
        group: Name,
        consumer: Name,
        handler: Handler,
        *,
        count: int = 10,
        block_ms: int = 1000,
        failure_delay_ms: Optional[int] = None,
        heartbeat_ms: Optional[int] = None,
        max_hold_ms: Optional[int] = None,
        stop_after_idle_ms: Optional[int] = None,
        handle_signals: bool = True,
    ) -> None:
        self.client = client
        self.reclaim = Reclaim(client)
        self.stream, self.group, self.consumer = stream, group, consumer
        self.handler = handler
        self.count, self.block_ms = count, block_ms
        self.failure_delay_ms = failure_delay_ms
        self.heartbeat_ms = heartbeat_ms
        self.max_hold_ms = max_hold_ms
        self.stop_after_idle_ms = stop_after_idle_ms
        self.handle_signals = handle_signals
        self.counts: Counter[str] = Counter()
        self._stop = threading.Event()
        self._held = Held()
        self._settler = Settler(stream, group, consumer, failure_delay_ms, self.counts)

    # -- control -------------------------------------------------------------------------------

    def stop(self) -> None:
        """Asks ``run`` to return after the entry in hand. Safe from any thread or a signal."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def held(self) -> list[Any]:
        """The IDs of the entries the worker holds now (read, not settled yet)."""
        return self._held.all()

    def deliveries(self, entry_id: Any) -> Optional[int]:
        """How many times the entry was delivered (1 on its first delivery), as its PEL entry at
        this consumer says; None when this consumer does not hold it. One ``XPENDING``."""
        pel = self.client.xpending_range(
            self.stream, self.group, min=entry_id, max=entry_id, count=1, consumername=self.consumer
        )
        return int(pel[0]["times_delivered"]) if pel else None

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> None:
        """Reads and handles entries until :meth:`stop`, a signal or ``stop_after_idle_ms``."""
        self._stop.clear()
        every_s = (self.heartbeat_ms or heartbeat_ms(self._min_idle())) / 1000
        beat_done = threading.Event()
        beat = threading.Thread(
            target=self._beat, args=(every_s, beat_done), name="redis-reclaim heartbeat", daemon=True
        )
        restore = self._install_signals()
        beat.start()
        last = time.monotonic()
        pause = FIRST_PAUSE_S
        try:
            while not self._stop.is_set():
                try:
                    batch = self._read()
                except TRANSIENT as e:
                    log.warning("reading %r failed (%s): again in %.1f s", self.stream, e, pause)
                    self._stop.wait(pause)
                    pause = min(pause * 2, MAX_PAUSE_S)
                    continue
                pause = FIRST_PAUSE_S
                if batch:
                    self._handle_batch(batch)
                    last = time.monotonic()
                elif self.stop_after_idle_ms is not None and (
                    time.monotonic() - last >= self.stop_after_idle_ms / 1000
                ):
                    break
        finally:
            beat_done.set()
            beat.join()
            try:
                self._give_back(self._held.all())
            finally:
                restore()

    def _read(self) -> list[tuple[Any, Fields]]:
        got = self.reclaim.read_entries(
            self.group, self.consumer, [self.stream], count=self.count, block=self.block_ms
        )
        return [e for _stream, entries in got for e in entries]

    def _handle_batch(self, batch: list[tuple[Any, Fields]]) -> None:
        self._held.add([entry_id for entry_id, _ in batch])
        for entry_id, fields in batch:
            if self._stop.is_set():
                return  # the rest is given back by run()
            if not self._held.holds(entry_id):
                self.counts["lost"] += 1
                log.warning("entry %s lost before it was handled (its lease ran out)", entry_name(entry_id))
                continue
            error: Optional[Exception] = None
            try:
                self.handler(entry_id, fields)
            except Exception as e:  # noqa: BLE001 - every failure of the handler is an outcome
                error = e
            self._run_steps(self._settler.settle(entry_id, outcome(error, self.failure_delay_ms)))
            self._held.release(entry_id)

    # -- sending the steps of the shared logic ------------------------------------------------

    def _run_steps(self, steps: Steps[R]) -> R:
        """Sends the commands of ``steps`` (see ``_worker.Steps``) with this worker's client."""
        reply: Any = None
        error: Optional[RedisError] = None
        while True:
            try:
                command = steps.send(reply) if error is None else steps.throw(error)
            except StopIteration as stop:
                return cast(R, stop.value)
            try:
                reply, error = self.reclaim.execute(command), None
            except RedisError as e:
                reply, error = None, e

    def _give_back(self, ids: list[Any]) -> None:
        self._run_steps(self._settler.give_back(ids))
        for i in ids:
            self._held.release(i)

    # -- the heartbeat -------------------------------------------------------------------------

    def _beat(self, every_s: float, done: threading.Event) -> None:
        max_hold_s = None if self.max_hold_ms is None else self.max_hold_ms / 1000
        while not done.wait(every_s):
            ids = self._held.to_renew(max_hold_s)
            if not ids:
                continue
            try:
                renewed = self.reclaim.extend(self.stream, self.group, self.consumer, *ids)
            except RedisError as e:
                log.warning("renewing %d leases failed (%s): again in %.1f s", len(ids), e, every_s)
                continue
            for i in self._held.renewed(ids, renewed):
                log.warning("entry %s is no longer ours (its lease ran out)", entry_name(i))

    def _min_idle(self) -> Optional[int]:
        try:
            p = self.reclaim.policy_get(self.stream, self.group)
        except RedisError:
            return None
        return None if p is None else p.min_idle

    def _install_signals(self) -> Callable[[], None]:
        """Makes SIGTERM and SIGINT stop the worker (main thread only); returns the undo."""
        if not self.handle_signals or threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}

        def restore() -> None:
            for s, h in previous.items():
                signal.signal(s, h)

        def on_signal(signum: int, frame: Optional[FrameType]) -> None:
            log.info("signal %d: stopping after the entry in hand", signum)
            self.stop()
            restore()  # a second signal acts as before

        for s in previous:
            signal.signal(s, on_signal)
        return restore
