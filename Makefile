# Everything a new machine needs comes from here: Python 3.11 and make are assumed, nothing else.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
STAMP := $(VENV)/.installed
SERVICES := $(PY) -m scheduler_project.services

.PHONY: help install run test lint format validate seed reset benchmark screenshots browser clean

help:
	@echo "make run        set up everything and start the web server and one worker"
	@echo "make test       lint, type-check and run the whole test suite"
	@echo "make lint | format | validate | seed | reset | benchmark | screenshots"

$(STAMP): requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r requirements.lock
	touch $(STAMP)

install: $(STAMP)

run: install
	$(SERVICES) run

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy jobs worker

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

browser:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "Installing Debian's chromium for the browser tests"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null; }

test: install browser
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy jobs worker
	$(SERVICES) exec -- $(BIN)/pytest -n 2 --dist loadgroup $(PYTEST_ARGS)

validate: test

seed: install
	$(SERVICES) exec -- $(PY) manage.py seed_db

reset: install
	$(SERVICES) exec -- $(PY) manage.py reset_db

benchmark: install
	$(SERVICES) exec -- $(PY) manage.py benchmark
	$(SERVICES) exec -- $(PY) manage.py benchmark --e2e

screenshots: install browser
	$(SERVICES) exec -- $(PY) -m tests.console.screenshots

clean:
	rm -rf $(VENV) .data .pytest_cache .mypy_cache .ruff_cache
