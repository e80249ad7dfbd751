"""The asyncio twins: ``AsyncReclaim`` (the commands, for ``redis.asyncio.Redis`` and
``redis.asyncio.RedisCluster``) and ``AsyncWorker`` (the worker, same contract as
:class:`redis_reclaim.Worker`)."""

from __future__ import annotations

import asyncio
import functools
import inspect
import signal
import threading
import time
from collections import Counter
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
    cast,
)

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import AskError, MovedError, RedisClusterException, RedisError, ResponseError

from . import _cluster
from . import _commands as c
from ._commands import Command, Fields, Name
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

    async def execute(self, command: Command[R]) -> R:
        """Sends one command and parses its reply (routed by its key in a cluster)."""
        if not self._cluster:
            return command.parse(await self.client.execute_command(*command.args))
        if command.key is not None:
            return command.parse(await self._send_to_key(command.args, command.key))
        return command.parse(await self._send_keyless(command.args))

    async def _send_to_key(self, args: tuple[Any, ...], key: Name) -> Any:
        """As :meth:`redis_reclaim.Reclaim._send_to_key`."""
        client = self.client
        for attempt in range(_cluster.ATTEMPTS):
            last = attempt == _cluster.ATTEMPTS - 1
            node = client.get_node_from_key(key)
            try:
                return await client.execute_command(*args, target_nodes=node)
            except (MovedError, AskError, RedisClusterException):
                if last:
                    raise
                await client.nodes_manager.initialize()
            except ResponseError:
                if last or args[0] != "RECLAIM.READGROUP":
                    raise
                await client.nodes_manager.initialize()
                if client.get_node_from_key(key).name == node.name:
                    raise
        raise AssertionError("unreachable")

    async def _send_keyless(self, args: tuple[Any, ...]) -> Any:
        client = self.client
        sub = c.text(args[1]).upper()
        if sub == "IMPORT":
            return await self._import_by_node(args)
        replies = [
            await client.execute_command(*args, target_nodes=node) for node in client.get_primaries()
        ]
        if sub == "LIST":
            return _cluster.merge_lists(replies, args)
        if sub == "EXPORT":
            return _cluster.merge_exports(replies)
        return replies[0] if replies else None

    async def _import_by_node(self, args: tuple[Any, ...]) -> Any:
        client = self.client
        parts = _cluster.import_by_node(client, args)
        if parts is None:  # let the server say what is wrong with the document
            return await client.execute_command(*args, target_nodes=client.get_random_node())
        replies = []
        for node, part, places in parts:
            replies.append((await client.execute_command(*part, target_nodes=node), places))
        return _cluster.merge_imports(replies)

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


#: A handler of AsyncWorker: a coroutine function (or a plain function, called in the loop).
AsyncHandler = Callable[[Any, Fields], Union[Awaitable[object], object]]


