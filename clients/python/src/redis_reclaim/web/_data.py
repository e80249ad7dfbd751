"""What the pages show, read (and the actions taken) through the client, as the ACL user of the
URL. Every read is bounded: pages of policies (LIST's AFTER/COUNT), of the PEL (XPENDING with a
count) and of a DLQ (XREVRANGE with a COUNT)."""

from __future__ import annotations

import threading
from typing import Any, Optional

import redis
from redis.cluster import RedisCluster

from .. import _commands as c
from ..client import Reclaim
from ._present import as_bytes

PAGE = 50
#: At most this many DLQ pages are read to fill a filtered page.
FILTER_PAGES = 10
PENDING_ROWS = 20
SIMULATE_LIMIT = 100
#: The fields a DLQ entry gets from the module, shown in their own columns.
META = (b"reclaim-stream", b"reclaim-group", b"reclaim-id", b"reclaim-consumer",
        b"reclaim-deliveries", b"reclaim-reason", b"reclaim-moved-ms", b"reclaim-last-error")
#: The fields of GET/LIST the overview knows; any other (a newer module's) is shown as it is.
KNOWN = {"key", "group", "status", "min-idle", "max-deliveries", "dlq", "claimant", "count",
         "interval", "backoff", "liveness", "storm", "dlq-maxlen", "dlq-maxage", "tombstones",
         "state", "forget-idle"}


def _raw_list(reply: Any) -> list[dict[str, Any]]:
    return [c.fields_of(p) for p in reply or []]


def _raw_map(reply: Any) -> Optional[dict[str, Any]]:
    return None if reply is None else c.fields_of(reply)


def alerts(row: dict[str, Any]) -> list[str]:
    """The alert rules of contrib/prometheus/reclaim-rules.yml whose condition holds now for a
    row of the overview (read once: without the rules' ``for:`` durations and rates)."""
    out = []
    status = row["status"]
    if status == "storm":
        out.append("ReclaimStormBreakerOpen")
    if status.startswith("error"):
        out.append("ReclaimPolicyInError")
    if status.startswith("invalid"):
        out.append("ReclaimPolicyInvalid")
    if status.startswith("waiting"):
        out.append("ReclaimPolicyWaiting")
    if status == "disabled":
        out.append("ReclaimDisabled")
    if (row.get("dead_per_min") or 0) > 1:
        out.append("ReclaimDeadLetters")
    live = row.get("live")
    if live:
        pending, inbox = live["pending"], live["inbox"]
        consumers, most = live["consumers"], live["max-consumer-pending"]
        others = (pending - inbox - most) / max(consumers - 1, 1)
        if most > 100 and consumers >= 2 and most > 5 * others:
            out.append("ReclaimConsumerHoarding")
        if (row.get("pel_change") or 0) > 0 and pending > 100:
            out.append("ReclaimPelGrowing")
        if inbox > 0 and (row.get("inbox_before") or 0) > 0:
            out.append("ReclaimInboxNotDrained")
    return out


def entries_read(groups: Any, group: bytes) -> Optional[int]:
    """The group's ``entries-read`` in an ``XINFO GROUPS`` reply (a list of maps or of flat
    field/value lists, RESP2 or RESP3): 0 when it is nil but the group never read anything
    (``last-delivered-id`` 0-0: a group created at ``$`` of an empty stream, or at 0); None when
    the reply is an error, the group is not in it, or the server does not know the count (nil
    after entries were deleted in the stream)."""
    if isinstance(groups, Exception) or not isinstance(groups, list):
        return None
    for g in groups:
        pairs = g.items() if isinstance(g, dict) else zip(g[::2], g[1::2])
        m = {as_bytes(k): v for k, v in pairs}
        if as_bytes(m.get(b"name", b"")) == group:
            v = m.get(b"entries-read")
            if v is None:
                return 0 if as_bytes(m.get(b"last-delivered-id", b"")) == b"0-0" else None
            return int(v)
    return None


def xinfo_groups(stream: Any) -> c.Command[Any]:
    """``XINFO GROUPS stream``: O(the stream's groups), its raw reply."""
    return c.Command((b"XINFO", b"GROUPS", stream), stream, lambda r: r)


