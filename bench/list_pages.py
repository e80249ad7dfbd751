"""Server time of RECLAIM.POLICY LIST: all policies, a page, and a user who may see none.

Usage: N=100000 PYTHONPATH=.cache/py python3 bench/list_pages.py [MODULE.so]

Starts redis-server (REDIS_SERVER, default redis-server) with the module on a free port, sets N
policies (default 20,000; `INTERVAL 3600000`, no streams), and prints the server's time
(`CONFIG RESETSTAT`, then `INFO commandstats`, in microseconds) of: LIST of all; a page of 100
from the middle, the first after the policies changed (it sorts them) and the next; `COUNT 1`
and LIST of all for a user whose keys match no stream. Not run by `make bench`.
"""

import os
import sys

import redis

import probe

SO = sys.argv[1] if len(sys.argv) > 1 else "target/release/libredis_reclaim.so"
N = int(os.environ.get("N", "20000"))


def main():
    with probe.server(SO, prefix="list-pages-") as srv:
        r = srv.r
        for start in range(0, N, 1000):
            p = r.pipeline(transaction=False)
            for i in range(start, min(start + 1000, N)):
                p.execute_command("RECLAIM.POLICY", "SET", f"s:{i:06d}", "g", "INTERVAL", 3600000)
            p.execute()
        r.execute_command("ACL", "SETUSER", "hidden", "on", "nopass", "~nothing", "+@all")
        hidden = redis.Redis(port=r.connection_pool.connection_kwargs["port"], username="hidden",
                             password="x")

        def usec(conn, *args):
            r.config_resetstat()
            conn.execute_command("RECLAIM.POLICY", "LIST", *args)
            return r.info("commandstats")["cmdstat_reclaim.policy|list"]["usec"]

        middle = ("AFTER", f"s:{N // 2:06d}", "g", "COUNT", 100)
        print(f"{N} policies, server time in µs")
        print(f"  LIST of all                         {usec(r):>9}")
        print(f"  a page of 100, first after changes  {usec(r, *middle):>9}")
        print(f"  a page of 100, next                 {usec(r, *middle):>9}")
        print(f"  COUNT 1, a user who sees none       {usec(hidden, 'COUNT', 1):>9}")
        print(f"  LIST of all, a user who sees none   {usec(hidden):>9}")


if __name__ == "__main__":
    main()
