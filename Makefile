# The two commands a new machine needs: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum requirements.txt | cut -d' ' -f1)
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install run test test-postgres lint migrate demo clean

$(STAMP): requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

migrate: install
	$(BIN)/python manage.py migrate --noinput

demo: migrate
	$(BIN)/python manage.py load_demo

# Creates the virtualenv, installs, migrates SQLite, loads the demo and serves (with the demo's
# per-user limits from workspace/demo.toml unless WORKSPACE_CONFIG names another file). The
# worker beside it probes live sandboxes (their leases), reclaims idle ones and measures disk.
run: demo
	@export WORKSPACE_CONFIG=$${WORKSPACE_CONFIG:-workspace/demo.toml}; \
	$(BIN)/python manage.py worker & worker=$$!; \
	trap 'kill $$worker 2>/dev/null' EXIT INT TERM; \
	$(BIN)/python manage.py runserver $(HOST):$(PORT)

# The whole suite on SQLite; browser tests skip (with the reason) where chromium is missing.
test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The same suite on PostgreSQL (a fresh test database each run).
test-postgres: install
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/workspace} $(BIN)/python -m pytest --create-db $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) db.sqlite3 db.sqlite3-* var staticfiles .pytest_cache .ruff_cache
