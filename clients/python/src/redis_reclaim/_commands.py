"""The commands of redis-reclaim as data, without I/O.

Each builder returns a :class:`Command`: the arguments to send, the key that routes it in a
cluster, and the parser of its reply. :class:`~redis_reclaim.Reclaim` (redis-py's ``Redis`` and
``RedisCluster``) and :class:`~redis_reclaim.asyncio.AsyncReclaim` (``redis.asyncio``) send them,
so both have exactly the same methods, arguments and results.

Replies are read the same way in RESP2 (a flat array of field, value, ...) and RESP3 (a map):
field names become ``str``, as do the module's own words (states, actions, rules) and stream IDs
in reports; key, group and consumer names stay as the client returns them (``str`` with
``decode_responses=True``, else ``bytes``), since they are binary-safe.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Iterable, Mapping, NamedTuple, Optional, Sequence, TypeVar, Union

#: A key, group or consumer name, or a stream ID, as redis-py accepts it.
Name = Union[str, bytes]
#: A stream entry's fields, as redis-py returns them (``str`` or ``bytes`` keys and values).
Fields = dict[Any, Any]
#: The streams RECLAIM.READGROUP reads: a mapping of each stream to ``">"`` (as ``xreadgroup``
#: takes them), a list of streams, or one stream.
Streams = Union[Mapping[Any, Any], Sequence[Name], Name]
#: A reply turned into a dictionary whose field names are the module's (``"dead-lettered"``).
Reply = dict[str, Any]

R = TypeVar("R")


@dataclass(frozen=True)
class Command(Generic[R]):
    """One command: its arguments, the key that routes it (``None``: no key), its reply parser."""

    args: tuple[Any, ...]
    key: Optional[Name]
    parse: Callable[[Any], R]


# -- reading replies ---------------------------------------------------------------------------


def text(value: Any) -> str:
    """A word of the module's (a state, an action, an ID) as ``str``, from ``str`` or ``bytes``."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def opt_text(value: Any) -> Optional[str]:
    return None if value is None else text(value)


def fields_of(reply: Any) -> Reply:
    """A map reply as a dict with ``str`` field names: a RESP3 map, or RESP2's flat array."""
    if isinstance(reply, Mapping):
        return {text(k): v for k, v in reply.items()}
    if isinstance(reply, (list, tuple)) and len(reply) % 2 == 0:
        return {text(reply[i]): reply[i + 1] for i in range(0, len(reply), 2)}
    raise ValueError(f"expected a map reply, got {reply!r}")


def _ok(reply: Any) -> bool:
    return reply is True or text(reply) == "OK"


def _int(reply: Any) -> int:
    return int(reply)


def _bool(reply: Any) -> bool:
    return int(reply) == 1


def _list(reply: Any) -> list[Any]:
    return list(reply or [])


def _str(reply: Any) -> str:
    return text(reply)


# -- policies ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Backoff:
    """A policy's ``BACKOFF``: how the idle time that makes an entry due grows with its deliveries.

    Build one with :meth:`fixed`, :meth:`exponential` or :meth:`steps`, or parse the text
    ``RECLAIM.POLICY GET`` shows (``"EXPONENTIAL 60000"``) with :meth:`parse`.
    """

    kind: str
    values: tuple[int, ...] = ()

    @classmethod
    def fixed(cls) -> Backoff:
        """``BACKOFF FIXED``: every delivery is due after ``MIN-IDLE``."""
        return cls("FIXED")

    @classmethod
    def exponential(cls, max_ms: int) -> Backoff:
        """``BACKOFF EXPONENTIAL max-ms``: ``MIN-IDLE`` x 2^(n-1), at most ``max_ms``."""
        return cls("EXPONENTIAL", (max_ms,))

    @classmethod
    def steps(cls, *ms: int) -> Backoff:
        """``BACKOFF LIST ms [ms ...]``: the n-th value after n deliveries, the last repeating."""
        return cls("LIST", tuple(ms))

    @classmethod
    def parse(cls, spec: str) -> Backoff:
        """From ``"FIXED"``, ``"EXPONENTIAL 60000"`` or ``"LIST 500 3000"`` (any case)."""
        words = spec.split()
        if not words:
            raise ValueError("empty BACKOFF")
        return cls(words[0].upper(), tuple(int(w) for w in words[1:]))

    def words(self) -> list[Any]:
        return [self.kind, *self.values]

    def __str__(self) -> str:
        return " ".join(str(w) for w in self.words())


