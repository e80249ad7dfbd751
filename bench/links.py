"""The section of docs/performance.md that points to the figures measured by other targets
(`make bench-web`: docs/performance-web.md; `make bench-node`: docs/performance-node.md).

`make bench` rewrites docs/performance.md and then runs this, so the section is always there;
`make bench-web` runs it too. Between its markers it is replaced, never duplicated.

Usage: python3 bench/links.py [docs/performance.md]
"""

import os
import re
import sys

BEGIN = "<!-- bench/links.py: begin -->"
END = "<!-- bench/links.py: end -->"

SECTION = f"""{BEGIN}
## Measured elsewhere

- **The web dashboard** (`make bench-web`, [bench/web_load.py](../bench/web_load.py)): the
  latency of the server's other clients with and without a dashboard that shows 1,000 policies
  refreshed every second, and what its pages cost the server:
  [performance-web.md](performance-web.md).
- **The Node.js Worker** against BullMQ (`make bench-node`):
  [performance-node.md](performance-node.md).
{END}"""


def put_section(out, begin, end, text, empty=""):
    """Replaces the part of file `out` from marker `begin` to marker `end` by `text` (which holds
    both markers), or appends `text` when the markers are not there (to `empty` when there is no
    file)."""
    try:
        with open(out) as f:
            doc = f.read()
    except FileNotFoundError:
        doc = empty
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    if pattern.search(doc):
        doc = pattern.sub(lambda _m: text, doc)
    else:
        doc = doc.rstrip("\n") + "\n\n" + text + "\n"
    with open(out, "w") as f:
        f.write(doc)


def write(out="docs/performance.md"):
    """Puts the section at the end of `out` (or replaces it where it is)."""
    put_section(out, BEGIN, END, SECTION, empty="# Performance\n")


if __name__ == "__main__":
    write(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("BENCH_OUT", "docs/performance.md"))
