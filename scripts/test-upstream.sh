#!/usr/bin/env bash
# Runs units of Redis's own Tcl test suite against the installed redis-server twice, without and with
# the module (`--config loadmodule ...`), and fails when a test passes without the module and not with
# it. This is what an operator does to check that loading the module changes nothing else.
#
# The suite comes from Debian's source package of the installed redis-server, at exactly the installed
# version, so its tests (Debian's patches included) match the binary. It is fetched once into
# .cache/upstream/ with apt, using a private sources list, lists and cache directory: the system's
# apt configuration is left untouched (no deb-src entry is added, /var/lib/apt/lists is not written),
# and the fetch needs no root. Installing tcl, tcl-tls and dpkg-dev when missing does.
# Nothing of it is committed.
#
# Environment:
#   RECLAIM_MODULE    the module to load (default: see module_path below)
#   UPSTREAM_UNITS    the units to run, separated by spaces (default: DEFAULT_UNITS below)
#   UPSTREAM_CLIENTS  runtest --clients (default: the number of cores, at most 2)
#   UPSTREAM_TIMEOUT  runtest --timeout, seconds without progress before a run is aborted (default 600)
#   RECLAIM_PORT_BASE runtest --baseport, the first port of its servers (make BASE_PORT=N; default
#                     runtest's own, 21111)
# Output: target/upstream/<unit>-plain.log, <unit>-module.log, <unit>-report.txt and summary.txt.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)

# The module under test. The only place that decides its path.
module_path() {
  echo "${RECLAIM_MODULE:-$ROOT/target/release/libredis_reclaim.so}"
}

DEFAULT_UNITS="unit/type/stream unit/type/stream-cgroups unit/keyspace unit/multi unit/acl unit/pubsub
  integration/replication integration/rdb integration/replication-4"
set -f; UNITS=(${UPSTREAM_UNITS:-$DEFAULT_UNITS}); set +f  # split on blanks, no globbing
CACHE=$ROOT/.cache/upstream
OUT=$ROOT/target/upstream
NPROC=$(nproc 2>/dev/null || echo 1)
CLIENTS=${UPSTREAM_CLIENTS:-$((NPROC < 2 ? NPROC : 2))}
TIMEOUT=${UPSTREAM_TIMEOUT:-600}
# The binaries the suite runs from its src/ directory, all from the redis-server and redis-tools packages.
BINARIES=(redis-server redis-cli redis-benchmark redis-check-aof redis-check-rdb)