@dataclass(frozen=True)
class Policy:
    """A policy as ``RECLAIM.POLICY GET`` (or ``LIST``) shows it.

    :meth:`options` gives the keyword arguments of :meth:`Reclaim.policy_set
    <redis_reclaim.Reclaim.policy_set>` that set this policy again, so one option can be changed
    while keeping the others (``SET`` replaces the whole policy: an option left out takes its
    default)::

        p = reclaim.policy_get("orders", "workers")
        reclaim.policy_set("orders", "workers", **{**p.options(), "max_deliveries": 5})
    """

    stream: Optional[Name]
    group: Optional[Name]
    min_idle: int
    max_deliveries: int
    dlq: Optional[Name]
    claimant: Name
    count: int
    interval: int
    backoff: Backoff
    liveness: int
    storm: Optional[tuple[int, int]]
    dlq_maxlen: int
    dlq_maxage: int
    tombstones: bool
    #: ``FORGET-IDLE``: ms after which an idle consumer with nothing pending is deleted (0: off).
    forget_idle: int = 0
    #: ``active``, ``paused`` or ``storm``: how the policy runs now (not an option of SET).
    state: str = field(default="active")
    #: What the policy does now, checked live as ``RECLAIM.STATS`` shows it: ``active``, or
    #: ``waiting: no group <group>`` (a typo, or a group not created yet), ``paused``,
    #: ``replica``... Not part of the policy: two policies compare equal whatever their status.
    status: str = field(default="active", compare=False)

    def options(self) -> dict[str, Any]:
        """The keyword arguments of ``policy_set`` for this policy (all but its state)."""
        return {
            "min_idle": self.min_idle,
            "max_deliveries": self.max_deliveries,
            "dlq": self.dlq,
            "claimant": self.claimant,
            "count": self.count,
            "interval": self.interval,
            "backoff": self.backoff,
            "liveness": self.liveness,
            "storm": self.storm,
            "dlq_maxlen": self.dlq_maxlen,
            "dlq_maxage": self.dlq_maxage,
            "tombstones": self.tombstones,
            "forget_idle": self.forget_idle,
        }


def _storm(value: Any) -> Optional[tuple[int, int]]:
    if value is None:
        return None
    n, window = text(value).split()
    return int(n), int(window)


def parse_policy(reply: Any, stream: Optional[Name] = None, group: Optional[Name] = None) -> Policy:
    m = fields_of(reply)
    return Policy(
        stream=m.get("key", stream),
        group=m.get("group", group),
        min_idle=int(m["min-idle"]),
        max_deliveries=int(m["max-deliveries"]),
        dlq=m["dlq"],
        claimant=m["claimant"],
        count=int(m["count"]),
        interval=int(m["interval"]),
        backoff=Backoff.parse(text(m["backoff"])),
        liveness=int(m["liveness"]),
        storm=_storm(m["storm"]),
        dlq_maxlen=int(m["dlq-maxlen"]),
        dlq_maxage=int(m["dlq-maxage"]),
        tombstones=text(m["tombstones"]) == "yes",
        forget_idle=int(m.get("forget-idle", 0)),
        state=text(m["state"]),
        status=text(m["status"]) if "status" in m else "active",
    )


