# Two commands do all set-up on a fresh clone: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.demo-installed
# Quix Streams (the benchmark's peer and the changelog compatibility oracle) pins older
# confluent-kafka and pydantic-settings than the bridge runs, so it gets a venv of its own.
QUIX_VENV := .venv-quix
QUIX_STAMP := $(QUIX_VENV)/.installed
QUIX_REQUIREMENT := quixstreams==3.28.*

.PHONY: install quix-venv demo test test-long-spark test-long-chaos test-spark-image lint unit bench chaos failover soak clean

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

$(QUIX_STAMP): Makefile
	@command -v $(PYTHON) >/dev/null || { echo "Python 3.11+ is required (apt-get install -y python3 python3-venv)"; exit 1; }
	@echo "installing $(QUIX_REQUIREMENT) into its own $(QUIX_VENV) (tests and bench run Quix there)"
	test -d $(QUIX_VENV) || $(PYTHON) -m venv $(QUIX_VENV)
	$(QUIX_VENV)/bin/pip install -q --upgrade pip
	$(QUIX_VENV)/bin/pip install -q '$(QUIX_REQUIREMENT)'
	touch $(QUIX_STAMP)

install: $(STAMP)

quix-venv: $(QUIX_STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The unit tier: the service's and dev dependencies only (no .venv-quix, no Spark needed).
unit: $(STAMP)
	$(BIN)/pytest -q -m "not quix" tests/unit

# The bridge on an embedded local Kafka: live traffic, a SIGKILL mid-run, restart, verify.
demo: $(DEMO_STAMP)
	$(BIN)/python -m devkit.demo

# Lint, types, then every test: unit, real-broker integration, chaos, Spark, chart and image.
test: lint $(QUIX_STAMP)
	$(BIN)/pytest -q --durations=40 -m "not spark_image and not long_spark and not long_chaos"

# Spark crash scenarios too long for CI's time (the Iceberg driver SIGKILLed four times, ~10 min).
test-long-spark: $(STAMP)
	$(BIN)/pytest -q -m long_spark tests/spark

# Broker faults CI covers once elsewhere, each again on its own (the transaction and the group
# coordinator SIGKILLed apart; ~1 min each).
test-long-chaos: $(STAMP)
	$(BIN)/pytest -q -m long_chaos tests/chaos

# The Spark image (a ~1 GB build) built with buildah and its CronJob command run in it.
test-spark-image: $(STAMP)
	$(BIN)/pytest -q -m spark_image tests/deploy/test_spark_image.py

# Benchmarks (own local broker; throughput at commit intervals 0.1 s and 1 s, then the latency
# runs: ~3 h; BENCH_ARGS="--records 200000 --reps 1" for a quick run, "--commit-intervals 1
# --latency-rate 0" for the 1 s throughput tables alone, ~40 min).
bench: $(STAMP) $(QUIX_STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

# Seeded nemesis (tests/chaos/nemesis.py): ROUNDS rounds of random broker, bridge and network
# faults on 3 brokers and 2-3 bridge instances, each checked by the exactly-once oracle.
# The same SEED replays the same rounds; `make test` runs one round of it.
ROUNDS ?= 10
SEED ?= 1
chaos: $(STAMP)
	$(BIN)/python -m tests.chaos.nemesis --rounds $(ROUNDS) --seed $(SEED)

# The coordinator broker SIGKILLed five times under the supervised bridge (`make test` runs the
# same test with two kills),
# with what it prints shown: each restart's exit code and time to /readyz, and the seconds from
# each kill to the first commit after it (docs/operations.md, "Measured").
# FAILOVER_SETTINGS=default runs it with the bridge's own timeouts instead of failover-sized ones.
FAILOVER_SETTINGS ?= tuned
failover: $(STAMP)
	FAILOVER_KILLS=5 FAILOVER_SETTINGS=$(FAILOVER_SETTINGS) $(BIN)/pytest -q -rP tests/integration/test_coordinator_failover.py

# Soak (tests/chaos/soak.py): DURATION seconds at RATE records/s with a stateful pipeline and a
# nemesis fault every FAULT_PERIOD seconds; RSS, fds, threads every 10 s into
# bench/results/soak/soak.csv (+ soak.png), the exactly-once oracle at the end.
DURATION ?= 7200
RATE ?= 2000
FAULT_PERIOD ?= 300
FAULTS ?= all
soak: $(STAMP)
	$(BIN)/python -m tests.chaos.soak --duration $(DURATION) --rate $(RATE) --fault-period $(FAULT_PERIOD) --faults $(FAULTS)

# The image's hash-locked dependencies (requirements/*.lock): rerun after changing the runtime
# dependencies in pyproject.toml or requirements/build.in; reads PyPI.
LOCK_FLAGS := --generate-hashes --python-version 3.11 --python-platform x86_64-unknown-linux-gnu \
	--only-binary :all: --custom-compile-command "make lock"
# The Spark image's: runtime + the spark extra. pyspark is published as an sdist only (its hash
# is the sdist's); the image builds it with the build tools of build.lock.
SPARK_LOCK_FLAGS := --extra spark --no-binary pyspark
.PHONY: lock
lock: $(STAMP)
	$(BIN)/uv pip compile $(LOCK_FLAGS) pyproject.toml -o requirements/runtime.lock
	$(BIN)/uv pip compile $(LOCK_FLAGS) $(SPARK_LOCK_FLAGS) pyproject.toml -o requirements/spark.lock
	$(BIN)/uv pip compile $(LOCK_FLAGS) requirements/build.in -o requirements/build.lock

clean:
	rm -rf $(VENV) $(QUIX_VENV) .pytest_cache .mypy_cache .ruff_cache
