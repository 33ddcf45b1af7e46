# memtend: `make demo` sets everything up and runs the pipeline on the bundled sample data;
# `make test` sets everything up and runs the test suite against a real local Neo4j.
PYTHON_BOOT ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home

.PHONY: setup neo4j-up neo4j-down neo4j-status demo test ui bench

setup: $(VENV)/.installed $(DAGSTER_HOME)/dagster.yaml

$(VENV)/.installed: pyproject.toml
	@command -v java >/dev/null || { echo "Java 17+ is required (apt-get install openjdk-17-jre-headless)"; exit 1; }
	@command -v mvn >/dev/null || { echo "Maven is required to fetch the Neo4j jars (apt-get install maven)"; exit 1; }
	$(PYTHON_BOOT) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

$(DAGSTER_HOME)/dagster.yaml: dagster.yaml
	mkdir -p $(DAGSTER_HOME)
	cp dagster.yaml $@

neo4j-up: setup
	$(PY) -m mem_resources.local_neo4j up

neo4j-down:
	$(PY) -m mem_resources.local_neo4j down

neo4j-status:
	$(PY) -m mem_resources.local_neo4j status

demo: neo4j-up
	MEMTEND_INBOX=$${MEMTEND_INBOX:-data/sample/inbox} \
	MEMTEND_CONTEXT_CONFIG=$${MEMTEND_CONTEXT_CONFIG:-data/sample/context_config.json} $(VENV)/bin/memtend tend

test: setup
	$(PY) -m pytest

ui: neo4j-up
	MEMTEND_INBOX=$${MEMTEND_INBOX:-data/sample/inbox} \
	MEMTEND_CONTEXT_CONFIG=$${MEMTEND_CONTEXT_CONFIG:-data/sample/context_config.json} $(VENV)/bin/dagster dev -w workspace.yaml

bench: neo4j-up
	for b in bench/*_bench.py; do PYTHONPATH=. $(PY) $$b || exit 1; done
