# Two commands do all set-up on a fresh machine:
#   make demo   -- the main job: an offline demo of a guarded agent
#   make test   -- ruff, mypy --strict and the test suite
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean redis-server

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/guardrails demo

# The Redis tests start a real redis-server (Debian package) on an ephemeral port.
redis-server:
	@command -v redis-server >/dev/null 2>&1 || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; }

test: $(STAMP) redis-server
	$(BIN)/ruff check src tests benchmarks samples
	$(BIN)/mypy --strict src
	$(BIN)/pytest

BENCH_STAMP := $(VENV)/.bench-installed

$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e ".[dev,bench]"
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/python benchmarks/table.py
	$(BIN)/python benchmarks/peers.py
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/expr_bench.py
	$(BIN)/python benchmarks/agent_bench.py
	$(BIN)/python benchmarks/telemetry_bench.py
	$(BIN)/python benchmarks/scrub_bench.py
	$(BIN)/python benchmarks/worst_case.py
	$(BIN)/python benchmarks/fleet_bench.py
	$(BIN)/python benchmarks/provenance_bench.py

clean:
	rm -rf $(VENV)
