"""What the keyless policy commands need in Redis Cluster, where each node has its own policies
(those of the streams in its slots): LIST and EXPORT ask every primary and merge the replies;
IMPORT sends each node the policies of its own streams; a keyed command goes to its key's node,
again when the slot map changed under it. Pure functions and steps (generators that yield what to
send where): the sync and asyncio clients run the same steps, each with its own I/O."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Generator, Mapping, Optional, Union

from redis.exceptions import AskError, MovedError, RedisClusterException, ResponseError

from ._commands import Imported, Name, fields_of, parse_import, text

#: How many times a keyed command is sent again after a redirection (MOVED, ASK) or a slot map
#: that changed under it (a reshard, a failover).
ATTEMPTS = 3


def key_bytes(name: Any) -> bytes:
    """A name of an EXPORT document (a JSON string, or ``{"hex": "..."}``) as bytes."""
    if isinstance(name, str):
        return name.encode("utf-8")
    if isinstance(name, Mapping) and "hex" in name:
        return bytes.fromhex(str(name["hex"]))
    raise ValueError(f"not a name of a policy document: {name!r}")


def _raw(name: Any) -> bytes:
    return name if isinstance(name, bytes) else str(name).encode("utf-8")


def merge_lists(replies: list[Any], args: tuple[Any, ...] = ()) -> list[Any]:
    """The LIST replies of every primary as one list (each node lists its own streams), sorted
    as LIST sorts: by key, then group, in byte order. With ``COUNT n`` in ``args`` (each node
    answered its first n after the same place), the first n of them: the cluster's page."""
    out: list[Any] = []
    for r in replies:
        out.extend(r or [])

    def order(policy: Any) -> tuple[bytes, bytes]:
        f = fields_of(policy)
        return _raw(f["key"]), _raw(f["group"])

    out.sort(key=order)
    # As policy_list builds them: LIST [AFTER stream group] [COUNT n] (4 or 7 words with COUNT).
    if len(args) in (4, 7):
        return out[: int(args[-1])]
    return out


def merge_exports(replies: list[Any]) -> str:
    """The EXPORT documents of every primary as one, sorted by key then group as EXPORT sorts."""
    policies: list[Any] = []
    version = 1
    for r in replies:
        doc = json.loads(text(r))
        version = doc.get("version", version)
        policies.extend(doc.get("policies", []))
    policies.sort(key=lambda p: (key_bytes(p["key"]), key_bytes(p["group"])))
    return json.dumps({"version": version, "policies": policies}, indent=2)


def split_import(document: Union[str, bytes, Mapping[str, Any]]) -> tuple[Any, list[tuple[bytes, Any]]]:
    """The version of an IMPORT document and its policies, each with its stream key's bytes (to
    find the node that serves it). Raises ValueError when the document cannot be read (the caller
    then sends it whole, for the server's own error)."""
    doc = json.loads(document) if isinstance(document, (str, bytes)) else document
    if not isinstance(doc, Mapping) or not isinstance(doc.get("policies"), list):
        raise ValueError("not a policy document")
    out = []
    for p in doc["policies"]:
        if not isinstance(p, Mapping) or "key" not in p:
            raise ValueError("a policy without a key")
        out.append((key_bytes(p["key"]), p))
    return doc.get("version"), out


def import_document(version: Any, policies: list[Any]) -> str:
    return json.dumps({"version": version, "policies": policies})


def import_by_node(
    client: Any, args: tuple[Any, ...]
) -> Optional[list[tuple[Any, tuple[Any, ...], list[int]]]]:
    """``RECLAIM.POLICY IMPORT``'s arguments split per node of ``client`` (a sync or asyncio
    RedisCluster): for each node, the command with the policies of the streams it serves, and
    their places in the whole document. None when the document cannot be read (send it whole,
    for the server's own error)."""
    try:
        version, policies = split_import(args[2])
    except ValueError:
        return None
    by_node: dict[str, tuple[Any, list[Any], list[int]]] = {}
    for i, (key, policy) in enumerate(policies):
        node = client.get_node_from_key(key)
        entry = by_node.setdefault(node.name, (node, [], []))
        entry[1].append(policy)
        entry[2].append(i)
    return [
        (node, (*args[:2], import_document(version, part), *args[3:]), places)
        for node, part, places in by_node.values()
    ]


def merge_imports(replies: list[tuple[Any, list[int]]]) -> Imported:
    """One ``IMPORT`` result of the nodes' replies, each with the document places of its
    policies: the counts added, the waiting policies with their places in the whole document."""
    total, waiting = 0, []
    for reply, places in replies:
        part = parse_import(reply)
        total += int(part)
        for w in part.waiting:
            waiting.append({**w, "index": places[w["index"]]})
    waiting.sort(key=lambda w: int(w["index"]))
    return Imported(total, waiting)


# -- the steps of sending in a cluster -----------------------------------------------------------


@dataclass(frozen=True)
class Send:
    """A step: ``client.execute_command(*args, target_nodes=node)``; the reply (or the error
    thrown in) comes back."""

    args: tuple[Any, ...]
    node: Any


@dataclass(frozen=True)
class Refresh:
    """A step: read the slot map again (``client.nodes_manager.initialize()``)."""


Steps = Generator[Union[Send, Refresh], Any, Any]


def to_key(client: Any, args: tuple[Any, ...], key: Name) -> Steps:
    """Sends ``args`` to the primary serving ``key``'s slot. The server refuses a keyed command
    on another node with MOVED or ASK, which redis-py follows; when the slot map changed under it
    (a reshard, a failover) the map is read again and the command sent again, at most
    ``ATTEMPTS`` times. A RECLAIM.READGROUP that fails may have reached a node that no longer
    serves its streams (a module version that does not have Redis check the slot of READGROUP's
    streams answers NOGROUP there, or an error of its own): the map is read again, and the
    command sent again if the key's node changed."""
    for attempt in range(ATTEMPTS):
        last = attempt == ATTEMPTS - 1
        node = client.get_node_from_key(key)
        try:
            return (yield Send(args, node))
        except (MovedError, AskError, RedisClusterException):
            if last:
                raise
            yield Refresh()
        except ResponseError:
            if last or args[0] != "RECLAIM.READGROUP":
                raise
            yield Refresh()
            if client.get_node_from_key(key).name == node.name:
                raise
    raise AssertionError("unreachable")


def keyless(client: Any, args: tuple[Any, ...]) -> Steps:
    """LIST and EXPORT from every primary, merged; IMPORT split by the node of each stream."""
    sub = text(args[1]).upper()
    if sub == "IMPORT":
        parts = import_by_node(client, args)
        if parts is None:  # let the server say what is wrong with the document
            return (yield Send(args, client.get_random_node()))
        imported = []
        for node, part, places in parts:
            imported.append(((yield Send(part, node)), places))
        return merge_imports(imported)
    replies = []
    for node in client.get_primaries():
        replies.append((yield Send(args, node)))
    if sub == "LIST":
        return merge_lists(replies, args)
    if sub == "EXPORT":
        return merge_exports(replies)
    return replies[0] if replies else None
