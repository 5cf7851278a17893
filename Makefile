# Two commands do all set-up on a fresh machine:
#   make demo   -- the main job: an offline demo of a guarded agent
#   make test   -- ruff, mypy --strict and the test suite
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/guardrails demo

test: $(STAMP)
	$(BIN)/ruff check src tests benchmarks samples
	$(BIN)/mypy --strict src
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/expr_bench.py
	$(BIN)/python benchmarks/agent_bench.py
	$(BIN)/python benchmarks/telemetry_bench.py
	$(BIN)/python benchmarks/scrub_bench.py
	$(BIN)/python benchmarks/worst_case.py

clean:
	rm -rf $(VENV)