def policy_options(
    *,
    min_idle: Optional[int] = None,
    max_deliveries: Optional[int] = None,
    dlq: Optional[Name] = None,
    claimant: Optional[Name] = None,
    count: Optional[int] = None,
    interval: Optional[int] = None,
    backoff: Union[Backoff, str, None] = None,
    liveness: Optional[int] = None,
    storm: Optional[tuple[int, int]] = None,
    dlq_maxlen: Optional[int] = None,
    dlq_maxage: Optional[int] = None,
    tombstones: Optional[bool] = None,
    forget_idle: Optional[int] = None,
) -> list[Any]:
    """The options of ``RECLAIM.POLICY SET`` (and ``RECLAIM.SIMULATE``'s what-if) that are not None."""
    out: list[Any] = []
    for name, value in (
        ("MIN-IDLE", min_idle),
        ("MAX-DELIVERIES", max_deliveries),
        ("DLQ", dlq),
        ("CLAIMANT", claimant),
        ("COUNT", count),
        ("INTERVAL", interval),
    ):
        if value is not None:
            out += [name, value]
    if backoff is not None:
        b = Backoff.parse(backoff) if isinstance(backoff, str) else backoff
        out += ["BACKOFF", *b.words()]
    if liveness is not None:
        out += ["LIVENESS", liveness]
    if storm is not None:
        out += ["STORM", storm[0], storm[1]]
    if dlq_maxlen is not None:
        out += ["DLQ-MAXLEN", dlq_maxlen]
    if dlq_maxage is not None:
        out += ["DLQ-MAXAGE", dlq_maxage]
    if tombstones is not None:
        out += ["TOMBSTONES", "yes" if tombstones else "no"]
    if forget_idle is not None:
        out += ["FORGET-IDLE", forget_idle]
    return out


# -- the builders, one per command or subcommand -----------------------------------------------


def policy_set(
    stream: Name,
    group: Name,
    *,
    min_idle: int,
    max_deliveries: Optional[int] = None,
    dlq: Optional[Name] = None,
    claimant: Optional[Name] = None,
    count: Optional[int] = None,
    interval: Optional[int] = None,
    backoff: Union[Backoff, str, None] = None,
    liveness: Optional[int] = None,
    storm: Optional[tuple[int, int]] = None,
    dlq_maxlen: Optional[int] = None,
    dlq_maxage: Optional[int] = None,
    tombstones: Optional[bool] = None,
    forget_idle: Optional[int] = None,
) -> Command[bool]:
    """``RECLAIM.POLICY SET``: creates or **replaces** the policy of (stream, group).

    An option left as None takes the module's default, not its previous value (use
    :meth:`Policy.options` to change one option). ``backoff`` is a :class:`Backoff` or its text
    (``"EXPONENTIAL 60000"``); ``storm`` is ``(n, window_ms)``; ``forget_idle`` (ms) deletes the
    group's consumers idle that long with nothing pending. Returns True.
    """
    opts = policy_options(
        min_idle=min_idle,
        max_deliveries=max_deliveries,
        dlq=dlq,
        claimant=claimant,
        count=count,
        interval=interval,
        backoff=backoff,
        liveness=liveness,
        storm=storm,
        dlq_maxlen=dlq_maxlen,
        dlq_maxage=dlq_maxage,
        tombstones=tombstones,
        forget_idle=forget_idle,
    )
    return Command(("RECLAIM.POLICY", "SET", stream, group, *opts), stream, _ok)


def policy_get(stream: Name, group: Name) -> Command[Optional[Policy]]:
    """``RECLAIM.POLICY GET``: the policy, or None when (stream, group) has none."""
    return Command(
        ("RECLAIM.POLICY", "GET", stream, group),
        stream,
        lambda r: None if r is None else parse_policy(r, stream, group),
    )


def policy_del(stream: Name, group: Name) -> Command[bool]:
    """``RECLAIM.POLICY DEL``: True when a policy was removed."""
    return Command(("RECLAIM.POLICY", "DEL", stream, group), stream, _bool)


def policy_pause(stream: Name, group: Name, *, storm: bool = False) -> Command[bool]:
    """``RECLAIM.POLICY PAUSE`` (``storm=True``: ``PAUSE ... STORM``, dead-letters only). True."""
    extra = ("STORM",) if storm else ()
    return Command(("RECLAIM.POLICY", "PAUSE", stream, group, *extra), stream, _ok)


def policy_resume(stream: Name, group: Name) -> Command[bool]:
    """``RECLAIM.POLICY RESUME``: the policy runs again (closes an open STORM breaker). True."""
    return Command(("RECLAIM.POLICY", "RESUME", stream, group), stream, _ok)


def _parse_list(reply: Any) -> list[Policy]:
    return [parse_policy(p) for p in reply or []]


