"""The asyncio twins: ``AsyncReclaim`` (the commands, for ``redis.asyncio.Redis`` and
``redis.asyncio.RedisCluster``) and ``AsyncWorker`` (the worker, same contract as
:class:`redis_reclaim.Worker`)."""

from __future__ import annotations

import asyncio
import functools
import inspect
import signal
import threading
from typing import (
    Any,
    Awaitable,
    Callable,
    Concatenate,
    Coroutine,
    Optional,
    ParamSpec,
    TypeVar,
    Union,
)

from redis.asyncio.cluster import RedisCluster

from . import _cluster, _steps
from . import _commands as c
from ._commands import Command, Fields, Name
from ._worker import Call, Context, Pause, Pending, Pipeline, Step, Steps, WorkerBase, log
from .client import xreadgroup_parser

P = ParamSpec("P")
R = TypeVar("R")


def _method(
    build: Callable[P, Command[R]],
) -> Callable[Concatenate[AsyncReclaim, P], Coroutine[Any, Any, R]]:
    """A coroutine method of AsyncReclaim that sends the command ``build`` makes."""

    @functools.wraps(build)
    async def method(self: AsyncReclaim, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.execute(build(*args, **kwargs))

    return method


class AsyncReclaim:
    """:class:`redis_reclaim.Reclaim` for ``redis.asyncio`` clients: the same methods, as
    coroutines::

        from redis.asyncio import Redis
        from redis_reclaim.asyncio import AsyncReclaim

        reclaim = AsyncReclaim(Redis(decode_responses=True))
        await reclaim.policy_set("orders", "workers", min_idle=30_000)
    """

    def __init__(self, client: Any) -> None:
        self.client: Any = client
        self._cluster = isinstance(client, RedisCluster)

    @property
    def is_cluster(self) -> bool:
        """Whether the client is a ``RedisCluster``."""
        return self._cluster

    async def execute(self, command: Command[R]) -> R:
        """Sends one command and parses its reply (routed by its key in a cluster)."""
        if not self._cluster:
            return command.parse(await self.client.execute_command(*command.args))
        if command.key is not None:
            return command.parse(await self._send_to_key(command.args, command.key))
        return command.parse(await self._send_keyless(command.args))

    async def _send_to_key(self, args: tuple[Any, ...], key: Name) -> Any:
        return await self._run(_cluster.to_key(self.client, args, key))

    async def _send_keyless(self, args: tuple[Any, ...]) -> Any:
        return await self._run(_cluster.keyless(self.client, args))

    async def _run(self, steps: _cluster.Steps) -> Any:
        """As :meth:`redis_reclaim.Reclaim._run`, with the asyncio client."""
        return await _steps.run_async(steps, self._do_cluster)

    async def _do_cluster(self, step: _cluster.Send | _cluster.Refresh) -> Any:
        if isinstance(step, _cluster.Send):
            return await self.client.execute_command(*step.args, target_nodes=step.node)
        await self.client.nodes_manager.initialize()
        return None

    policy_set = _method(c.policy_set)
    policy_get = _method(c.policy_get)
    policy_del = _method(c.policy_del)
    policy_pause = _method(c.policy_pause)
    policy_resume = _method(c.policy_resume)
    policy_list = _method(c.policy_list)
    policy_export = _method(c.policy_export)
    policy_import = _method(c.policy_import)
    sweep = _method(c.sweep)
    simulate = _method(c.simulate)
    stats = _method(c.stats)
    health = _method(c.health)
    extend = _method(c.extend)
    nack = _method(c.nack)
    term = _method(c.term)
    redrive = _method(c.redrive)
    redrive_status = _method(c.redrive_status)
    redrive_cancel = _method(c.redrive_cancel)

    async def readgroup(
        self,
        group: Name,
        consumer: Name,
        streams: c.Streams,
        count: Optional[int] = None,
        block: Optional[int] = None,
        delivery_metadata: bool = False,
    ) -> Any:
        """As :meth:`redis_reclaim.Reclaim.readgroup`: parsed as the client parses
        ``xreadgroup``'s reply; with ``delivery_metadata=True``, ``[(stream, [Delivery, ...])]``."""
        if delivery_metadata:
            args, key = c.readgroup_args(group, consumer, streams, count, block, True)
            return await self.execute(Command(args, key, c.deliveries))
        args, key = c.readgroup_args(group, consumer, streams, count, block)
        return await self.execute(Command(args, key, xreadgroup_parser(self.client)))

    async def read_entries(
        self,
        group: Name,
        consumer: Name,
        streams: c.Streams,
        count: Optional[int] = None,
        block: Optional[int] = None,
    ) -> list[tuple[Any, list[tuple[Any, Fields]]]]:
        """As :meth:`redis_reclaim.Reclaim.read_entries`."""
        args, key = c.readgroup_args(group, consumer, streams, count, block)
        return await self.execute(Command(args, key, c.batches))


#: A handler of AsyncWorker: a coroutine function (or a plain function, called in the loop), with
#: a third argument (:class:`~redis_reclaim.Context`) when it takes one.
AsyncHandler = Union[
    Callable[[Any, Fields], Union[Awaitable[object], object]],
    Callable[[Any, Fields, Context], Union[Awaitable[object], object]],
]


class AsyncWorker(WorkerBase[AsyncHandler]):
    """:class:`redis_reclaim.Worker` for ``redis.asyncio``: the same contract, with ``await
    worker.run()``; ``handler`` may be a coroutine function. The heartbeat is a task of the same
    event loop, so a handler must not block the loop (await, or run blocking work in a thread
    with ``asyncio.to_thread``), or the leases are not renewed while it blocks. Signals are
    handled with ``loop.add_signal_handler`` when ``run`` runs in the main thread."""

    reclaim: AsyncReclaim

    def _connect(self, client: Any) -> None:
        self.reclaim = AsyncReclaim(client)

    async def deliveries(self, entry_id: Any) -> Optional[int]:
        """As :meth:`redis_reclaim.Worker.deliveries`."""
        pel = await self.client.xpending_range(
            self.stream, self.group, min=entry_id, max=entry_id, count=1, consumername=self.consumer
        )
        return int(pel[0]["times_delivered"]) if pel else None

    async def run(self) -> None:
        """As :meth:`redis_reclaim.Worker.run`."""
        self._stop.clear()
        loop = self._loop(self.handler)
        restore = self._install_signals()
        try:
            policy = await self._drive(loop.start())
            beat = asyncio.ensure_future(self._beat(loop, self._every_s(policy)))
            try:
                await self._drive(loop.run())
            finally:
                beat.cancel()
                try:
                    await beat
                except asyncio.CancelledError:
                    pass
        finally:
            restore()

    async def _drive(self, steps: Steps[R]) -> R:
        """As :meth:`redis_reclaim.Worker._drive`, with the asyncio client."""
        return await _steps.run_async(steps, self._do)

    async def _do(self, step: Step) -> Any:
        if type(step) is Call:
            try:
                if step.ctx is None:
                    result = self.handler(step.entry_id, step.fields)
                else:
                    result = self.handler(step.entry_id, step.fields, step.ctx)
                if inspect.isawaitable(result):
                    await result
            except Exception as e:  # noqa: BLE001 - every failure of the handler is an outcome
                return e
            return None
        if isinstance(step, Command):
            return await self.reclaim.execute(step)
        if isinstance(step, Pipeline):
            return await self._pipeline(step.commands)
        if isinstance(step, Pending):
            return await self.client.xpending_range(**self._pending_args(step))
        if isinstance(step, Pause):
            await asyncio.sleep(step.seconds)
        return None

    async def _pipeline(self, commands: tuple[Command[Any], ...]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command.args)
        raw = await pipe.execute(raise_on_error=False)
        return [r if isinstance(r, Exception) else cmd.parse(r) for cmd, r in zip(commands, raw)]

    async def _beat(self, loop: Any, every_s: float) -> None:
        while True:
            await asyncio.sleep(every_s)
            try:
                await self._drive(loop.beat(self._max_hold_s, every_s))
            except Exception as e:  # noqa: BLE001 - the heartbeat must go on
                log.warning("renewing leases failed (%s): again in %.1f s", e, every_s)

    def _install_signals(self) -> Callable[[], None]:
        if not self.handle_signals or threading.current_thread() is not threading.main_thread():
            return lambda: None
        loop = asyncio.get_running_loop()
        signals = (signal.SIGTERM, signal.SIGINT)

        def restore() -> None:
            for s in signals:
                loop.remove_signal_handler(s)

        def on_signal(signum: int) -> None:
            log.info("signal %d: stopping after the entry in hand", signum)
            self.stop()
            restore()  # a second signal acts as before

        try:
            for s in signals:
                loop.add_signal_handler(s, on_signal, s)
        except (NotImplementedError, RuntimeError):  # not on this platform or loop
            return lambda: None
        return restore
