#!/usr/bin/env bash
# Installs what building and testing redis-reclaim needs on Debian/Ubuntu: redis-server (the server the
# module loads into and the tests start) and libclang-dev (bindgen, used by the redis-module crate).
# As root it installs them with apt-get; otherwise it prints the exact command and fails.
set -euo pipefail

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
if ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 && ! ldconfig -p 2>/dev/null | grep -q 'libclang[-.0-9]*\.so'; then
  missing+=(libclang-dev)
fi
command -v cargo >/dev/null 2>&1 || { echo "cargo not found: install the Rust toolchain (https://rustup.rs) first" >&2; exit 1; }

[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "missing: ${missing[*]}. Install them with:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