def policy_list(
    *, after: tuple[Name, Name] | None = None, count: int | None = None
) -> Command[list[Policy]]:
    """``RECLAIM.POLICY LIST [AFTER stream group] [COUNT n]``: the policies of the selected
    database, by stream then group; with ``count``, at most that many after ``after`` (the
    ``(p.stream, p.group)`` of the last one of the page before). A page shorter than ``count``
    is the last one."""
    args: tuple[Any, ...] = ("RECLAIM.POLICY", "LIST")
    if after is not None:
        args += ("AFTER", after[0], after[1])
    if count is not None:
        args += ("COUNT", count)
    return Command(args, None, _parse_list)


def policy_export() -> Command[str]:
    """``RECLAIM.POLICY EXPORT``: every policy of the selected database as one JSON document."""
    return Command(("RECLAIM.POLICY", "EXPORT"), None, _str)


class Imported(int):
    """What ``RECLAIM.POLICY IMPORT`` did: how many policies it set (the int itself), and
    ``waiting``, those among them whose stream or group does not exist (each ``{"index": its
    place in the document, "key", "group", "status": "waiting: no group <group>"}``). They are
    set all the same and wait; a name with a typo shows here."""

    waiting: list[Reply]

    def __new__(cls, n: int, waiting: Optional[list[Reply]] = None) -> "Imported":
        self = super().__new__(cls, n)
        self.waiting = list(waiting or [])
        return self


def parse_import(reply: Any) -> Imported:
    if isinstance(reply, Imported):  # gathered from the nodes of a cluster
        return reply
    m = fields_of(reply)
    waiting = []
    for w in m["waiting"] or []:
        f = fields_of(w)
        waiting.append(
            {"index": int(f["index"]), "key": f["key"], "group": f["group"], "status": text(f["status"])}
        )
    return Imported(int(m["imported"]), waiting)


def policy_import(
    document: Union[str, bytes, Mapping[str, Any]], *, replace: bool = False
) -> Command[Imported]:
    """``RECLAIM.POLICY IMPORT``: sets the policies of a document as ``EXPORT`` writes it (text,
    or the parsed object), all or none; ``replace=True`` replaces existing ones. Returns how many
    policies it set, an :class:`Imported` (an int) whose ``waiting`` lists those whose stream or
    group does not exist."""
    doc = document if isinstance(document, (str, bytes)) else json.dumps(document)
    extra = ("REPLACE",) if replace else ()
    return Command(("RECLAIM.POLICY", "IMPORT", doc, *extra), None, parse_import)


def _parse_counts(reply: Any) -> Reply:
    return {k: int(v) for k, v in fields_of(reply).items()}


def sweep(stream: Name, group: Name, *, limit: Optional[int] = None) -> Command[Reply]:
    """``RECLAIM.SWEEP``: one pass now (or ``limit`` entries from the head of the PEL).

    Returns ``{"claimed", "dead-lettered", "deleted", "dlq-trimmed", "tombstones"}`` counts.
    """
    extra = ("LIMIT", limit) if limit is not None else ()
    return Command(("RECLAIM.SWEEP", stream, group, *extra), stream, _parse_counts)


def _parse_simulation(stream: Name, group: Name) -> Callable[[Any], Reply]:
    def parse(reply: Any) -> Reply:
        m = fields_of(reply)
        entries = []
        for e in m["entries"] or []:
            f = fields_of(e)
            entries.append(
                {
                    "id": text(f["id"]),
                    "consumer": f["consumer"],
                    "idle": int(f["idle"]),
                    "deliveries": int(f["deliveries"]),
                    "action": text(f["action"]),
                    "rule": text(f["rule"]),
                }
            )
        return {
            "policy": parse_policy(m["policy"], stream, group),
            "halted": opt_text(m["halted"]),
            "now-ms": int(m["now-ms"]),
            "entries": entries,
            "totals": _parse_counts(m["totals"]),
            "more": int(m["more"]) == 1,
            "delayed": int(m.get("delayed") or 0),
            "next-due-ms": _opt_int(m.get("next-due-ms")),
        }

    return parse


