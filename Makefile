# Two commands do all set-up on a fresh clone: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint unit bench chaos dev-kafka-stop clean

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "Python 3.11+ is required (apt-get install -y python3 python3-venv)"; exit 1; }
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,spark,bench]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

# The bridge on an embedded local Kafka: live traffic, a SIGKILL mid-run, restart, verify.
demo: $(STAMP)
	$(BIN)/python -m app.demo

# Lint, types, then every test: unit, real-broker integration, chaos, Spark, chart and image.
test: lint
	$(BIN)/pytest -q --durations=15

# Benchmarks (own local broker, ~40 min; BENCH_ARGS="--records 200000" for a quick run).
bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

# Seeded nemesis (tests/chaos/nemesis.py): ROUNDS rounds of random broker, bridge and network
# faults on 3 brokers and 2-3 bridge instances, each checked by the exactly-once oracle.
# The same SEED replays the same rounds; `make test` runs one round of it.
ROUNDS ?= 10
SEED ?= 1
chaos: $(STAMP)
	$(BIN)/python -m tests.chaos.nemesis --rounds $(ROUNDS) --seed $(SEED)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
