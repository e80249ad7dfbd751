#!/usr/bin/env bash
# Installs what building and testing redis-reclaim needs on Debian/Ubuntu: redis-server (the server the
# module loads into and the tests start) and libclang-dev (bindgen, used by the redis-module crate's build
# script, loads libclang and needs clang's own headers). As root it installs them with apt-get; otherwise
# it prints the exact command and fails.
#
# Usage:
#   scripts/deps.sh            check; install what is missing (root) or print the apt-get command (exit 1)
#   scripts/deps.sh --dry-run  print `missing: PACKAGE...` (nothing when nothing is missing); never installs
#   scripts/deps.sh --env      print `LIBCLANG_PATH=FILE` when bindgen must be told which libclang to use
#                              (the Makefile puts it in front of every cargo command); else print nothing
#   scripts/deps.sh --python   check that `python3 -m pip` works (make test installs redis-py with it for
#                              the Python example's test); install python3-pip (root) or print the command
#   scripts/deps.sh --monitoring  check for Prometheus (prometheus, promtool) and redis_exporter
#                              (prometheus-redis-exporter), for make test-monitoring; install them (root)
#                              or print the command
#   scripts/deps.sh --web      check for Debian's chromium (the browser make test-web drives with
#                              Playwright, which cannot download its own); install it (root) or print
#                              the command
#
# The libclang check asks what bindgen asks. redis-module builds bindgen with its `runtime` feature, so
# clang-sys (1.x) looks for libclang when the build script runs (build/common.rs, build/dynamic.rs):
#   - file names `libclang.so`, `libclang-*.so`, `libclang.so.*`, `libclang-*.so.*`, except names
#     containing `-cpp.` (libclang-cpp.so.14 is Clang's C++ library, not libclang);
#   - only in LIBCLANG_PATH (a directory, or the file itself) when it is set; otherwise in
#     `llvm-config --prefix`/{bin,lib,lib64} (LLVM_CONFIG_PATH or llvm-config on PATH), LD_LIBRARY_PATH,
#     LIBRARY_PATH, then /usr/local/llvm*/lib*, /usr/local/lib*/*/*, /usr/local/lib*/*, /usr/local/lib*,
#     /usr/lib*/*/*, /usr/lib*/*, /usr/lib* (the ld.so cache plays no part: ldconfig -p is not asked);
#   - a file counts when it is an ELF library of the host's class (64-bit here);
#   - of all that count, the one with the highest version parsed from its name, the first found on a tie.
# That library must also find clang's builtin headers (stddef.h, from libclang-common-N-dev on Debian):
# without them bindgen fails with "'stddef.h' file not found" (Debian's libclang1-14 alone does that).
# So libclang counts as present when bindgen's pick has its headers; when its pick has none but another
# libclang has them (several LLVM versions installed), `--env` names that one in LIBCLANG_PATH; when no
# libclang has them, libclang-dev is missing (it brings the default version's libclang.so and headers).
#
# Testing (tests/deps.rs): DEPS_ROOT (default: empty, i.e. /) is a directory tree that stands in for / in
# the system directories above; with it set the script only reports (--dry-run, --env), never installs.
set -euo pipefail
shopt -s nullglob
export LC_ALL=C # byte-order glob sorting, as clang-sys's glob; byte-wise reads of ELF headers

mode=${1:-check}
case $mode in
  check | --dry-run | --env | --python | --monitoring | --web) ;;
  *) echo "usage: $0 [--dry-run | --env | --python | --monitoring | --web]" >&2; exit 2 ;;
esac
root=${DEPS_ROOT:-}
root=${root%/}
if [ -n "$root" ] && { [ "$mode" = check ] || [ "$mode" = --python ] || [ "$mode" = --monitoring ] || [ "$mode" = --web ]; }; then
  echo "DEPS_ROOT is set ($root): only --dry-run and --env are allowed" >&2
  exit 2
fi

