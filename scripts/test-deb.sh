#!/usr/bin/env bash
# make test-deb: installs the Debian package (make deb) the way an operator does, in a fresh Debian 12
# (bookworm) chroot, and checks that the module works there.
#
# Usage: scripts/test-deb.sh PACKAGE.deb    (as root: debootstrap, chroot, mount)
#
# 1. A minimal bookworm tree made by debootstrap, once, cached in $DEB_CHROOT_BASE (default
#    /var/tmp/redis-reclaim-bookworm), from the Debian mirror this machine's apt already uses (the
#    first `URIs:` of /etc/apt/sources.list.d/*.sources, else the first `deb` line of sources.list),
#    with redis-server's packages downloaded into its apt cache. Each run works on a copy of it.
# 2. docs/loading.md's blocks marked `run-by=scripts/test-deb.sh`, in the copy: each ```sh block
#    runs as root in the directory that holds the .deb (`apt-get install ./redis-reclaim_...deb`,
#    which pulls redis-server); each ```conf block is appended to /etc/redis/redis.conf.
# 3. redis-server starts in the chroot (as the package's `redis` user, on a free loopback port) with
#    that redis.conf; `MODULE LIST` must show `reclaim`, and one policy's first dead-letter must reach
#    its DLQ within 20 s.
# 4. Each ```redis-cli block of docs/loading.md marked `run-by=scripts/test-deb.sh` (MODULE LOADEX
#    with the package's path) is typed into a second redis-server of the chroot, started with the package's
#    redis.conf as installed (no module) and with `enable-module-command yes`; what redis-cli prints must be the lines the page
#    shows under each command.
# The servers are always stopped and /proc unmounted, and the copy removed.
set -euo pipefail
cd "$(dirname "$0")/.."
deb=${1:?usage: scripts/test-deb.sh PACKAGE.deb}
[ -f "$deb" ] || { echo "test-deb: no such file: $deb" >&2; exit 2; }
[ "$EUID" = 0 ] || { echo "test-deb: needs root (debootstrap, chroot, mount)" >&2; exit 2; }
page=docs/loading.md
base=${DEB_CHROOT_BASE:-/var/tmp/redis-reclaim-bookworm}
export DEBIAN_FRONTEND=noninteractive
started=$SECONDS
say() { echo "test-deb [$((SECONDS - started)) s]: $*"; }

# --- 0. the package's fields and files, as dpkg-deb shows them ---
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
field() { dpkg-deb -f "$deb" "$1"; }
expect() { [ "$2" = "$3" ] || { echo "test-deb: $1: '$2', expected '$3'" >&2; exit 1; }; }
expect Package "$(field Package)" redis-reclaim
expect Version "$(field Version)" "$version-1"
expect Depends "$(field Depends | sed 's/.*, redis-server/redis-server/')" 'redis-server (>= 5:7.0) | valkey-server'
files=$(dpkg-deb -c "$deb" | awk '{ print $1, $6 }')
for f in '-rwxr-xr-x ./usr/lib/redis/modules/redis-reclaim.so' \
  '-rw-r--r-- ./usr/share/doc/redis-reclaim/redis.conf.example' \
  '-rw-r--r-- ./usr/share/doc/redis-reclaim/README.md' \
  '-rw-r--r-- ./usr/share/doc/redis-reclaim/CHANGELOG.md' \
  '-rw-r--r-- ./usr/share/doc/redis-reclaim/docs/dashboard-overview.png' \
  '-rw-r--r-- ./usr/share/doc/redis-reclaim/docs/loading.md' \
  '-rw-r--r-- ./usr/share/doc/redis-reclaim/docs/configuration.md'; do
  grep -qxF -- "$f" <<<"$files" || { echo "test-deb: the package lacks $f" >&2; dpkg-deb -c "$deb" >&2; exit 1; }
done

