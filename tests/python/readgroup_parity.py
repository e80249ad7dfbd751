"""Run by tests/examples.rs: redis-py parses RECLAIM.READGROUP's reply exactly as XREADGROUP's.

    python3 tests/python/readgroup_parity.py PORT

The test prepared, for each protocol P in 2, 3 and default (the client's own default: RESP2
before redis-py 8, RESP3 read into RESP2 shapes from 8 on), the streams s1 and s2 with the same
entries, read by no one yet in the group plain-P, and in the group reclaim-P (with a policy) the
two oldest entries of s1 waiting in the claimant's inbox. XREADGROUP in plain-P and
RECLAIM.READGROUP in reclaim-P (inbox first, then new entries) must give the same entries, and
parsed with XREADGROUP's callback the same Python value; so must the empty replies after them.
Prints what it compared; exits 1 on the first difference.
"""
import sys

import redis


def count_entries(parsed):
    """Entries in a parsed XREADGROUP reply, whatever its shape (list of [key, entries], or a dict
    from key to entries, or from key to [entries] with protocol=3 in redis-py 5 to 7)."""
    pairs = parsed.items() if isinstance(parsed, dict) else parsed
    n = 0
    for _key, entries in pairs:
        if entries and isinstance(entries[0], list):
            entries = entries[0]
        n += len(entries)
    return n


def main():
    port = int(sys.argv[1])
    print(f"redis-py {redis.__version__}")
    for proto in ("2", "3", "default"):
        kwargs = {} if proto == "default" else {"protocol": int(proto)}
        r = redis.Redis(port=port, **kwargs)
        r.set_response_callback("RECLAIM.READGROUP", r.response_callbacks["XREADGROUP"])
        for what, block in (("entries", None), ("nothing", 10)):
            want = r.xreadgroup(f"plain-{proto}", "c", {"s1": ">", "s2": ">"}, count=10, block=block)
            args = ["GROUP", f"reclaim-{proto}", "c", "COUNT", 10]
            if block is not None:
                args += ["BLOCK", block]
            got = r.execute_command("RECLAIM.READGROUP", *args, "STREAMS", "s1", "s2", ">", ">")
            print(f"protocol {proto}, {what}: XREADGROUP {want!r}; RECLAIM.READGROUP {got!r}")
            if got != want or type(got) is not type(want):
                print(f"FAIL: protocol {proto}, {what}: the parsed replies differ")
                return 1
            expected = 5 if what == "entries" else 0
            if count_entries(want) != expected:
                print(f"FAIL: protocol {proto}, {what}: {count_entries(want)} entries, want {expected}")
                return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
