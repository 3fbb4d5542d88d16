# Two commands do all set-up on a fresh clone: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.demo-installed

.PHONY: install demo test lint unit bench dev-kafka-stop clean

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "Python 3.11+ is required (apt-get install -y python3 python3-venv)"; exit 1; }
	@echo "installing eos-bridge with its dev, spark and bench extras into $(VENV) (first run: several minutes)"
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,spark,bench]'
	touch $(STAMP)

# The demo needs the service and Spark only, not the test and benchmark tools.
$(DEMO_STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "Python 3.11+ is required (apt-get install -y python3 python3-venv)"; exit 1; }
	@echo "make demo: installing eos-bridge and the Spark extra into $(VENV) (first run: a few minutes)"
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[spark]'
	touch $(DEMO_STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

# The bridge on an embedded local Kafka: live traffic, a SIGKILL mid-run, restart, verify.
demo: $(DEMO_STAMP)
	$(BIN)/python -m app.demo

# Lint, types, then every test: unit, real-broker integration, chaos, Spark, chart and image.
test: lint
	$(BIN)/pytest -q --durations=15

# Benchmarks (own local broker, ~40 min; BENCH_ARGS="--records 200000" for a quick run).
bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