def simulate(
    stream: Name,
    group: Name,
    *,
    limit: Optional[int] = None,
    min_idle: Optional[int] = None,
    max_deliveries: Optional[int] = None,
    dlq: Optional[Name] = None,
    claimant: Optional[Name] = None,
    count: Optional[int] = None,
    interval: Optional[int] = None,
    backoff: Union[Backoff, str, None] = None,
    liveness: Optional[int] = None,
    storm: Optional[tuple[int, int]] = None,
    dlq_maxlen: Optional[int] = None,
    dlq_maxage: Optional[int] = None,
    tombstones: Optional[bool] = None,
    forget_idle: Optional[int] = None,
) -> Command[Reply]:
    """``RECLAIM.SIMULATE``: what a pass would do now, entry by entry, without doing it.

    The policy options (all optional) make it a what-if: the live policy with those changed.
    Returns ``{"policy": Policy, "halted": str | None, "now-ms": int, "entries": [{"id",
    "consumer", "idle", "deliveries", "action", "rule"}], "totals": {"move", "dead-letter",
    "purge", "none"}, "more": bool}``.
    """
    opts = policy_options(
        min_idle=min_idle,
        max_deliveries=max_deliveries,
        dlq=dlq,
        claimant=claimant,
        count=count,
        interval=interval,
        backoff=backoff,
        liveness=liveness,
        storm=storm,
        dlq_maxlen=dlq_maxlen,
        dlq_maxage=dlq_maxage,
        tombstones=tombstones,
        forget_idle=forget_idle,
    )
    extra = ["LIMIT", limit] if limit is not None else []
    return Command(
        ("RECLAIM.SIMULATE", stream, group, *extra, *opts),
        stream,
        _parse_simulation(stream, group),
    )


def _parse_stats(reply: Any) -> Reply:
    m = fields_of(reply)
    return {k: (text(v) if k in ("cursor", "status") else int(v)) for k, v in m.items()}


def stats(stream: Name, group: Name) -> Command[Reply]:
    """``RECLAIM.STATS``: the policy's counters (ints) and its ``cursor`` and ``status`` (str)."""
    return Command(("RECLAIM.STATS", stream, group), stream, _parse_stats)


def _opt_int(value: Any) -> Optional[int]:
    return None if value is None else int(value)


def _parse_health(reply: Any) -> Reply:
    m = fields_of(reply)
    live = None
    if m["live"] is not None:
        live = fields_of(m["live"])
        live["oldest-pending-age-ms"] = _opt_int(live["oldest-pending-age-ms"])
        live["by-consumer"] = [(c, int(n)) for c, n in live["by-consumer"] or []]
        if "next-due-ms" in live:
            live["delayed"] = int(live["delayed"])
            live["next-due-ms"] = _opt_int(live["next-due-ms"])
    deliveries = fields_of(m["deliveries"])
    deliveries["pass"] = opt_text(deliveries["pass"])
    deliveries["buckets"] = _parse_counts(deliveries["buckets"] or [])
    return {
        "now-ms": int(m["now-ms"]),
        "live": live,
        "last-pass": _parse_counts(m["last-pass"]),
        "pel-sizes": [(int(t), int(n)) for t, n in m["pel-sizes"] or []],
        "pel-change": _opt_int(m["pel-change"]),
        "deliveries": deliveries,
        "dead-letters": {k: _opt_int(v) for k, v in fields_of(m["dead-letters"]).items()},
        "status": text(m["status"]),
        "eviction-risk": text(m["eviction-risk"]) if "eviction-risk" in m else "no",
    }


def health(stream: Name, group: Name) -> Command[Reply]:
    """``RECLAIM.HEALTH``: the group's signals (``live``, ``last-pass``, ``pel-sizes``,
    ``deliveries``, ``dead-letters``, ``status``, ``eviction-risk``); ``by-consumer`` and
    ``pel-sizes`` are lists of pairs."""
    return Command(("RECLAIM.HEALTH", stream, group), stream, _parse_health)


