"""``Reclaim``: redis-reclaim's commands as methods of a redis-py ``Redis`` or ``RedisCluster``."""

from __future__ import annotations

import functools
from typing import (
    Any,
    Callable,
    Concatenate,
    Optional,
    ParamSpec,
    Protocol,
    TypeVar,
    cast,
)

from redis.cluster import RedisCluster

from . import _cluster, _steps
from . import _commands as c
from ._commands import Command, Name

P = ParamSpec("P")
R = TypeVar("R")


class _Client(Protocol):
    """What Reclaim uses of a redis-py client (``execute_command`` is untyped in redis-py)."""

    response_callbacks: Any

    def execute_command(self, *args: Any, **options: Any) -> Any: ...


def _method(build: Callable[P, Command[R]]) -> Callable[Concatenate[Reclaim, P], R]:
    """A method of Reclaim that sends the command ``build`` makes, with ``build``'s signature
    and documentation."""

    @functools.wraps(build)
    def method(self: Reclaim, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.execute(build(*args, **kwargs))

    return method


def xreadgroup_parser(client: Any) -> Callable[[Any], Any]:
    """The function ``client`` reads an XREADGROUP reply with (in its protocol and version), or
    no-op when it already parses RECLAIM.READGROUP itself (``set_response_callback``)."""
    callbacks = getattr(client, "response_callbacks", None)
    if callbacks is None:  # a cluster client: its nodes' clients have them
        node = client.get_default_node()
        callbacks = node.redis_connection.response_callbacks if node is not None else {}
    if "RECLAIM.READGROUP" in callbacks:
        return lambda reply: reply
    parse = callbacks.get("XREADGROUP")
    if parse is None:
        return lambda reply: reply
    return cast(Callable[[Any], Any], parse)


class Reclaim:
    """The commands of redis-reclaim for a redis-py ``Redis`` or ``RedisCluster`` client.

    One method per command and subcommand, with Python arguments; replies in the same Python
    shapes with RESP2 and RESP3 (``protocol=3``)::

        from redis import Redis
        from redis_reclaim import Reclaim

        reclaim = Reclaim(Redis(decode_responses=True))
        reclaim.policy_set("orders", "workers", min_idle=30_000, max_deliveries=5, dlq="orders:dlq")
        reclaim.stats("orders", "workers")["dead-lettered"]

    In a cluster each keyed command goes to the primary that serves its stream key's slot (the
    library routes it, following MOVED and ASK); ``policy_list`` and ``policy_export`` gather
    every primary's policies, and ``policy_import`` sends each node the policies of its streams.
    """

    def __init__(self, client: Any) -> None:
        self.client: Any = client
        self._cluster = isinstance(client, RedisCluster)

    @property
    def is_cluster(self) -> bool:
        """Whether the client is a ``RedisCluster``."""
        return self._cluster

    # -- sending -------------------------------------------------------------------------------

    def execute(self, command: Command[R]) -> R:
        """Sends one :class:`~redis_reclaim._commands.Command` and parses its reply."""
        if not self._cluster:
            return command.parse(cast(_Client, self.client).execute_command(*command.args))
        if command.key is not None:
            return command.parse(self._send_to_key(command.args, command.key))
        return command.parse(self._send_keyless(command.args))

    def _send_to_key(self, args: tuple[Any, ...], key: Name) -> Any:
        """Sends ``args`` to the node of ``key`` (see ``_cluster.to_key``)."""
        return self._run(_cluster.to_key(self.client, args, key))

    def _send_keyless(self, args: tuple[Any, ...]) -> Any:
        """LIST and EXPORT from every primary, merged; IMPORT split by the node of each stream."""
        return self._run(_cluster.keyless(self.client, args))

    def _run(self, steps: _cluster.Steps) -> Any:
        """Runs the steps of ``_cluster`` with this client."""
        return _steps.run(steps, self._do_cluster)

    def _do_cluster(self, step: _cluster.Send | _cluster.Refresh) -> Any:
        if isinstance(step, _cluster.Send):
            return self.client.execute_command(*step.args, target_nodes=step.node)
        self.client.nodes_manager.initialize()
        return None

    # -- the commands --------------------------------------------------------------------------

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

    def readgroup(
        self,
        group: Name,
        consumer: Name,
        streams: c.Streams,
        count: Optional[int] = None,
        block: Optional[int] = None,
        delivery_metadata: bool = False,
    ) -> Any:
        """``RECLAIM.READGROUP``: reads new entries and those due for redelivery, with the
        arguments of redis-py's ``xreadgroup`` (``streams`` maps each stream to ``">"``, or
        lists them) and its reply, parsed exactly as the client parses ``xreadgroup``'s in its
        protocol (RESP2 or RESP3) and version. With ``delivery_metadata=True``
        (``DELIVERY-METADATA``) each entry comes with its idle time and delivery count, in one
        shape whatever the protocol and version: ``[(stream, [Delivery, ...]), ...]``, empty
        when nothing came."""
        if delivery_metadata:
            args, key = c.readgroup_args(group, consumer, streams, count, block, True)
            return self.execute(Command(args, key, c.deliveries))
        args, key = c.readgroup_args(group, consumer, streams, count, block)
        return self.execute(Command(args, key, xreadgroup_parser(self.client)))

    def read_entries(
        self,
        group: Name,
        consumer: Name,
        streams: c.Streams,
        count: Optional[int] = None,
        block: Optional[int] = None,
    ) -> list[tuple[Any, list[tuple[Any, c.Fields]]]]:
        """As :meth:`readgroup`, in one shape whatever the protocol and redis-py version:
        ``[(stream, [(entry_id, fields), ...]), ...]``, empty when nothing came."""
        args, key = c.readgroup_args(group, consumer, streams, count, block)
        return self.execute(Command(args, key, c.batches))
