#!/usr/bin/env bash
# Runs redis-server under valgrind memcheck (used by `make test-valgrind` as REDIS_SERVER).
# Each server writes its report to $VALGRIND_LOG_DIR/vg.<pid>.log.
dir="${VALGRIND_LOG_DIR:-/tmp/reclaim-valgrind}"
mkdir -p "$dir"
exec valgrind --tool=memcheck --error-limit=no --track-origins=no --num-callers=30 \
  --log-file="$dir/vg.%p.log" "${REDIS_SERVER_REAL:-redis-server}" "$@"