def readgroup_args(
    group: Name,
    consumer: Name,
    streams: Streams,
    count: Optional[int],
    block: Optional[int],
    delivery_metadata: bool = False,
) -> tuple[tuple[Any, ...], Name]:
    """``RECLAIM.READGROUP``'s arguments and routing key, from ``xreadgroup``-style arguments:
    ``streams`` maps each stream to ``">"`` (the only ID it reads with), or lists the streams;
    ``delivery_metadata`` adds ``DELIVERY-METADATA``."""
    if isinstance(streams, Mapping):
        keys = list(streams)
        for k, v in streams.items():
            if text(v) != ">":
                raise ValueError(f"RECLAIM.READGROUP reads with the ID '>' only, not {v!r} for {k!r}")
    elif isinstance(streams, (str, bytes)):
        keys = [streams]
    else:
        keys = list(streams)
    if not keys:
        raise ValueError("RECLAIM.READGROUP needs at least one stream")
    args: list[Any] = ["RECLAIM.READGROUP", "GROUP", group, consumer]
    if count is not None:
        args += ["COUNT", count]
    if block is not None:
        args += ["BLOCK", block]
    if delivery_metadata:
        args.append("DELIVERY-METADATA")
    args += ["STREAMS", *keys, *([">"] * len(keys))]
    return tuple(args), keys[0]


class Delivery(NamedTuple):
    """An entry read with ``delivery_metadata=True`` (``RECLAIM.READGROUP ...
    DELIVERY-METADATA``), in the order of Redis 8.4's ``XREADGROUP ... CLAIM`` reply: its ID, its
    fields, ``idle``, the ms since its last delivery (or its last move into the inbox), and
    ``deliveries``, how many times it was delivered before this read; both ``0`` for a new
    entry. ``attempt`` is this delivery's number (``deliveries + 1``)."""

    id: Any
    fields: Fields
    idle: int
    deliveries: int

    @property
    def attempt(self) -> int:
        return self.deliveries + 1


def _fields(values: Any) -> Fields:
    if isinstance(values, Mapping):
        return dict(values)
    if values is None:
        return {}
    return {values[i]: values[i + 1] for i in range(0, len(values), 2)}


def _entry(e: Any) -> tuple[Any, Fields]:
    return e[0], _fields(e[1])


def _delivery(e: Any) -> Delivery:
    if len(e) < 4:
        raise ValueError(f"not an entry with its delivery metadata: {e!r}")
    return Delivery(e[0], _fields(e[1]), int(e[2]), int(e[3]))


def _stream_entries(reply: Any) -> list[tuple[Any, list[Any]]]:
    """The ``(stream, [entry, ...])`` pairs of an XREADGROUP-shaped reply, entries as sent."""
    if not reply:
        return []
    pairs: Iterable[Any] = reply.items() if isinstance(reply, Mapping) else reply
    out = []
    for stream, entries in pairs:
        entries = list(entries or [])
        if entries and isinstance(entries[0], (list, tuple)) and entries[0] and isinstance(
            entries[0][0], (list, tuple)
        ):
            entries = list(entries[0])  # redis-py 5-7, protocol=3: {stream: [entries]}
        out.append((stream, [e for e in entries if e is not None]))
    return out


def batches(reply: Any) -> list[tuple[Any, list[tuple[Any, Fields]]]]:
    """The entries of a ``RECLAIM.READGROUP`` (or ``XREADGROUP``) reply, as
    ``[(stream, [(entry_id, fields), ...]), ...]``, from any shape it arrives in: RESP2's array,
    RESP3's map, or what redis-py's XREADGROUP parser made of either (a list of ``[stream,
    entries]``, a dict of stream to entries, or to ``[entries]`` with ``protocol=3`` before
    redis-py 8)."""
    return [(stream, [_entry(e) for e in entries]) for stream, entries in _stream_entries(reply)]


def deliveries(reply: Any) -> list[tuple[Any, list[Delivery]]]:
    """The entries of a ``RECLAIM.READGROUP ... DELIVERY-METADATA`` reply (each ``[id, fields,
    idle, count]``), as ``[(stream, [Delivery, ...]), ...]``, in RESP2 and RESP3 alike."""
    return [
        (stream, [_delivery(e) for e in entries]) for stream, entries in _stream_entries(reply)
    ]


def extend(stream: Name, group: Name, consumer: Name, *ids: Name) -> Command[list[Any]]:
    """``RECLAIM.EXTEND``: renews the lease of the consumer's own pending entries; returns the
    IDs renewed (an ID missing from it was lost: acknowledged, dead-lettered or taken)."""
    return Command(("RECLAIM.EXTEND", stream, group, consumer, *ids), stream, _list)


