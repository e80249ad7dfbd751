#!/usr/bin/env python3
"""Scans the valgrind logs of `make test-valgrind` and fails when an error's stack involves the module.

Usage: valgrind_report.py LOG_DIR. Errors entirely inside redis-server (for example its known
lzf_compress "uninitialised value" reports) are counted and listed, but do not fail the run.
"""
import os
import re
import sys

MODULE_MARKERS = ("libredis_reclaim", "redis_reclaim::", "redis_module::")


def blocks(text):
    """Yields each error report: the lines from an error title to the next blank `==pid==` line."""
    cur = []
    for line in text.splitlines():
        body = re.sub(r"^==\d+== ?", "", line)
        if not body.strip():
            if cur:
                yield cur
            cur = []
        else:
            cur.append(body)
    if cur:
        yield cur


def main():
    d = sys.argv[1]
    logs = sorted(f for f in os.listdir(d) if f.endswith(".log"))
    ours, theirs = [], 0
    for f in logs:
        text = open(os.path.join(d, f), errors="replace").read()
        for b in blocks(text):
            title = b[0]
            if not re.match(r"(Invalid |Conditional jump|Use of uninitialised|Syscall param|Mismatched|Source and destination overlap|.*definitely lost)", title):
                continue
            if any(m in line for line in b for m in MODULE_MARKERS):
                ours.append((f, b))
            else:
                theirs += 1
    print(f"valgrind: {len(logs)} server logs, {len(ours)} error reports involving the module, "
          f"{theirs} inside redis-server only")
    for f, b in ours:
        print(f"--- {f}")
        print("\n".join(b[:25]))
    return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main())