# The example configuration loads the module from where the package puts it.
conf=$(dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/share/doc/redis-reclaim/redis.conf.example)
grep -qx 'loadmodule /usr/lib/redis/modules/redis-reclaim.so' <<<"$conf" ||
  { echo "test-deb: redis.conf.example does not load /usr/lib/redis/modules/redis-reclaim.so:" >&2; grep loadmodule <<<"$conf" >&2; exit 1; }

# --- 1. the cached bookworm tree ---
if [ ! -x "$base/bin/bash" ]; then
  command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }
  mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{ print $1; exit }')
  [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
  [ -n "$mirror" ] || { echo "test-deb: no Debian mirror in this machine's apt sources" >&2; exit 2; }
  say "debootstrap bookworm from $mirror into $base (once)"
  rm -rf "$base.new"
  debootstrap --variant=minbase bookworm "$base.new" "$mirror" >/var/tmp/redis-reclaim-debootstrap.log 2>&1 ||
    { tail -5 /var/tmp/redis-reclaim-debootstrap.log >&2; echo "test-deb: debootstrap failed" >&2; exit 2; }
  # No service starts while packages install (there is no init in a chroot).
  printf '#!/bin/sh\nexit 101\n' >"$base.new/usr/sbin/policy-rc.d"
  chmod 755 "$base.new/usr/sbin/policy-rc.d"
  chroot "$base.new" sh -c 'apt-get update -qq && apt-get install -y -qq --download-only redis-server >/dev/null'
  mv "$base.new" "$base"
fi

# --- a copy to install into; always cleaned up ---
work=$(mktemp -d /var/tmp/redis-reclaim-deb.XXXXXX)
root=$work/root
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  umount "$root/proc" 2>/dev/null || true
  # Never remove a tree with something still mounted in it.
  if ! grep -q " $root/" /proc/mounts; then rm -rf "$work"; else echo "test-deb: $root still has mounts; left in place" >&2; fi
}
trap cleanup EXIT
cp -a "$base" "$root"
mount -t proc proc "$root/proc"
say "copied the bookworm tree"

# The body of every block of $page whose fence is "```$1 run-by=scripts/test-deb.sh".
blocks() {
  awk -v kind="$1" '
    /^```/ && open { open = 0; next }
    /^```/ { open = ($0 == "```" kind " run-by=scripts/test-deb.sh"); next }
    open { print }' "$page"
}

# --- 2. the page's install commands and redis.conf lines ---
pkgdir=/root/packages
mkdir -p "$root$pkgdir"
cp "$deb" "$root$pkgdir/"
install=$(blocks sh)
[ -n "$install" ] || { echo "test-deb: $page has no sh block run-by=scripts/test-deb.sh" >&2; exit 1; }
say "running $page's install block: $install"
chroot "$root" env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
  sh -ec "cd $pkgdir && $install" >"$work/install.log" 2>&1 ||
  { tail -20 "$work/install.log" >&2; echo "test-deb: the install block failed" >&2; exit 1; }
[ -f "$root/usr/lib/redis/modules/redis-reclaim.so" ] || { echo "test-deb: no /usr/lib/redis/modules/redis-reclaim.so" >&2; exit 1; }
say "installed: $(chroot "$root" dpkg-query -W -f '${Package} ${Version}; ' redis-reclaim redis-server)"
conf=$(blocks conf)
grep -q '^loadmodule /usr/lib/redis/modules/redis-reclaim.so' <<<"$conf" ||
  { echo "test-deb: $page has no conf block run-by=scripts/test-deb.sh with the loadmodule line" >&2; exit 1; }
cp "$root/etc/redis/redis.conf" "$work/redis.conf.packaged"
printf '\n%s\n' "$conf" >>"$root/etc/redis/redis.conf"
mkdir -p "$root/run/redis"
chroot "$root" chown redis:redis /run/redis