def nack(
    stream: Name,
    group: Name,
    consumer: Name,
    *ids: Name,
    delay: Optional[int] = None,
    reason: Optional[Name] = None,
) -> Command[int]:
    """``RECLAIM.NACK``: gives the consumer's own entries back for redelivery, at once or
    ``delay`` ms from now (up to 30 days: beyond their lease they are parked), with ``reason``
    (at most 1024 bytes) kept for the DLQ's ``reclaim-last-error``; returns how many it
    released."""
    extra: tuple[Any, ...] = ("DELAY", delay) if delay is not None else ()
    if reason is not None:
        extra += ("REASON", reason)
    return Command(("RECLAIM.NACK", stream, group, consumer, *ids, *extra), stream, _int)


def term(
    stream: Name, group: Name, consumer: Name, *ids: Name, reason: Optional[Name] = None
) -> Command[int]:
    """``RECLAIM.TERM``: dead-letters the consumer's own entries at once (``reclaim-reason`` is
    ``reason``, default ``term``); returns how many it dead-lettered."""
    extra = ("REASON", reason) if reason is not None else ()
    return Command(("RECLAIM.TERM", stream, group, consumer, *ids, *extra), stream, _int)


def redrive(
    dlq: Name,
    *,
    source: Optional[tuple[Name, Name]] = None,
    count: Optional[int] = None,
    rate: Optional[int] = None,
    canary: Optional[int] = None,
    window: Optional[int] = None,
    ids: Optional[Sequence[Name]] = None,
) -> Command[int]:
    """``RECLAIM.REDRIVE``: starts moving the DLQ's entries back to their groups (``source``:
    only those of ``(stream, group)``; ``ids``: only these DLQ entries, 1 to 1000 of them);
    ``canary`` and ``window`` go together. Returns the task's id."""
    args: list[Any] = ["RECLAIM.REDRIVE", dlq]
    if source is not None:
        args += ["SOURCE", source[0], source[1]]
    if ids is not None:
        args += ["IDS", len(ids), *ids]
    for name, value in (("COUNT", count), ("RATE", rate), ("CANARY", canary), ("WINDOW", window)):
        if value is not None:
            args += [name, value]
    return Command(tuple(args), dlq, _int)


_REDRIVE_WORDS = ("state", "end-id", "cursor")
_REDRIVE_NAMES = ("user",)


def _parse_redrive_status(reply: Any) -> Optional[Reply]:
    if reply is None:
        return None
    out: Reply = {}
    for k, v in fields_of(reply).items():
        if k == "source":
            out[k] = None if v is None else (v[0], v[1])
        elif k in _REDRIVE_WORDS:
            out[k] = text(v)
        elif k in _REDRIVE_NAMES or v is None:
            out[k] = v
        else:
            out[k] = int(v)
    return out


def redrive_status(dlq: Name) -> Command[Optional[Reply]]:
    """``RECLAIM.REDRIVE STATUS``: the DLQ's last task (``id``, ``state``, ``moved``, ...), or
    None when it never had one."""
    return Command(("RECLAIM.REDRIVE", "STATUS", dlq), dlq, _parse_redrive_status)


def redrive_cancel(dlq: Name) -> Command[bool]:
    """``RECLAIM.REDRIVE CANCEL``: True when a running task was canceled."""
    return Command(("RECLAIM.REDRIVE", "CANCEL", dlq), dlq, _bool)


def due_from_error(message: str) -> Optional[int]:
    """The idle after which the entry is due, from ``RECLAIM.NACK``'s error for a ``DELAY`` longer
    than that (``DELAY d is longer than <due>, the idle ...``), or None for any other error."""
    marker = " is longer than "
    if message.startswith("ERR "):  # redis-py strips the code; a client that does not, keeps it
        message = message[4:]
    if not message.startswith("DELAY ") or marker not in message:
        return None
    rest = message.split(marker, 1)[1]
    digits = rest.split(",", 1)[0].strip()
    return int(digits) if digits.isdigit() else None
