# Two commands for a fresh machine: `make run` and `make test`. `make run` installs only what
# the controller needs; `make test` (and the other development targets) installs the test
# extras too, PySpark among them. Each stamp re-runs its install only when pyproject.toml changes.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test

.PHONY: setup run test test-fast typecheck bench codegen kafka clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(RUN_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e .
	touch $(RUN_STAMP)

# The test extras include the project itself, so they satisfy `make run` as well.
$(TEST_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(TEST_STAMP) $(RUN_STAMP)

setup: $(TEST_STAMP)

run: $(RUN_STAMP)
	$(PY) -m server

typecheck: setup
	$(PY) -m mypy protocol captures server tools

test: setup typecheck kafka
	$(PY) -m tools.codegen --check
	$(PY) -m pytest

# Apache Kafka's brokers, tools and controllers for tests/kafka, from Maven Central into a cache
# outside the checkout (~/.cache/kraftwire/kafka, or KRAFTWIRE_KAFKA_CACHE); a version already
# fetched is not fetched again. Needs a JDK 17+ and Maven.
kafka: setup
	$(PY) -m tools.kafka_dist fetch

# The edit-test loop: everything but the tests that start Spark, the client matrix and Kafka's
# own processes (markers set in tests/conftest.py); no type check or codegen check either.
test-fast: setup
	$(PY) -m pytest -m "not spark and not clients and not kafka"

bench: setup
	$(PY) -m tools.bench all --doc BENCHMARKS.md

codegen: $(RUN_STAMP)
	$(PY) -m tools.codegen

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
