"""``Worker``: a consumer of a stream's group on RECLAIM.READGROUP, with the handler's outcomes
settled through XACK, RECLAIM.NACK and RECLAIM.TERM, leases kept by a heartbeat thread, and a
clean stop on SIGTERM. Its loop is ``_worker.Loop``'s steps, run here with a redis-py client."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any, Callable, Optional, TypeVar, Union


from . import _steps
from ._commands import Command, Fields
from ._worker import Call, Context, Pause, Pending, Pipeline, Step, Steps, WorkerBase, log
from .client import Reclaim

R = TypeVar("R")

#: A handler: called with the entry's ID and fields (as the client returns them: ``str`` with
#: ``decode_responses=True``, else ``bytes``), and a :class:`~redis_reclaim.Context` when it takes
#: a third argument. What it returns is ignored.
Handler = Union[Callable[[Any, Fields], object], Callable[[Any, Fields, Context], object]]


class Worker(WorkerBase[Handler]):
    """Consumes ``stream`` in ``group`` as ``consumer``, one entry at a time, until :meth:`stop`
    or SIGTERM (or SIGINT).

    - At start it checks the policy of ``stream`` and ``group``: none, a paused one or one that
      does not run (a group that does not exist) raises :class:`~redis_reclaim.PolicyError`;
      with ``wait_for_policy=True`` it logs that once and waits for the policy.
    - It reads with ``RECLAIM.READGROUP`` (``count`` entries, waiting up to ``block_ms``): new
      entries, and those due for redelivery under the stream's policy (left by a worker that
      crashed or gave them back).
    - It calls ``handler(entry_id, fields)`` (``handler(entry_id, fields, ctx)`` for a handler
      that takes a third argument: a :class:`~redis_reclaim.Context` with the attempt number).
      When the handler returns, the entry is acknowledged: one ``XACK`` for the entries of a
      batch, sent with the next read; nothing is acknowledged before its handler returned.
    - ``raise Retry(delay_ms)``: the entry is given back (``RECLAIM.NACK ... DELAY delay_ms``,
      with ``REASON`` where the server takes one) and delivered again ``delay_ms`` from now; a
      delay the server refuses is counted as ``refused`` and the entry comes back with its lease.
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
    ``failed`` (other exceptions), ``refused`` (a NACK, TERM or EXTEND the server answered with an
    error, logged), ``given-back`` (held and not started at a stop), and ``lost``:
    entries that were no longer this consumer's when it came to them or settled them (their lease
    had run out and another worker took them; with the heartbeat, only after ``max_hold_ms`` or
    when Redis could not be reached for a whole lease).
    """

    reclaim: Reclaim

    def _connect(self, client: Any) -> None:
        self.reclaim = Reclaim(client)

    def deliveries(self, entry_id: Any) -> Optional[int]:
        """How many times the entry was delivered (1 on its first delivery), as its PEL entry at
        this consumer says; None when this consumer does not hold it. One ``XPENDING``."""
        pel = self.client.xpending_range(
            self.stream, self.group, min=entry_id, max=entry_id, count=1, consumername=self.consumer
        )
        return int(pel[0]["times_delivered"]) if pel else None

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> None:
        """Checks the policy, then reads and handles entries until :meth:`stop`, a signal or
        ``stop_after_idle_ms``. Raises :class:`~redis_reclaim.PolicyError` when the stream and
        group have no running policy (unless ``wait_for_policy``)."""
        self._stop.clear()
        loop = self._loop(self.handler)
        restore = self._install_signals()
        try:
            policy = self._drive(loop.start())
            beat_done = threading.Event()
            beat = threading.Thread(
                target=self._beat, args=(loop, self._every_s(policy), beat_done),
                name="redis-reclaim heartbeat", daemon=True,
            )
            beat.start()
            try:
                self._drive(loop.run())
            finally:
                beat_done.set()
                beat.join()
        finally:
            restore()

    # -- running the steps ---------------------------------------------------------------------

    def _drive(self, steps: Steps[R]) -> R:
        """Runs ``steps`` (see ``_worker.Steps``) with this worker's client and handler."""
        return _steps.run(steps, self._do)

    def _do(self, step: Step) -> Any:
        if type(step) is Call:
            try:
                if step.ctx is None:
                    self.handler(step.entry_id, step.fields)
                else:
                    self.handler(step.entry_id, step.fields, step.ctx)
            except Exception as e:  # noqa: BLE001 - every failure of the handler is an outcome
                return e
            return None
        if isinstance(step, Command):
            return self.reclaim.execute(step)
        if isinstance(step, Pipeline):
            return self._pipeline(step.commands)
        if isinstance(step, Pending):
            return self.client.xpending_range(**self._pending_args(step))
        if isinstance(step, Pause):
            self._stop.wait(step.seconds)
        return None

    def _pipeline(self, commands: tuple[Command[Any], ...]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command.args)
        raw = pipe.execute(raise_on_error=False)
        return [r if isinstance(r, Exception) else cmd.parse(r) for cmd, r in zip(commands, raw)]

    # -- the heartbeat -------------------------------------------------------------------------

    def _beat(self, loop: Any, every_s: float, done: threading.Event) -> None:
        while not done.wait(every_s):
            try:
                self._drive(loop.beat(self._max_hold_s, every_s))
            except Exception as e:  # noqa: BLE001 - the heartbeat must go on
                log.warning("renewing leases failed (%s): again in %.1f s", e, every_s)

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