MODULE=$(module_path)
case $MODULE in /*) ;; *) MODULE=$PWD/$MODULE ;; esac
[ -f "$MODULE" ] || { echo "module not found: $MODULE (make build, or set RECLAIM_MODULE)" >&2; exit 1; }

# --- Tools: tcl runs the suite, tcl-tls is what it loads for --tls, dpkg-dev unpacks the source package.
missing=()
for pkg in tcl tcl-tls dpkg-dev; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "missing: ${missing[*]}. Install them with:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

# --- The installed server and its Debian source package.
for b in "${BINARIES[@]}"; do
  [ -x "/usr/bin/$b" ] || { echo "/usr/bin/$b not found: apt-get install redis-server redis-tools" >&2; exit 1; }
done
VERSION=$(dpkg-query -W -f='${Version}' redis-server)          # e.g. 5:7.0.15-1~deb12u10
SRC_PKG=$(dpkg-query -W -f='${source:Package}' redis-server)    # redis
NOEPOCH=${VERSION#*:}
UPSTREAM_VERSION=${NOEPOCH%-*}                                   # 7.0.15
TOOLS_VERSION=$(dpkg-query -W -f='${Version}' redis-tools 2>/dev/null || true)
if [ "$TOOLS_VERSION" != "$VERSION" ]; then
  echo "redis-tools $TOOLS_VERSION does not match redis-server $VERSION" >&2; exit 1
fi
/usr/bin/redis-server --version | grep -q "v=$UPSTREAM_VERSION " || {
  echo "/usr/bin/redis-server is not $UPSTREAM_VERSION: $(/usr/bin/redis-server --version)" >&2; exit 1; }
TREE=$CACHE/$SRC_PKG-$NOEPOCH

# --- Fetch the source package once: apt-get source with its own sources list, lists and cache.
fetch_source() {
  local apt=$CACHE/apt
  rm -rf "$apt" "$CACHE/$SRC_PKG"-* # a partial tree, or the suite of a version no longer installed
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/dl"
  # deb-src lines for the repositories that carry the installed version (the suite and component
  # the binary came from), or for every configured repository when none does.
  apt-cache madison redis-server | awk -F' [|] ' -v v="$VERSION" '
    $2 == v && $3 ~ / Packages$/ {
      split($3, f, " "); n = split(f[2], sc, "/"); comp = sc[n]; suite = substr(f[2], 1, length(f[2]) - length(comp) - 1)
      print "deb-src " f[1] " " suite " " comp
    }' | sort -u >"$apt/sources.list"
  if [ ! -s "$apt/sources.list" ]; then
    apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' 'Created-By: Packages' |
      awk 'NF == 3 { print "deb-src " $0 }' | sort -u >"$apt/sources.list"
  fi
  echo "fetching the source of $SRC_PKG $VERSION from:"
  sed 's/^/  /' "$apt/sources.list"
  local opts=(
    -o Dir::Etc::sourcelist="$apt/sources.list" -o Dir::Etc::sourceparts=-
    -o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache"
    -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=
    -o APT::Sandbox::User="$(id -un)"
  )
  apt-get "${opts[@]}" -qq update
  (cd "$apt/dl" && apt-get "${opts[@]}" -qq source --download-only "$SRC_PKG=$VERSION") || {
    echo "could not fetch the source of $SRC_PKG $VERSION: is this version still on the mirror?" \
      "(apt-get install --only-upgrade redis-server redis-tools moves to the current one)" >&2
    exit 1
  }
  # Unpacking applies Debian's patches, tests included. Its output (a warning that the .dsc's own
  # signature cannot be checked without debian-keyring; apt has already checked the files against the
  # signed index) is shown only when it fails.
  local out
  out=$(dpkg-source --no-copy -x "$apt/dl/${SRC_PKG}_$NOEPOCH.dsc" "$TREE" 2>&1) || { echo "$out" >&2; exit 1; }
  rm -rf "$apt"
  # Point the suite at the installed binaries: it runs src/redis-server, src/redis-cli, ...
  for b in "${BINARIES[@]}"; do ln -sf "/usr/bin/$b" "$TREE/src/$b"; done
  touch "$TREE/.reclaim-ready"
}
[ -f "$TREE/.reclaim-ready" ] || fetch_source
echo "suite: $TREE (Debian $SRC_PKG $VERSION), against /usr/bin/redis-server"
echo "module: $MODULE"

# --- Processes of the suite left behind (servers, test clients): those whose working directory is in
# the suite's tree. Only ours, whatever else runs on the machine.
own_processes() {
  local p cwd
  for p in $(pgrep -f 'redis-|tests/test_helper.tcl' || true); do
    cwd=$(readlink "/proc/$p/cwd" 2>/dev/null) || continue
    case $cwd in "$TREE" | "$TREE"/*) echo "$p" ;; esac
  done
}
kill_leftovers() {
  local pids i
  for i in 1 2 3 4 5; do # a second or two for the ones on their way out
    pids=$(own_processes | sort -u | paste -sd, -)
    [ -n "$pids" ] || return 0
    sleep 0.5
  done
  echo "killing processes the suite left running:"
  ps -o pid=,args= -p "$pids" | sed 's/^/  /' || true
  kill -9 ${pids//,/ } 2>/dev/null || true
}
trap kill_leftovers EXIT

# --- Run one unit; $1 unit, $2 plain|module. Writes the log, writes "<servers> <servers that loaded
# the module>" to <unit>-<mode>.servers, and echoes the wall time in seconds.
run_unit() {
  local unit=$1 mode=$2 log=$OUT/$1-$2.log start extra=() servers loaded
  [ "$mode" = module ] && extra=(--config loadmodule "$MODULE")
  [ -n "${RECLAIM_PORT_BASE:-}" ] && extra+=(--baseport "$RECLAIM_PORT_BASE")
  mkdir -p "$(dirname "$log")"
  start=$(date +%s)
  # TERM=dumb: no colour codes in the log. The exit code is not used: the log is parsed.
  # --durable: an exception in a test (not only a failed assertion) is reported as that test's [err]
  # and the unit goes on. Without it the runner stops at the first one: the Debian-patched last test
  # of integration/replication raises one in every run (CONFIG SET repl-diskless-load yes, a value
  # 7.0 does not accept), and so would any test hitting an unexpected error with the module.
  # --dump-logs: the servers' logs of a failed test go into the log.
  # --dont-clean: keeps the servers' logs in tests/tmp, to count the servers that loaded the module.
  (cd "$TREE" && TERM=dumb ./runtest --single "$unit" --clients "$CLIENTS" --timeout "$TIMEOUT" \
    --durable --dump-logs --dont-clean "${extra[@]}" </dev/null >"$log" 2>&1) || true
  kill_leftovers >&2
  servers=$(find "$TREE/tests/tmp" -mindepth 2 -maxdepth 2 -path '*/server*/stdout' | wc -l)
  loaded=$(find "$TREE/tests/tmp" -mindepth 2 -maxdepth 2 -path '*/server*/stdout' \
    -exec grep -l -F "' loaded from $MODULE" {} + | wc -l)
  echo "$servers $loaded" >"$OUT/$unit-$mode.servers"
  # What runtest's own cleanup removes.
  rm -rf "$TREE"/tests/tmp/server* "$TREE"/tests/tmp/redis.conf.*
  echo $(($(date +%s) - start))
}

