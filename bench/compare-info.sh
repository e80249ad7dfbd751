#!/usr/bin/env bash
# Side by side: the server time of one `INFO reclaim` with N policies (default 10,000) under two
# builds of the module, on two servers holding the same policies, in interleaved calls.
#   bench/compare-info.sh OLD.so NEW.so [N]
# Prints, per round of 20 calls each, both `cmdstat_info` usec_per_call and their ratio
# (new/old). Servers on loopback ports 47201/47202, in a temporary directory, always stopped.
set -euo pipefail
old=$1 new=$2 n=${3:-10000} rounds=${ROUNDS:-5}
dir=$(mktemp -d)
trap 'redis-cli -p 47201 shutdown nosave >/dev/null 2>&1 || true; redis-cli -p 47202 shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
python3 - "$n" >"$dir/cmds" <<'PY'
import sys
def enc(*a):
    out = b"*%d\r\n" % len(a)
    for x in a:
        x = x.encode()
        out += b"$%d\r\n%s\r\n" % (len(x), x)
    return out
for i in range(int(sys.argv[1])):
    s = "orders:{eu}:%d" % i
    sys.stdout.buffer.write(enc("XGROUP", "CREATE", s, "workers", "$", "MKSTREAM"))
    sys.stdout.buffer.write(enc("RECLAIM.POLICY", "SET", s, "workers", "MIN-IDLE", "60000",
                                "INTERVAL", "3600000", "DLQ", s + ":dlq"))
PY
for p in 47201 47202; do
  so=$old; [ $p = 47202 ] && so=$new
  mkdir -p "$dir/$p"
  redis-server --port $p --daemonize yes --dir "$dir/$p" --save '' --logfile "$dir/$p/log" --loadmodule "$(realpath "$so")"
  until redis-cli -p $p PING >/dev/null 2>&1; do sleep 0.1; done
  redis-cli -p $p --pipe <"$dir/cmds" >/dev/null
done
sleep 2  # the first passes
per_call() { redis-cli -p "$1" INFO commandstats | grep cmdstat_info | sed 's/.*usec_per_call=\([0-9.]*\).*/\1/'; }
for r in $(seq "$rounds"); do
  for p in 47201 47202; do redis-cli -p $p CONFIG RESETSTAT >/dev/null; done
  for i in $(seq 20); do redis-cli -p 47201 INFO reclaim >/dev/null; redis-cli -p 47202 INFO reclaim >/dev/null; done
  a=$(per_call 47201) b=$(per_call 47202)
  echo "round $r: old $a us, new $b us, new/old $(python3 -c "print(round($b/$a, 2))")"
done
