# Everything a new machine needs comes from here: Python 3.11 and make are assumed, nothing else.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
STAMP := $(VENV)/.installed
# Runs a command with DATABASE_URL / REDIS_URL set: from the environment or .env, else
# embedded servers under .data/ (see scheduler_project/devservices/).
SERVICES := $(PY) -m scheduler_project.devservices
# For checks (tests, benchmarks, screenshots): the machine's servers on 127.0.0.1 are
# preferred to embedded ones when they answer.
CHECK_SERVICES := $(SERVICES) exec --prefer-local
PYTEST_ARGS ?=
LOAD_ARGS ?=

# `make benchmark ROWS=1000000` adds the table over that much history; BENCH_ARGS passes
# sizes, e.g. BENCH_ARGS="--drain 20000 --probes 500" (python -m benchmarks --help).
ROWS ?= 0
BENCH_ARGS ?=
# The peers live in a virtualenv of their own, never in the project's dependencies.
PEERS_VENV := .bench/peers
PEERS_STAMP := $(PEERS_VENV)/.installed
PEERS_PACKAGES := procrastinate huey "celery[redis]" redis "psycopg[binary]" py-spy

.PHONY: help install run prod manage test lint format validate seed reset benchmark benchmark-peers benchmark-profile benchmark-readme faults load screenshots browser clean

help:
	@echo "make run         set up everything and start the web server and one worker"
	@echo "make prod        the same in the production profile (gunicorn + uvicorn, DEBUG off)"
	@echo "make manage ARGS=\"...\"  a manage.py command on make run's servers (shell, create_api_token, ...)"
	@echo "make test        lint, format check, type-check, then the whole test suite"
	@echo "make lint        ruff check, ruff format --check, mypy"
	@echo "make format      reformat and apply ruff's safe fixes"
	@echo "make validate    lint + format check + test"
	@echo "make seed        add the 120 demo jobs     make reset   drop and recreate the schema"
	@echo "make benchmark   scheduler micro-benchmark, then the project beside a bare-SQL floor"
	@echo "make benchmark-peers   the same with Procrastinate, Huey and Celery (in .bench/)"
	@echo "make benchmark-profile where a job's time goes (cProfile, py-spy, EXPLAIN ANALYZE)"
	@echo "make benchmark-readme  copy the last run's tables (benchmarks/results.md) into README.md"
	@echo "make faults      the fault suite: kill -9, PostgreSQL and Redis outages (~4 min)"
	@echo "make load        20 API clients POSTing jobs to the production profile for 60 s (benchmarks/api_load.py)"
	@echo "make screenshots regenerate static/screenshots/*.png"
	@echo "make clean       remove .venv and .data (all local data)"

# uv installs the lock in 7 s where pip took 33 (pip compiles each file's bytecode in turn),
# and `sync` also removes what the lock no longer names. pip only fetches uv, by its hashes.
$(STAMP): requirements.lock requirements-uv.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r requirements-uv.lock
	$(BIN)/uv pip sync --quiet --python $(PY) --require-hashes --compile-bytecode requirements.lock
	touch $(STAMP)

install: $(STAMP)

run: install
	$(SERVICES) run

prod: install
	$(SERVICES) prod

# Any manage.py command on the servers `make run` uses (embedded ones are started for the
# command when it is not running): make manage ARGS="create_api_token alice --role operator"
manage: install
	@$(SERVICES) exec -- $(PY) manage.py $(ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy jobs worker scheduler_project benchmarks

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

browser:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "Installing Debian's chromium for the browser tests"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null; }

# Three processes on two cores: about 40% of the suite's time is spent waiting (servers and
# workers starting, jobs running in other processes), which a third process fills. The
# whole suite in 235 s instead of 273-281 s here, and it passes with one core kept busy.
#
# The suite starts some 200 Python processes (workers, servers, commands). Where the
# environment asks for no bytecode files (PYTHONDONTWRITEBYTECODE, as on CI's machines), each
# compiled the project's modules anew: 0.2 s of CPU apiece. The suite writes them once.
test: lint browser
	PYTHONDONTWRITEBYTECODE= $(CHECK_SERVICES) -- $(BIN)/pytest -n 3 --dist loadgroup $(PYTEST_ARGS)

# `test` already runs lint (which includes the format check) before pytest.
validate: test

seed: install
	$(SERVICES) exec --migrate -- $(PY) manage.py seed_db --workflows

reset: install
	$(SERVICES) exec -- $(PY) manage.py reset_db

benchmark: install
	$(CHECK_SERVICES) -- $(PY) manage.py benchmark
	$(CHECK_SERVICES) -- $(PY) -m benchmarks --rows $(ROWS) $(BENCH_ARGS)

$(PEERS_STAMP):
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install --quiet --disable-pip-version-check $(PEERS_PACKAGES)
	touch $(PEERS_STAMP)

benchmark-profile: install $(PEERS_STAMP)
	$(CHECK_SERVICES) -- $(PY) -m benchmarks --profile $(BENCH_ARGS)

benchmark-peers: install $(PEERS_STAMP)
	$(CHECK_SERVICES) -- $(PY) manage.py benchmark
	$(CHECK_SERVICES) -- $(PY) -m benchmarks --rows $(ROWS) --peers procrastinate,huey,celery $(BENCH_ARGS)

benchmark-readme: install
	$(PY) -m benchmarks --readme

# Its own embedded PostgreSQL and Redis under .data/faults/, which it stops and restarts.
faults: install
	$(PY) -m tests.faults

load: install
	$(CHECK_SERVICES) --migrate -- $(PY) benchmarks/api_load.py $(LOAD_ARGS)

screenshots: install browser
	$(CHECK_SERVICES) -- $(PY) -m tests.console.screenshots

clean:
	rm -rf $(VENV) .data .bench .pytest_cache .mypy_cache .ruff_cache
