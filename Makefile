# redis-reclaim. `make help` lists the targets.
PORT ?= 6379
MODULE := target/release/libredis_reclaim.so
export REDIS_SERVER ?= redis-server

.PHONY: help deps build run test unit demo clean fmt

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

demo: build ## The crash scenario: producer, workers, a SIGKILL'd worker, a poison entry, a tally
	cargo run --release --quiet --example demo

fmt: ## Format the code
	cargo fmt

clean: ## Remove build output
	cargo clean