# --- Compare the two logs of a unit. Writes <unit>-report.txt; prints one line of counts:
# plain_ok plain_err module_ok module_err regressions same_failures plain_finished module_finished.
# A test is keyed by its name, with " (#n)" added to the n-th repeat of a name within a run.
# Regressions: a test ok without the module and not ok with it (err, or not run because the run
# stopped), and an error outside any test seen only with the module. Not counted: a test that fails
# in both runs (listed), and one that fails only without the module (listed, flaky).
compare_unit() {
  local unit=$1
  awk -v unit="$unit" -v report="$OUT/$unit-report.txt" -v plainlog="$OUT/$unit-plain.log" '
    function add(name, status,   n, k) {
      n = ++seen[run, name]; k = n > 1 ? name " (#" n ")" : name
      if (!(k in index_of)) { index_of[k] = ++nkeys; keys[nkeys] = k }
      st[run, k] = status
      if (status == "ok" || status == "err") count[run, status]++
    }
    FNR == 1 { run = (FILENAME == plainlog) ? "plain" : "module"; outside = 0 }
    /^\[ok\]: /        { name = substr($0, 7); sub(/ \([0-9]+ ms\)$/, "", name); add(name, "ok"); next }
    # "[err]: <test> in tests/<unit>.tcl", or, for an exception outside a test (--durable), its
    # message cut by the runner and the whole message on the next line.
    outside             { add("error outside a test: " $0, "err"); outside = 0; next }
    /^\[err\]: .* in tests\/[^ ]*\.tcl$/ { name = substr($0, 8); sub(/ in tests\/[^ ]*\.tcl$/, "", name); add(name, "err"); next }
    /^\[err\]: /       { outside = 1; next }
    /^\[skip\]: /      { add(substr($0, 9), "skip"); next }
    /^\[ignore\]: /    { name = substr($0, 11); sub(/: (Tag: .*|Not supported .*|large memory flag not provided)$/, "", name); add(name, "ignore"); next }
    /^\[exception\]: / { abort[run] = $0; next }
    /^\[TIMEOUT\]: /   { abort[run] = $0; next }
    /^ *The End$/      { finished[run] = 1 }
    END {
      for (r = 1; r <= 2; r++) {
        run = r == 1 ? "plain" : "module"
        if (!finished[run] && abort[run] == "") abort[run] = "the runner stopped before the end of the unit"
      }
      for (i = 1; i <= nkeys; i++) {
        k = keys[i]; p = st["plain", k]; m = st["module", k]
        if (p == "ok" && m != "ok") {
          reg[++nreg] = k " (" (m == "" ? "not run: the run with the module stopped before it" : m) ")"
        } else if (p == "err" && m != "ok") {
          same[++nsame] = k " (" (m == "" ? "not run" : m) " with the module)"
        } else if (p == "err" && m == "ok") {
          better[++nbetter] = k
        } else if (p == "" && m == "err") {
          reg[++nreg] = k " (err; not run without the module)"
        } else if (p == "" && m != "" && m != "skip" && m != "ignore") {
          unpaired[++nunpaired] = k " (" m " with the module; not run without it)"
        }
      }
      printf "== %s\n", unit > report
      for (r = 1; r <= 2; r++) {
        run = r == 1 ? "plain" : "module"
        printf "%-6s: %d ok, %d err%s\n", run, count[run, "ok"], count[run, "err"], \
          (abort[run] == "" ? "" : "; ABORTED: " abort[run]) > report
      }
      printf "passes without the module, not with it (%d):\n", nreg > report
      for (i = 1; i <= nreg; i++) print "  " reg[i] > report
      printf "fails without the module too, not counted (%d):\n", nsame > report
      for (i = 1; i <= nsame; i++) print "  " same[i] > report
      if (nbetter) {
        printf "fails without the module, passes with it (%d):\n", nbetter > report
        for (i = 1; i <= nbetter; i++) print "  " better[i] > report
      }
      if (nunpaired) {
        printf "run with the module only (%d):\n", nunpaired > report
        for (i = 1; i <= nunpaired; i++) print "  " unpaired[i] > report
      }
      printf "%d %d %d %d %d %d %d %d\n", count["plain", "ok"], count["plain", "err"], \
        count["module", "ok"], count["module", "err"], nreg, nsame, finished["plain"] + 0, finished["module"] + 0
    }' "$OUT/$unit-plain.log" "$OUT/$unit-module.log"
}