# python3 and its pip (Debian's python3-pip brings both), for `pip install --target .cache/py redis`.
if [ "$mode" = --python ]; then
  python3 -m pip --version >/dev/null 2>&1 && exit 0
  if [ "$EUID" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing: python3-pip"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq python3-pip >/dev/null
    exit 0
  fi
  echo "missing: python3-pip. Install it with:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y python3-pip" >&2
  exit 1
fi

# Debian's Prometheus (prometheus, promtool) and redis_exporter (prometheus-redis-exporter).
if [ "$mode" = --monitoring ]; then
  missing=()
  command -v prometheus >/dev/null && command -v promtool >/dev/null || missing+=(prometheus)
  command -v prometheus-redis-exporter >/dev/null || missing+=(prometheus-redis-exporter)
  [ ${#missing[@]} -eq 0 ] && exit 0
  if [ "$EUID" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
    exit 0
  fi
  echo "missing: ${missing[*]}. Install with:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi

# Debian's chromium, for the dashboard's browser tests (make test-web).
if [ "$mode" = --web ]; then
  command -v chromium >/dev/null && exit 0
  if [ "$EUID" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing: chromium"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq chromium >/dev/null
    exit 0
  fi
  echo "missing: chromium. Install it with:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y chromium" >&2
  exit 1
fi

# The ELF class byte of file $1 (1: 32-bit, 2: 64-bit), or nothing when it is not a readable ELF file.
elf_class() {
  local header=''
  { IFS= read -r -N 5 header <"$1"; } 2>/dev/null || true
  if [ "${header:0:4}" = $'\x7fELF' ]; then printf '%s' "${header:4:1}"; fi
}
host_class=$(elf_class "$BASH") # the build script runs on this machine, as this bash does

# clang-sys's version of a libclang file name, as space-separated numbers: `libclang.so.A.B` gives A B;
# `libclang-X` gives the part between `libclang-` and the last 3 characters split at dots (so
# libclang-14.so gives 14, libclang-14.so.1 gives 14 0); a part that is not a number counts as 0.
clangsys_version() {
  local name=$1 rest part out=()
  case $name in
    libclang.so.*) rest=${name#libclang.so.} ;;
    libclang-*) rest=${name:9:${#name}-12} ;;
    *) echo; return ;;
  esac
  while :; do
    part=${rest%%.*}
    if [[ $part =~ ^[0-9]{1,9}$ ]]; then out+=($((10#$part))); else out+=(0); fi
    [[ $rest == *.* ]] || break
    rest=${rest#*.}
  done
  echo "${out[*]}"
}

# Whether version $1 is greater than version $2 (both from clangsys_version), compared as clang-sys
# compares them (number by number; a version that extends the other is greater).
version_gt() {
  local a b i
  read -ra a <<<"$1"
  read -ra b <<<"$2"
  for ((i = 0; i < ${#a[@]} && i < ${#b[@]}; i++)); do
    if ((a[i] != b[i])); then ((a[i] > b[i])); return; fi
  done
  ((${#a[@]} > ${#b[@]}))
}

found=() # libclang files bindgen would consider, in its search order

# Appends the libclang files among paths $@ (the expansion of DIR/libclang* for one or more
# directories, sorted, so each directory's files are together) to `found`, in clang-sys's order:
# directory by directory, and in a directory file name pattern by file name pattern.
add_files() {
  local f dir='' group=() pattern g name
  for f in "$@" ''; do
    if [ -n "$dir" ] && { [ -z "$f" ] || [ "${f%/*}" != "$dir" ]; }; then
      for pattern in 'libclang.so' 'libclang-*.so' 'libclang.so.*' 'libclang-*.so.*'; do
        for g in "${group[@]}"; do
          name=${g##*/}
          # shellcheck disable=SC2053 # $pattern is a glob on purpose
          if [[ $name == $pattern && $name != *-cpp.* ]]; then found+=("$g"); fi
        done
      done
      group=()
    fi
    if [ -z "$f" ]; then break; fi
    dir=${f%/*}
    group+=("$f")
  done
}

# The files named by LIBCLANG_PATH, as clang-sys reads it: the file itself when it is one of the
# libclang files of its directory, otherwise the libclang files in it as a directory.
search_libclang_path() {
  local p=${LIBCLANG_PATH%/} parent=. f
  if [[ $p == */* ]]; then parent=${p%/*}; fi
  add_files "$parent"/libclang*
  for f in "${found[@]}"; do
    if [ "${f##*/}" = "${p##*/}" ]; then found=("$p"); return; fi
  done
  found=()
  add_files "$p"/libclang*
}

# Every libclang file bindgen would consider, in its search order, into `found`.
search_libclang() {
  found=()
  if [ -n "${LIBCLANG_PATH:-}" ]; then search_libclang_path; return; fi
  local prefix dir
  if prefix=$("${LLVM_CONFIG_PATH:-llvm-config}" --prefix 2>/dev/null) && [ -n "$prefix" ]; then
    prefix=${prefix%%$'\n'*}
    for dir in bin lib lib64; do add_files "$prefix/$dir"/libclang*; done
  fi
  local dirs=() ld=() lib=()
  IFS=: read -ra ld <<<"${LD_LIBRARY_PATH:-}"
  IFS=: read -ra lib <<<"${LIBRARY_PATH:-}"
  dirs=("${ld[@]}" "${lib[@]}")
  for dir in "${dirs[@]}"; do
    if [ -n "$dir" ]; then add_files "${dir%/}"/libclang*; fi
  done
  add_files "$root"/usr/local/llvm*/lib*/libclang*
  add_files "$root"/usr/local/lib*/*/*/libclang*
  add_files "$root"/usr/local/lib*/*/libclang*
  add_files "$root"/usr/local/lib*/libclang*
  add_files "$root"/usr/lib*/*/*/libclang*
  add_files "$root"/usr/lib*/*/libclang*
  add_files "$root"/usr/lib*/libclang*
}

# Whether the libclang file $1 can find clang's builtin headers: a clang/VERSION/include/stddef.h in its
# own directory (LLVM's layout: /usr/lib/llvm-14/lib/clang/14.0.6, /usr/local/lib/clang/17), in
# ../lib next to it (libclang's own rule), or, for LLVM major version N read from the file name
# (libclang-N...) or directory (.../llvm-N/lib), in Debian's /usr/lib/llvm-N/lib (where
# libclang-common-N-dev puts them for the multiarch /usr/lib/<triplet>/libclang-N.so.1 too).
has_headers() {
  local dir=${1%/*} name=${1##*/} major='' base header
  if [[ $name =~ ^libclang-([0-9]+) ]]; then
    major=${BASH_REMATCH[1]}
  elif [[ $dir =~ /llvm-([0-9]+)/lib[^/]*$ ]]; then
    major=${BASH_REMATCH[1]}
  fi
  local bases=("$dir" "${dir%/*}/lib")
  if [ -n "$major" ]; then bases+=("$root/usr/lib/llvm-$major/lib"); fi
  for base in "${bases[@]}"; do
    local headers=("$base"/clang/*/include/stddef.h)
    if [ -n "$major" ]; then # only this version's headers (clang/14 or clang/14.0.6)
      headers=("$base/clang/$major"/include/stddef.h "$base/clang/$major".*/include/stddef.h)
    fi
    for header in "${headers[@]}"; do
      if [ -f "$header" ]; then return 0; fi
    done
  done
  return 1
}

# Sets `pick` (the libclang bindgen loads on its own, or nothing) and `usable` (the libclang that
# builds: `pick` when it has its headers, else the one bindgen would pick among those that have them,
# else nothing).
choose_libclang() {
  search_libclang
  pick='' usable=''
  local f version best='' best_usable=''
  for f in "${found[@]}"; do
    if [ ! -f "$f" ] || [ "$(elf_class "$f")" != "$host_class" ]; then continue; fi
    version=$(clangsys_version "${f##*/}")
    if [ -z "$pick" ] || version_gt "$version" "$best"; then pick=$f best=$version; fi
    if has_headers "$f" && { [ -z "$usable" ] || version_gt "$version" "$best_usable"; }; then
      usable=$f best_usable=$version
    fi
  done
  if [ -n "${LIBCLANG_PATH:-}" ]; then usable=$pick; fi # the user's choice: bindgen looks nowhere else
}

choose_libclang

if [ "$mode" = --env ]; then
  if [ -z "${LIBCLANG_PATH:-}" ] && [ -n "$usable" ] && [ "$usable" != "$pick" ]; then
    printf 'LIBCLANG_PATH=%q\n' "$usable"
  fi
  exit 0
fi

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
if [ -z "$usable" ]; then
  if [ -n "${LIBCLANG_PATH:-}" ]; then
    echo "LIBCLANG_PATH=$LIBCLANG_PATH names no libclang bindgen can load (bindgen looks nowhere else" \
      "when it is set): point it at a directory with libclang.so, or unset it" >&2
    exit 1
  fi
  missing+=(libclang-dev)
elif [ "$usable" != "$pick" ] && [ "$mode" = check ]; then
  echo "libclang: bindgen would load $pick, which has no clang headers; the build uses LIBCLANG_PATH=$usable" >&2
fi
command -v cargo >/dev/null 2>&1 || { echo "cargo not found: install the Rust toolchain (https://rustup.rs) first" >&2; exit 1; }

if [ "$mode" = --dry-run ]; then
  if [ ${#missing[@]} -gt 0 ]; then echo "missing: ${missing[*]}"; fi
  exit 0
fi
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$EUID" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "missing: ${missing[*]}. Install them with:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  case " ${missing[*]} " in
    *" libclang-dev "*) echo "(or, to use a libclang installed elsewhere, set LIBCLANG_PATH to its directory)" >&2 ;;
  esac
  exit 1
fi
