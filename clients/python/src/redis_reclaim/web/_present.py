"""How values look on a page: names and field values as text or hex, times, folding. Pure."""

from __future__ import annotations

import binascii
import time
from typing import Any, Optional

#: A field value longer than this is folded (shown in a <details> element).
FOLD = 120


def as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    return str(value).encode()


def is_text(value: bytes) -> bool:
    """Printable UTF-8 (tabs and newlines allowed): shown as text, else as hex."""
    try:
        s = value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(ch.isprintable() or ch in "\t\r\n" for ch in s)


def show(value: Any) -> dict[str, Any]:
    """A value from a stream or a reply, for a template: ``{"text", "hex", "folded"}``. Jinja2
    escapes whatever ``text`` holds: a field ``<script>`` shows as those characters."""
    if value is None:
        return {"text": "(nil)", "hex": False, "folded": False, "short": "(nil)"}
    b = as_bytes(value)
    if is_text(b):
        t = b.decode("utf-8")
        hexed = False
    else:
        t = binascii.hexlify(b).decode()
        hexed = True
    folded = len(t) > FOLD
    return {"text": t, "hex": hexed, "folded": folded, "short": t[:FOLD] + ("…" if folded else "")}


def label(value: Any) -> str:
    """A key, group or consumer name as one line of text (binary bytes as \\xNN escapes)."""
    if value is None:
        return ""
    b = as_bytes(value)
    if is_text(b):
        return b.decode("utf-8")
    return "".join(chr(c) if 32 <= c < 127 and c != 92 else f"\\x{c:02x}" for c in b)


def param(value: Any) -> str:
    """A name in a URL's query: text as itself, anything else as ``hex:...``."""
    b = as_bytes(value)
    if is_text(b) and not b.startswith(b"hex:"):
        return b.decode("utf-8")
    return "hex:" + binascii.hexlify(b).decode()


def unparam(value: str) -> bytes:
    """The inverse of :func:`param`."""
    if value.startswith("hex:"):
        return binascii.unhexlify(value[4:])
    return value.encode("utf-8")


def rate(per_min: Optional[float]) -> str:
    """A rate per minute: whole numbers from 10 up, one decimal below."""
    if per_min is None:
        return "-"
    return f"{per_min:.0f}" if per_min >= 10 else f"{per_min:.1f}"


def duration(ms: Optional[int]) -> str:
    if ms is None:
        return "-"
    s = ms / 1000
    if s < 1:
        return f"{ms} ms"
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    if s < 172800:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def when(ms: Optional[int]) -> str:
    if not ms:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d} UTC"


def redact(url: str) -> str:
    """The URL without its password: ``redis://user:***@host:port/db``."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    auth, at, host = rest.rpartition("@")
    if not at:
        return url
    user = auth.split(":", 1)[0] if ":" in auth else ""
    if ":" not in auth:  # redis://password@host
        return f"{scheme}://***@{host}"
    return f"{scheme}://{user}:***@{host}"