class AsyncWorker:
    """:class:`redis_reclaim.Worker` for ``redis.asyncio``: the same contract, with ``await
    worker.run()``; ``handler`` may be a coroutine function. The heartbeat is a task of the same
    event loop, so a handler must not block the loop (await, or run blocking work in a thread
    with ``asyncio.to_thread``), or the leases are not renewed while it blocks. Signals are
    handled with ``loop.add_signal_handler`` when ``run`` runs in the main thread."""

    def __init__(
        self,
        client: Any,
        stream: Name,
        group: Name,
        consumer: Name,
        handler: AsyncHandler,
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
        self.reclaim = AsyncReclaim(client)
        self.stream, self.group, self.consumer = stream, group, consumer
        self.handler = handler
        self.count, self.block_ms = count, block_ms
        self.failure_delay_ms = failure_delay_ms
        self.heartbeat_ms = heartbeat_ms
        self.max_hold_ms = max_hold_ms
        self.stop_after_idle_ms = stop_after_idle_ms
        self.handle_signals = handle_signals
        self.counts: Counter[str] = Counter()
        self._stopping = False
        self._held = Held()
        self._settler = Settler(stream, group, consumer, failure_delay_ms, self.counts)

    def stop(self) -> None:
        """Asks ``run`` to return after the entry in hand."""
        self._stopping = True

    @property
    def stopping(self) -> bool:
        return self._stopping

    def held(self) -> list[Any]:
        return self._held.all()

    async def deliveries(self, entry_id: Any) -> Optional[int]:
        """As :meth:`redis_reclaim.Worker.deliveries`."""
        pel = await self.client.xpending_range(
            self.stream, self.group, min=entry_id, max=entry_id, count=1, consumername=self.consumer
        )
        return int(pel[0]["times_delivered"]) if pel else None

    async def run(self) -> None:
        """Reads and handles entries until :meth:`stop`, a signal or ``stop_after_idle_ms``."""
        self._stopping = False
        every_s = (self.heartbeat_ms or heartbeat_ms(await self._min_idle())) / 1000
        beat = asyncio.ensure_future(self._beat(every_s))
        restore = self._install_signals()
        last = time.monotonic()
        pause = FIRST_PAUSE_S
        try:
            while not self._stopping:
                try:
                    batch = await self._read()
                except TRANSIENT as e:
                    log.warning("reading %r failed (%s): again in %.1f s", self.stream, e, pause)
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, MAX_PAUSE_S)
                    continue
                pause = FIRST_PAUSE_S
                if batch:
                    await self._handle_batch(batch)
                    last = time.monotonic()
                elif self.stop_after_idle_ms is not None and (
                    time.monotonic() - last >= self.stop_after_idle_ms / 1000
                ):
                    break
        finally:
            beat.cancel()
            try:
                await beat
            except asyncio.CancelledError:
                pass
            try:
                await self._give_back(self._held.all())
            finally:
                restore()

    async def _read(self) -> list[tuple[Any, Fields]]:
        got = await self.reclaim.read_entries(
            self.group, self.consumer, [self.stream], count=self.count, block=self.block_ms
        )
        return [e for _stream, entries in got for e in entries]

    async def _handle_batch(self, batch: list[tuple[Any, Fields]]) -> None:
        self._held.add([entry_id for entry_id, _ in batch])
        for entry_id, fields in batch:
            if self._stopping:
                return
            if not self._held.holds(entry_id):
                self.counts["lost"] += 1
                log.warning("entry %s lost before it was handled (its lease ran out)", entry_name(entry_id))
                continue
            error: Optional[Exception] = None
            try:
                result = self.handler(entry_id, fields)
                if inspect.isawaitable(result):
                    await result
            except Exception as e:  # noqa: BLE001 - every failure of the handler is an outcome
                error = e
            await self._run_steps(self._settler.settle(entry_id, outcome(error, self.failure_delay_ms)))
            self._held.release(entry_id)

    async def _run_steps(self, steps: Steps[R]) -> R:
        """As :meth:`redis_reclaim.Worker._run_steps`, with the asyncio client."""
        reply: Any = None
        error: Optional[RedisError] = None
        while True:
            try:
                command = steps.send(reply) if error is None else steps.throw(error)
            except StopIteration as stop:
                return cast(R, stop.value)
            try:
                reply, error = await self.reclaim.execute(command), None
            except RedisError as e:
                reply, error = None, e

    async def _give_back(self, ids: list[Any]) -> None:
        await self._run_steps(self._settler.give_back(ids))
        for i in ids:
            self._held.release(i)

    async def _beat(self, every_s: float) -> None:
        max_hold_s = None if self.max_hold_ms is None else self.max_hold_ms / 1000
        while True:
            await asyncio.sleep(every_s)
            ids = self._held.to_renew(max_hold_s)
            if not ids:
                continue
            try:
                renewed = await self.reclaim.extend(self.stream, self.group, self.consumer, *ids)
            except RedisError as e:
                log.warning("renewing %d leases failed (%s): again in %.1f s", len(ids), e, every_s)
                continue
            for i in self._held.renewed(ids, renewed):
                log.warning("entry %s is no longer ours (its lease ran out)", entry_name(i))

    async def _min_idle(self) -> Optional[int]:
        try:
            p = await self.reclaim.policy_get(self.stream, self.group)
        except RedisError:
            return None
        return None if p is None else p.min_idle

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