rm -rf "$OUT"
mkdir -p "$OUT"
summary=()
regressions=0
broken_baseline=()
not_loaded=()
total_start=$(date +%s)
for unit in "${UNITS[@]}"; do
  [ -f "$TREE/tests/$unit.tcl" ] || { echo "no such unit: $unit ($TREE/tests/$unit.tcl)" >&2; exit 1; }
  echo "== $unit: without the module"
  t_plain=$(run_unit "$unit" plain)
  echo "== $unit: with the module"
  t_module=$(run_unit "$unit" module)
  read -r p_ok p_err m_ok m_err n_reg n_same p_fin m_fin <<<"$(compare_unit "$unit")"
  read -r servers loaded <"$OUT/$unit-module.servers"
  echo "servers started with the module's loadmodule line: $servers; module loaded in: $loaded" \
    >>"$OUT/$unit-report.txt"
  cat "$OUT/$unit-report.txt"
  # A run in which no server loaded the module compares nothing.
  [ "$servers" = 0 ] || [ "$loaded" -gt 0 ] || not_loaded+=("$unit")
  regressions=$((regressions + n_reg))
  # Without a complete run without the module there is nothing to compare against.
  [ "$p_fin" = 1 ] || broken_baseline+=("$unit")
  summary+=("$(printf '%-26s %4s %4s %4s %4s %11s %9s %6ss %6ss' "$unit" "$p_ok" "$p_err" "$m_ok" "$m_err" \
    "$n_reg" "$n_same" "$t_plain" "$t_module")$([ "$m_fin" = 1 ] || echo ' (aborted with the module)')")
done

{
  echo
  echo "Redis test suite ($SRC_PKG $VERSION) without / with $(basename "$MODULE")"
  printf '%-26s %9s %9s %11s %9s %7s %7s\n' "" "without" "with" "" "" "time" "time"
  printf '%-26s %4s %4s %4s %4s %11s %9s %7s %7s\n' unit ok err ok err regressions "same-err" without with
  printf '%s\n' "${summary[@]}"
  echo "total wall time: $(($(date +%s) - total_start))s; logs and reports in $OUT"
} | tee "$OUT/summary.txt"

if [ ${#broken_baseline[@]} -gt 0 ]; then
  echo "FAIL: the run without the module did not finish for: ${broken_baseline[*]} (see the logs)" >&2
  exit 1
fi
if [ ${#not_loaded[@]} -gt 0 ]; then
  echo "FAIL: no server loaded the module in: ${not_loaded[*]} (see the logs)" >&2
  exit 1
fi
if [ "$regressions" -gt 0 ]; then
  echo "FAIL: $regressions regression(s): ok without the module, not with it:" >&2
  for unit in "${UNITS[@]}"; do
    sed -n '/^passes without the module/,/^fails without/{/^  /s|^|  '"$unit"': |p}' "$OUT/$unit-report.txt" >&2
  done
  exit 1
fi
echo "OK: every test that passes without the module passes with it"