def delayed(live: Optional[dict[str, Any]], claimant: Any) -> Optional[int]:
    """Entries given back with ``RECLAIM.NACK ... DELAY``: those of ``<CLAIMANT>:delayed`` (among
    the 64 consumers HEALTH lists)."""
    if live is None or claimant is None:
        return None
    owner = as_bytes(claimant) + b":delayed"
    return sum(int(n) for consumer, n in live["by-consumer"] if as_bytes(consumer) == owner)


class Data:
    """The dashboard's reads and actions on one server (one client per database)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._base = redis.ConnectionPool.from_url(url)
        self.db = int(self._base.connection_kwargs.get("db", 0) or 0)
        self._clients: dict[int, Any] = {}
        self._lock = threading.Lock()
        #: A RedisCluster client when the URL names a node of a Redis Cluster: LIST then asks
        #: every primary (the client merges the pages), each keyed command goes to its node.
        self.cluster: Optional[Any] = None
        self._checked = False

    def _cluster(self) -> Optional[Any]:
        with self._lock:
            if not self._checked:
                if self._is_cluster():
                    self.cluster = RedisCluster.from_url(self.url)
                self._checked = True
            return self.cluster

    def _is_cluster(self) -> bool:
        probe = redis.Redis(connection_pool=self._base)
        try:
            return int(probe.info("cluster").get("cluster_enabled", 0)) == 1
        except redis.ResponseError:  # a user that may not run INFO: the URL's server alone
            return False

    def client(self, db: int) -> Any:
        """The client of database ``db`` (redis-py's types are loose: Any); in a cluster, the
        cluster client (database 0 only)."""
        cluster = self._cluster()
        if cluster is not None:
            if db != 0:
                raise LookupError("a Redis Cluster has database 0 only")
            return cluster
        if not 0 <= db < 1_000_000:
            raise LookupError(f"no database {db}")
        with self._lock:
            cl = self._clients.pop(db, None)
            if cl is None:
                cl = self._connect(db)
                if len(self._clients) >= 16:
                    oldest = next(iter(self._clients))
                    self._clients.pop(oldest).close()
            self._clients[db] = cl  # the most recently used last
            return cl

    def _connect(self, db: int) -> Any:
        """A client of database ``db``: at most 16 connections (a request waits for one)."""
        kwargs = {**self._base.connection_kwargs, "db": db}
        pool_class: Any = redis.BlockingConnectionPool
        pool = pool_class(connection_class=self._base.connection_class, max_connections=16,
                          timeout=10, **kwargs)
        return redis.Redis(connection_pool=pool)

    def reclaim(self, db: int) -> Reclaim:
        return Reclaim(self.client(db))

    def call(self, db: int, command: c.Command[Any]) -> Any:
        """One command through the client (routed by its key in a cluster)."""
        return self.reclaim(db).execute(command)

    def close(self) -> None:
        for cl in self._clients.values():
            cl.close()
        if self.cluster is not None:
            self.cluster.close()
        self._base.disconnect()

    # -- reads -----------------------------------------------------------------------------

    def databases(self) -> list[int]:
        """The databases that hold keys (INFO keyspace), and the URL's; only the URL's when the
        user may not run INFO."""
        if self._cluster() is not None:
            return [0]
        dbs = {self.db}
        try:
            info = self.client(self.db).info("keyspace")
            dbs |= {int(k[2:]) for k in info if k.startswith("db")}
        except redis.ResponseError:
            pass
        return sorted(dbs)

    def policies(self, db: int, after: Optional[tuple[bytes, bytes]], count: int = PAGE
                 ) -> tuple[list[dict[str, Any]], bool]:
        """A page of LIST with each policy's HEALTH, STATS and a bounded SIMULATE, and one
        ``XINFO GROUPS`` per stream of the page (its groups' first deliveries), in one pipeline;
        at most 1 + 4 x ``count`` commands. A policy's own errors (NOPERM) are kept in its row.
        True with it when more policies follow (LIST is asked for one more)."""
        r = self.reclaim(db)
        listed = c.policy_list(after=after, count=count + 1)
        rows = r.execute(c.Command(listed.args, None, _raw_list))
        more = len(rows) > count
        rows = rows[:count]
        if not rows:
            return [], False
        streams = list(dict.fromkeys(as_bytes(p["key"]) for p in rows))
        replies = self._each(db, [cmd for p in rows for cmd in (
            c.health(p["key"], p["group"]), c.stats(p["key"], p["group"]),
            c.simulate(p["key"], p["group"], limit=SIMULATE_LIMIT))]
            + [xinfo_groups(st) for st in streams])
        groups = dict(zip(streams, replies[3 * len(rows):]))
        out = []
        for i, p in enumerate(rows):
            h, s, sim = replies[3 * i: 3 * i + 3]
            row = self._row(db, p, h, s, sim)
            row["entries_read"] = entries_read(groups[as_bytes(p["key"])], as_bytes(p["group"]))
            out.append(row)
        return out, more

    def _each(self, db: int, commands: list[c.Command[Any]]) -> list[Any]:
        """The raw replies of ``commands`` (an error as its exception): one pipeline on a
        server, one command after the other (each to its node) in a cluster."""
        if self._cluster() is None:
            pipe = self.client(db).pipeline(transaction=False)
            for cmd in commands:
                pipe.execute_command(*cmd.args)
            return list(pipe.execute(raise_on_error=False))
        out: list[Any] = []
        for cmd in commands:
            try:
                out.append(self.call(db, c.Command(cmd.args, cmd.key, lambda r: r)))
            except redis.ResponseError as e:
                out.append(e)
        return out

    def _row(self, db: int, p: dict[str, Any], h: Any, s: Any, sim: Any) -> dict[str, Any]:
        row: dict[str, Any] = {"db": db, "key": p["key"], "group": p["group"],
                               "status": c.text(p["status"]), "state": c.text(p["state"]),
                               "dlq": p.get("dlq"), "errors": [],
                               "extra": {k: v for k, v in p.items() if k not in KNOWN}}
        if isinstance(h, Exception):
            row["errors"].append(str(h))
            row["live"] = None
        else:
            health = c._parse_health(h)
            row["live"] = health["live"]
            row["delayed"] = delayed(health["live"], p.get("claimant"))
            row["dead_per_min"] = health["dead-letters"]["last-minute"]
            row["dead_per_hour"] = health["dead-letters"]["last-hour"]
            row["dlq_length"] = health["dead-letters"]["dlq-length"]
            row["pel_change"] = health["pel-change"]
            row["inbox_before"] = health["last-pass"].get("inbox")
            row["most_idle"] = health["deliveries"].get("most-idle-ms")
            row["health_extra"] = {k: v for k, v in c.fields_of(h).items()
                                   if k not in health}
        if isinstance(s, Exception):
            row["errors"].append(str(s))
            row["stats"] = None
        else:
            row["stats"] = c._parse_stats(s)
        if isinstance(sim, Exception):
            row["due"] = None
        else:
            m = c.fields_of(sim)
            totals = c._parse_counts(m["totals"])
            row["due"] = totals.get("move", 0) + totals.get("dead-letter", 0)
            row["due_more"] = int(m["more"]) == 1
        row["alerts"] = alerts(row)
        return row

    def policy(self, db: int, key: bytes, group: bytes) -> dict[str, Any]:
        """One policy's page: GET (every field), STATS, HEALTH, XINFO GROUPS (its first
        deliveries, for the sampler), the head of the PEL."""
        cl = self.client(db)
        got = self.call(db, c.Command(c.policy_get(key, group).args, key, _raw_map))
        if got is None:
            raise LookupError("no reclaim policy for this key and group")
        out: dict[str, Any] = {"db": db, "key": key, "group": group, "fields": got}
        out["stats"] = self.call(db, c.stats(key, group))
        out["health"] = self.call(db, c.health(key, group))
        try:
            out["entries_read"] = entries_read(self.call(db, xinfo_groups(key)), group)
        except redis.ResponseError:
            out["entries_read"] = None
        try:
            out["pending"] = cl.xpending_range(key, group, "-", "+", PENDING_ROWS)
        except redis.ResponseError as e:
            out["pending"] = []
            out["pending_error"] = str(e)
        return out

    def counters(self, db: int, key: bytes, group: bytes) -> tuple[dict[str, Any], Optional[int]]:
        """For the sampler: ``RECLAIM.STATS`` and the group's ``entries-read`` (None: unknown),
        two commands."""
        stats = self.call(db, c.stats(key, group))
        try:
            read = entries_read(self.call(db, xinfo_groups(key)), group)
        except redis.ResponseError:  # a user without XINFO: redeliveries alone
            read = None
        return stats, read

    def simulate(self, db: int, key: bytes, group: bytes, limit: int,
                 options: dict[str, Any]) -> dict[str, Any]:
        return self.reclaim(db).simulate(key, group, limit=limit, **options)

    def dlq_page(self, db: int, dlq: bytes, before: Optional[str], reason: str, source: str
                 ) -> dict[str, Any]:
        """Newest first, ``PAGE`` entries before ``before`` (exclusive); with a filter, at most
        ``FILTER_PAGES`` pages are read to fill the page."""
        cl = self.client(db)
        top = f"({before}" if before else "+"
        entries: list[dict[str, Any]] = []
        read = 0
        last: Optional[str] = None
        more = False
        filtered = bool(reason or source)
        for _ in range(FILTER_PAGES if filtered else 1):
            batch = cl.xrevrange(dlq, top, "-", count=PAGE + 1)  # one more: is there an older?
            more = len(batch) > PAGE
            batch = batch[:PAGE]
            read += len(batch)
            for i, (eid, fields) in enumerate(batch):
                last = c.text(eid)
                e = self._dlq_entry(last, fields)
                if reason and c.text(e["reason"] or b"") != reason:
                    continue
                if source and c.text(e["stream"] or b"") != source:
                    continue
                entries.append(e)
                if len(entries) >= PAGE:
                    more = more or i < len(batch) - 1
                    break
            if len(entries) >= PAGE or not more:
                break
            top = f"({last}"
        return {"entries": entries, "next": last if more else None, "read": read,
                "filtered": filtered, "length": cl.xlen(dlq)}

    @staticmethod
    def _dlq_entry(eid: str, fields: dict[Any, Any]) -> dict[str, Any]:
        f = {as_bytes(k): v for k, v in fields.items()}
        moved = f.get(b"reclaim-moved-ms")
        deliveries = f.get(b"reclaim-deliveries")
        return {
            "id": eid,
            "stream": f.get(b"reclaim-stream"),
            "group": f.get(b"reclaim-group"),
            "source_id": f.get(b"reclaim-id"),
            "consumer": f.get(b"reclaim-consumer"),
            "deliveries": c.text(deliveries) if deliveries is not None else None,
            "reason": f.get(b"reclaim-reason"),
            "last_error": f.get(b"reclaim-last-error"),
            "moved_ms": int(moved) if moved is not None and c.text(moved).isdigit() else None,
            "fields": [(k, v) for k, v in f.items() if k not in META],
        }

    def redrive_status(self, db: int, dlq: bytes) -> Optional[dict[str, Any]]:
        return self.reclaim(db).redrive_status(dlq)

    # -- actions ---------------------------------------------------------------------------

    def pause(self, db: int, key: bytes, group: bytes) -> None:
        self.reclaim(db).policy_pause(key, group)

    def resume(self, db: int, key: bytes, group: bytes) -> None:
        self.reclaim(db).policy_resume(key, group)

    def redrive(self, db: int, dlq: bytes, **options: Any) -> int:
        return self.reclaim(db).redrive(dlq, **options)

    def redrive_cancel(self, db: int, dlq: bytes) -> bool:
        return self.reclaim(db).redrive_cancel(dlq)

    def delete(self, db: int, dlq: bytes, ids: list[str]) -> int:
        return int(self.client(db).xdel(dlq, *ids)) if ids else 0