# A free loopback port, from RECLAIM_PORT_BASE (make's BASE_PORT) upward when set.
next_port=${RECLAIM_PORT_BASE:-$((20000 + RANDOM % 20000))}
free_port() {
  while (exec 3<>"/dev/tcp/127.0.0.1/$next_port") 2>/dev/null; do next_port=$((next_port + 1)); done
  port=$next_port
  next_port=$((next_port + 1))
}

cli() { chroot "$root" redis-cli -p "$1" "${@:2}"; }

# Starts redis-server in the chroot as `redis` with /etc/redis/redis.conf and options $2...; $1 names
# its log; waits up to 20 s for PONG. Sets `port`.
start_server() {
  local log=/var/log/redis/$1.log
  free_port
  chroot --userspec=redis:redis "$root" redis-server /etc/redis/redis.conf --port "$port" --bind 127.0.0.1 \
    --daemonize no --supervised no --logfile "$log" --pidfile "/run/redis/$1.pid" "${@:2}" &
  pids+=($!)
  local deadline=$((SECONDS + 20))
  until [ "$(cli "$port" PING 2>/dev/null)" = PONG ]; do
    if [ $SECONDS -ge $deadline ] || ! kill -0 "${pids[-1]}" 2>/dev/null; then
      tail -20 "$root$log" >&2
      echo "test-deb: redis-server ($1) did not start on port $port" >&2
      exit 1
    fi
    sleep 0.1
  done
}

# --- 3. the packaged server with the module: MODULE LIST, one policy's first dead-letter ---
start_server with-module
say "redis-server $(chroot "$root" redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') on port $port"
cli "$port" MODULE LIST | grep -qx reclaim || { cli "$port" MODULE LIST >&2; echo "test-deb: MODULE LIST has no reclaim" >&2; exit 1; }
cli "$port" XGROUP CREATE orders workers '$' MKSTREAM >/dev/null
cli "$port" RECLAIM.POLICY SET orders workers MIN-IDLE 100 MAX-DELIVERIES 1 DLQ orders:dlq INTERVAL 100 >/dev/null
cli "$port" XADD orders '*' job 1 >/dev/null
cli "$port" XREADGROUP GROUP workers w1 COUNT 1 STREAMS orders '>' >/dev/null
deadline=$((SECONDS + 20))
until [ "$(cli "$port" XLEN orders:dlq)" = 1 ]; do
  [ $SECONDS -lt $deadline ] || { cli "$port" RECLAIM.POLICY GET orders workers >&2; echo "test-deb: no dead-letter in orders:dlq after 20 s" >&2; exit 1; }
  sleep 0.1
done
say "MODULE LIST shows reclaim; the policy's first dead-letter is in orders:dlq"

# --- 4. the page's redis-cli blocks against a server without the module ---
cp "$work/redis.conf.packaged" "$root/etc/redis/redis.conf"
start_server bare --enable-module-command yes
ran=0
check_command() { # $1: the command line; $2: the lines the page shows under it
  local got
  got=$(printf '%s\n' "$1" | cli "$port" --no-raw 2>&1)
  if [ "$got" != "$2" ]; then
    printf 'test-deb: %s: %s\n--- the page shows:\n%s\n--- redis-cli printed:\n%s\n' "$page" "$1" "$2" "$got" >&2
    exit 1
  fi
  ran=$((ran + 1))
}
command='' expected=''
while IFS= read -r line; do
  if [[ $line == '127.0.0.1:6379> '* ]]; then
    [ -z "$command" ] || check_command "$command" "$expected"
    command=${line#127.0.0.1:6379> } expected=''
  else
    expected+=${expected:+$'\n'}$line
  fi
done < <(blocks redis-cli)
[ -z "$command" ] || check_command "$command" "$expected"
[ "$ran" -gt 0 ] || { echo "test-deb: $page has no redis-cli block run-by=scripts/test-deb.sh" >&2; exit 1; }
say "$ran commands of $page's redis-cli blocks printed what the page shows"
say "passed"
