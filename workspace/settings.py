"""Settings of the workspace service; every deployment knob comes from the environment."""

from __future__ import annotations

import json
import os
import warnings
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from workspace.sandboxes.reach import default_var_dir


def _host_token(token: str, name: str) -> str:
    """A sandbox host's secret as an HTTP header carries it: printable, no spaces (a token pasted
    with its newline would break every call to the host)."""
    if token and not (token.isprintable() and token.isascii() and " " not in token):
        raise ImproperlyConfigured(f"{name} must be printable ASCII without spaces or line breaks.")
    return token


def _host_tokens(raw: str) -> dict[str, str]:
    """WORKSPACE_SANDBOX_HOST_TOKENS: a JSON object of host URL -> token, or nothing."""
    try:
        tokens = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise ImproperlyConfigured(f"WORKSPACE_SANDBOX_HOST_TOKENS is not JSON: {exc}") from exc
    shaped = isinstance(tokens, dict) and all(
        isinstance(url, str) and url.startswith(("http://", "https://")) and isinstance(token, str) and token
        for url, token in tokens.items()
    )
    if not shaped:
        raise ImproperlyConfigured("WORKSPACE_SANDBOX_HOST_TOKENS must be a JSON object of host URL -> token.")
    named = "Each token of WORKSPACE_SANDBOX_HOST_TOKENS"
    return {url.rstrip("/"): _host_token(token, named) for url, token in tokens.items()}


BASE_DIR = Path(__file__).resolve().parent.parent


def _env_flag(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def _normalised_root_path(raw: str) -> str:
    """`/ws/`, `ws` and `/ws` all mean the same mount point; empty means the site root."""
    stripped = raw.strip().strip("/")
    return f"/{stripped}" if stripped else ""


DEBUG = _env_flag("DJANGO_DEBUG", True)
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off.")
    SECRET_KEY = "dev-only-insecure-key-do-not-use-in-production"

ALLOWED_HOSTS = [h for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",") if h]

# Spec Area B.6: the whole site can be mounted under a prefix such as `/ws`.
WORKSPACE_ROOT_PATH = _normalised_root_path(os.environ.get("WORKSPACE_ROOT_PATH", ""))

INSTALLED_APPS = [
    # The project package (its models and commands: `worker`, `load_demo`); it has no templates or
    # static files of its own to shadow anyone's.
    "workspace",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "django_tasks",
    "django_tasks_db",
    "crudgen",
    "collab",
    "knowledge",
    "quotas",
    "workspace.sandboxes",
    "workspace.items",
    "workspace.agent",
    "workspace.workflows",
    "workspace.investigations",
]

MIDDLEWARE = [
    # Outermost: an answer that long work decides (collab.later) is finished here, in the request's
    # thread, unless the ASGI handler finishes it on the event loop (workspace/serving.py).
    "collab.later.LaterResponses",
    "workspace.request_log.RequestLogMiddleware",
    # Inside the request log (which then records its answer), outside everything that may query:
    # the site's own 404, 403, 500 and 503 in every mode, DEBUG included (workspace/errors.py).
    "workspace.errors.SiteErrorsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Outside the identity middleware, so a locked-out HTTP Basic caller gets its 429.
    "axes.middleware.AxesMiddleware",
    "collab.middleware.CurrentUserMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "workspace.urls"
# A form posted without a valid CSRF token gets the site's 403 page (JSON for API clients).
CSRF_FAILURE_VIEW = "workspace.errors.csrf_failure"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "collab.context_processors.workspace_header",
                "workspace.items.context_processors.sandbox_boundary",
                "workspace.items.context_processors.handovers_waiting",
            ],
        },
    },
]

WSGI_APPLICATION = "workspace.wsgi.application"

# SQLite is the embedded default; DATABASE_URL (postgres://...) switches to PostgreSQL.
DATABASES = {
    "default": dj_database_url.config(
        env="DATABASE_URL",
        default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "60")),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Connections are kept (DATABASE_CONN_MAX_AGE, one per server thread) on SQLite too: opening one
    # per request ran the PRAGMAs each time, and closing the last one checkpointed the WAL, an fsync
    # per request. SQLite checkpoints on its own once the WAL passes 1000 pages.
    DATABASES["default"]["OPTIONS"] = {
        # IMMEDIATE makes a writer take the lock at BEGIN, so two writers queue instead of
        # failing with "database is locked" when a read lock would have to be upgraded.
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    DATABASES["default"]["TEST"] = {"NAME": os.environ.get("WORKSPACE_SQLITE_TEST_DB") or None}
else:
    # A database host that never answers fails a request within this many seconds (then the 503
    # below) instead of holding a worker thread for the operating system's TCP timeout.
    DATABASES["default"].setdefault("OPTIONS", {})["connect_timeout"] = int(
        os.environ.get("WORKSPACE_DATABASE_CONNECT_TIMEOUT_SECONDS", "5")
    )
    # JIT compilation off unless asked for: the planner cannot see the citation boundary of the `cited`
    # counts (a subquery), estimates a third of the log per row, and past some 10^6 events compiles
    # every collection list for ~8 ms while the query itself needs ~2 (bench/citations.py --explain).
    if not _env_flag("WORKSPACE_DATABASE_JIT", False):
        DATABASES["default"]["OPTIONS"]["options"] = "-c jit=off"

# The hot reads and writes of `collab.rows.PlannedStatement` are prepared statements of each
# PostgreSQL session, planned once per connection (the item's read: 0.45 ms a call planned each
# time, 0.22 prepared). Off (0) behind a pooler that hands one client's session to another's
# transactions (PgBouncer's transaction mode), where a session's prepared statements are not its own.
WORKSPACE_DATABASE_PREPARED_STATEMENTS = _env_flag("WORKSPACE_DATABASE_PREPARED_STATEMENTS", True)

# A request that finds the database down answers 503 with this Retry-After (seconds).
WORKSPACE_DATABASE_RETRY_AFTER_SECONDS = int(os.environ.get("WORKSPACE_DATABASE_RETRY_AFTER_SECONDS", "5"))

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = f"{WORKSPACE_ROOT_PATH}/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
# WhiteNoise serves from the finders too, so pages are styled before `collectstatic` has run.
WHITENOISE_USE_FINDERS = True
warnings.filterwarnings("ignore", message="No directory at: ")

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["collab.authentication.WorkspaceAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # JSON only: the API takes what its schema says, and a form body (which another site's page
    # can post, credentials attached) is a 415. Uploads name MultiPartParser themselves; pages
    # post their forms to views of their own (collab.web.html_or_api). A body nested past 64
    # levels is a 400, not a RecursionError (crudgen.parsers).
    "DEFAULT_PARSER_CLASSES": ["crudgen.parsers.BoundedJSONParser"],
    "EXCEPTION_HANDLER": "collab.edge.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "collab.schema.WorkspaceAutoSchema",
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Workspace service",
    "DESCRIPTION": "Sandbox quotas, knowledge-base collaboration and generated CRUD routes.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Answers are documented as JSON. EventStreamRenderer renders only refusals, and as JSON: a
    # stream is documented where its view declares `(200, "text/event-stream")`, asked for with
    # `Accept`. Listed, it would add a `format=sse` parameter (a generated client would then ask for
    # events it parses as JSON) and an event-stream body to every refusal.
    "RENDERER_WHITELIST": ["rest_framework.renderers.JSONRenderer"],
    # Swagger UI's assets come from the installed sidecar package, never from a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # JavaScript, not JSON (drf-spectacular passes a string unchanged): static/js/api-docs.js's plugin
    # beside Swagger UI's own preset, for axe's landmarks, headings and no link inside a button.
    # Examples in the "obsidian" colours: "agate"'s numbers are at 3.4:1 on its grey.
    "SWAGGER_UI_SETTINGS": (
        "{deepLinking: true, syntaxHighlight: {theme: 'obsidian'},"
        " presets: [SwaggerUIBundle.presets.apis, ApiDocsAccessible]}"
    ),
    # Two models have a `status` with different choices: name each enum after its model.
    "ENUM_NAME_OVERRIDES": {
        "DocumentStatusEnum": "knowledge.models.Document.Status",
        "InvestigationStatusEnum": "workspace.investigations.models.Investigation.Status",
        "HealthCheckEnum": "workspace.health.CHECK_STATES",
    },
    # No view validates a PATCH body partially (DRF's `partial=True`): its required fields are required.
    "COMPONENT_SPLIT_PATCH": False,
    # Descriptions come from a view's own docstring, never from the base view every API view extends.
    "GET_LIB_DOC_EXCLUDES": "collab.schema.lib_doc_excludes",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "collab.schema.add_shared_error_responses",
        "collab.schema.nullable_references",
        "collab.schema.readable_tags",
    ],
}
# The API document's groups (and the generated clients' modules, `workspace_client.api.<group>`):
# a path's first segment unless renamed here, listed in this order first.
WORKSPACE_API_TAG_NAMES = {"a": "items", "me": "me", "kb": "kb", "investigations": "investigations"}

# Identity (docs/ARCHITECTURE.md §3). Mock identity is the demo and test default and is refused at
# start-up unless DEBUG is on or WORKSPACE_ALLOW_MOCK_IDENTITY=1.
WORKSPACE_MOCK_IDENTITY = _env_flag("WORKSPACE_MOCK_IDENTITY", True)
WORKSPACE_ALLOW_MOCK_IDENTITY = _env_flag("WORKSPACE_ALLOW_MOCK_IDENTITY", False)
WORKSPACE_USER_DIRECTORY = os.environ.get(
    "WORKSPACE_USER_DIRECTORY",
    "collab.identity.MockDirectory" if WORKSPACE_MOCK_IDENTITY else "collab.identity.DjangoUserDirectory",
)
WORKSPACE_CURRENT_USER_PROVIDER = os.environ.get(
    "WORKSPACE_CURRENT_USER_PROVIDER",
    "collab.identity.MockUserProvider" if WORKSPACE_MOCK_IDENTITY else "collab.identity.RequestUserProvider",
)
WORKSPACE_MOCK_USERS_FILE = os.environ.get("WORKSPACE_MOCK_USERS_FILE", str(BASE_DIR / "collab" / "demo_users.json"))
WORKSPACE_MOCK_DEFAULT_USER = os.environ.get("WORKSPACE_MOCK_DEFAULT_USER", "alice")
# Mock users with staff rights (the demo's operations lead); real deployments use Django's is_staff.
WORKSPACE_MOCK_STAFF = [u for u in os.environ.get("WORKSPACE_MOCK_STAFF", "alice").split(",") if u]

# The CRUD systems the crudgen_dump / crudgen_load / crudgen_migrate commands act on.
CRUDGEN_SYSTEMS = ["workspace.workflows.generated.system"]

# Who a personal API token acts for (the token's row and its creator's standing) is remembered this
# many seconds per process, so a script's requests do not look both up every time. Revoking a token
# and saving or deleting a user forget it at once in the process that did it; other processes see
# the change within this many seconds. 0: looked up on every request.
WORKSPACE_IDENTITY_CACHE_SECONDS = float(os.environ.get("WORKSPACE_IDENTITY_CACHE_SECONDS", "5"))

WORKSPACE_NOTIFICATION_POLL_SECONDS = int(os.environ.get("WORKSPACE_NOTIFICATION_POLL_SECONDS", "30"))

# Background work: Django's Tasks framework. The default backend stores tasks in
# the service's own database, so a task enqueued in a transaction commits (or vanishes) with it and
# survives a crash; `manage.py worker` runs them. A broker-backed backend (README "Background work")
# replaces it when one database is not enough.
# Two queues: "default" (ingest, the periodic jobs) and "workflows" (scheduled workflow runs, which
# may take minutes), served by threads of their own so a long run never delays an ingest.
TASKS = {
    "default": {
        "BACKEND": os.environ.get("WORKSPACE_TASK_BACKEND", "django_tasks_db.DatabaseBackend"),
        "QUEUES": ["default", "workflows", "knowledge"],
    }
}
# A task that raises is run again after RETRY_SECONDS x 2^(attempt-1) (at most RETRY_MAX_SECONDS)
# until MAX_ATTEMPTS; then it stays failed with its traceback and its object says why.
WORKSPACE_TASK_MAX_ATTEMPTS = int(os.environ.get("WORKSPACE_TASK_MAX_ATTEMPTS", "5"))
WORKSPACE_TASK_RETRY_SECONDS = float(os.environ.get("WORKSPACE_TASK_RETRY_SECONDS", "10"))
WORKSPACE_TASK_RETRY_MAX_SECONDS = float(os.environ.get("WORKSPACE_TASK_RETRY_MAX_SECONDS", "600"))
# Finished task results are kept this long for admin, then pruned by the worker.
WORKSPACE_TASK_RESULT_DAYS = int(os.environ.get("WORKSPACE_TASK_RESULT_DAYS", "7"))
# The worker writes a heartbeat every HEARTBEAT_SECONDS (from its own thread, so a long task does
# not silence it). /healthz answers 503 when the newest is older than STALE_SECONDS, and a task
# left running by a worker that stale is given to another worker.
WORKSPACE_WORKER_HEARTBEAT_SECONDS = float(os.environ.get("WORKSPACE_WORKER_HEARTBEAT_SECONDS", "10"))
WORKSPACE_WORKER_STALE_SECONDS = float(os.environ.get("WORKSPACE_WORKER_STALE_SECONDS", "60"))
# Seconds between the periodic jobs (probes, reclaim, reconciliation, disk sweep, schedules, citation
# slices); `manage.py worker --interval` overrides it.
WORKSPACE_WORKER_INTERVAL_SECONDS = float(os.environ.get("WORKSPACE_WORKER_INTERVAL", "30"))
# Threads of each `manage.py worker` that run scheduled workflows (the "workflows" queue) beside
# the one that runs everything else; one person's runs take at most one of them at a time.
WORKSPACE_WORKER_WORKFLOW_THREADS = max(int(os.environ.get("WORKSPACE_WORKER_WORKFLOW_THREADS", "2")), 1)
# A workflow has at most MAX_STEPS steps (a longer one is refused when written, 422) and a run
# stops after MAX_RUN_SECONDS, recorded as failed and why.
WORKSPACE_WORKFLOW_MAX_STEPS = int(os.environ.get("WORKSPACE_WORKFLOW_MAX_STEPS", "50"))
WORKSPACE_WORKFLOW_MAX_RUN_SECONDS = float(os.environ.get("WORKSPACE_WORKFLOW_MAX_RUN_SECONDS", "600"))
# Commands one person may have running at once through requests (exec, a terminal, a manual
# workflow run, a chat turn); past it, 429 with Retry-After. 0: no limit.
WORKSPACE_EXEC_CONCURRENCY_PER_USER = int(os.environ.get("WORKSPACE_EXEC_CONCURRENCY_PER_USER", "3"))
# Terminals (interactive shells in an item's sandbox) one person may have open at once, over all
# their items; past it, 429 `too_many_terminals`. They close with their sandbox, or when closed.
WORKSPACE_TERMINALS_PER_USER = int(os.environ.get("WORKSPACE_TERMINALS_PER_USER", "4"))
# A terminal nobody has had open (no page, no client attached) for this long closes itself; 0: never.
WORKSPACE_TERMINAL_IDLE_SECONDS = int(os.environ.get("WORKSPACE_TERMINAL_IDLE_SECONDS", "3600"))
# How an app process serves (workspace/serving.py, README "Production"). Every request's sync work
# runs on REQUEST_THREADS threads (each keeps one database connection), a step at a time; long work
# that holds a thread while it runs (a model's turn, a manual workflow run) on LONG_WORK_THREADS
# others, never more at once; running commands wait on the event loop, at most
# RUNNING_COMMANDS_PER_PROCESS at once. Past either bound: 503 `server_busy` with Retry-After.
WORKSPACE_REQUEST_THREADS = int(os.environ.get("WORKSPACE_REQUEST_THREADS", "8"))
WORKSPACE_LONG_WORK_THREADS = int(os.environ.get("WORKSPACE_LONG_WORK_THREADS", "8"))
WORKSPACE_RUNNING_COMMANDS_PER_PROCESS = int(os.environ.get("WORKSPACE_RUNNING_COMMANDS_PER_PROCESS", "200"))
# Slow clients: a request's headers, and the start of its body, must arrive within CLIENT_TIMEOUT
# seconds, and a body must then keep coming at CLIENT_MIN_BYTES_PER_SECOND on average, or the
# connection is closed (headers) or answered 408 (a body); an answer the client takes no more of
# for CLIENT_TIMEOUT seconds ends the connection. A kept-alive connection closes after
# IDLE_TIMEOUT seconds without a request; past MAX_CONNECTIONS_PER_PROCESS connections at once a
# process answers 503. A body larger than MAX_REQUEST_BODY_BYTES is 413 before it is read (the
# largest any endpoint takes: a file write, with room for a multipart upload's framing).
WORKSPACE_CLIENT_TIMEOUT_SECONDS = float(os.environ.get("WORKSPACE_CLIENT_TIMEOUT_SECONDS", "20"))
WORKSPACE_CLIENT_MIN_BYTES_PER_SECOND = int(os.environ.get("WORKSPACE_CLIENT_MIN_BYTES_PER_SECOND", "8192"))
WORKSPACE_IDLE_TIMEOUT_SECONDS = float(os.environ.get("WORKSPACE_IDLE_TIMEOUT_SECONDS", "5"))
WORKSPACE_MAX_CONNECTIONS_PER_PROCESS = int(os.environ.get("WORKSPACE_MAX_CONNECTIONS_PER_PROCESS", "2000"))
# A process told to stop first stops its running commands (their results say why), then waits at
# most this long for its connections to end (workspace/uvicorn_worker.py).
WORKSPACE_SHUTDOWN_SECONDS = int(os.environ.get("WORKSPACE_SHUTDOWN_SECONDS", "30"))

# The deployment config and the app descriptors (docs/ARCHITECTURE.md §4); empty means the shipped defaults.
WORKSPACE_CONFIG = os.environ.get("WORKSPACE_CONFIG", "")
WORKSPACE_APPS_DIR = os.environ.get("WORKSPACE_APPS_DIR", "")

# Where per-deployment files (workspaces, sandbox state, cgroup roots in tests) live. Unset: var/
# in the clone, unless the server is root and the clone lies under a directory sandbox uids may
# not pass through (root's home is 0700): then /var/lib/workspace-<hash of the clone's path>,
# created 0711 (README "A clone under a private directory").
WORKSPACE_VAR_DIR = Path(os.environ.get("WORKSPACE_VAR_DIR") or default_var_dir(BASE_DIR, as_root=os.geteuid() == 0))
# The largest file the file API stores in one write.
WORKSPACE_MAX_FILE_BYTES = int(os.environ.get("WORKSPACE_MAX_FILE_BYTES", str(256 * 1024 * 1024)))
# The agent that answers item chat messages in apps that do not choose the model agent (a dotted
# class path); an app descriptor's `agent = "model"` picks the model agent where a provider is set.
WORKSPACE_AGENT = os.environ.get("WORKSPACE_AGENT", "workspace.agent.deterministic.DeterministicAgent")
# The model agent's bounds on one turn (README "Choosing an agent"): tool calls, seconds of wall
# clock, the tokens of conversation sent to the model (older messages are left out first), and the
# characters of one tool's output the model is given. Hitting one ends the turn, saying which. Less
# than 1, 1, 1000 and 100 leaves no room for a turn and stops start-up.
WORKSPACE_AGENT_MAX_TOOL_CALLS = int(os.environ.get("WORKSPACE_AGENT_MAX_TOOL_CALLS", "8"))
WORKSPACE_AGENT_TURN_SECONDS = float(os.environ.get("WORKSPACE_AGENT_TURN_SECONDS", "120"))
WORKSPACE_AGENT_CONTEXT_TOKENS = int(os.environ.get("WORKSPACE_AGENT_CONTEXT_TOKENS", "8000"))
WORKSPACE_AGENT_TOOL_OUTPUT_CHARS = int(os.environ.get("WORKSPACE_AGENT_TOOL_OUTPUT_CHARS", "4000"))
# Where cgroups are mounted, and which driver limits sandboxes: auto, cgroup-v2, cgroup-v1 or prlimit.
WORKSPACE_CGROUP_ROOT = os.environ.get("WORKSPACE_CGROUP_ROOT", "/sys/fs/cgroup")
WORKSPACE_CGROUP_DRIVER = os.environ.get("WORKSPACE_CGROUP_DRIVER", "auto")
# A sandbox host's (`runsandboxhost`) defaults: cpu cores, memory, pids per sandbox (empty: none),
# and where it keeps workspaces and its state (empty: under WORKSPACE_VAR_DIR).
SANDBOX_HOST_CPU = os.environ.get("SANDBOX_HOST_CPU", "")
SANDBOX_HOST_MEMORY = os.environ.get("SANDBOX_HOST_MEMORY", "")
SANDBOX_HOST_PIDS = os.environ.get("SANDBOX_HOST_PIDS", "")
SANDBOX_HOST_WORKSPACES = os.environ.get("SANDBOX_HOST_WORKSPACES", "")
SANDBOX_HOST_STATE_DIR = os.environ.get("SANDBOX_HOST_STATE_DIR", "")
# What a sandbox host offers a pool (DESIGN.md §5 "Many sandbox machines"), reported on its
# /healthz: cpu cores, memory and sandboxes in all (empty: the machine's cores and memory, and no
# bound on the count).
SANDBOX_HOST_CAPACITY_CPU = os.environ.get("SANDBOX_HOST_CAPACITY_CPU", "")
SANDBOX_HOST_CAPACITY_MEMORY = os.environ.get("SANDBOX_HOST_CAPACITY_MEMORY", "")
SANDBOX_HOST_CAPACITY_SANDBOXES = os.environ.get("SANDBOX_HOST_CAPACITY_SANDBOXES", "")

# The knowledge base: the largest upload, and the answerer (a dotted class path; empty: the model
# answerer when a model provider is set below, else the extractive one).
KNOWLEDGE_MAX_UPLOAD_BYTES = int(os.environ.get("KNOWLEDGE_MAX_UPLOAD_BYTES", str(10 * 1024 * 1024)))
# The largest request body a view that takes no upload reads (workspace/serving.py,
# collab/bodies.py): past it, 413 before it is read. An upload's view reads up to its own limit
# (WORKSPACE_MAX_FILE_BYTES, KNOWLEDGE_MAX_UPLOAD_BYTES).
WORKSPACE_MAX_REQUEST_BODY_BYTES = int(os.environ.get("WORKSPACE_MAX_REQUEST_BODY_BYTES", str(4 * 1024 * 1024)))
KNOWLEDGE_ANSWERER = os.environ.get("KNOWLEDGE_ANSWERER", "")

# A model provider (README "Connecting a model"): an OpenAI-compatible chat-completions server such
# as Ollama, vLLM, llama.cpp's server or a hosted API, e.g. http://127.0.0.1:11434/v1. Empty: no
# model; answers quote the documents. With a URL, MODEL must name the model (checked at start-up).
WORKSPACE_LLM_BASE_URL = os.environ.get("WORKSPACE_LLM_BASE_URL", "")
WORKSPACE_LLM_MODEL = os.environ.get("WORKSPACE_LLM_MODEL", "")
# Sent to the provider only, as `Authorization: Bearer`; never logged, shown or stored. Empty for
# servers that need no key.
WORKSPACE_LLM_API_KEY = os.environ.get("WORKSPACE_LLM_API_KEY", "")
# Seconds to connect, and seconds one answer may take in all (a silence that long ends it too);
# past either the answer falls back to quoting the documents.
WORKSPACE_LLM_CONNECT_TIMEOUT = float(os.environ.get("WORKSPACE_LLM_CONNECT_TIMEOUT", "5"))
WORKSPACE_LLM_TIMEOUT = float(os.environ.get("WORKSPACE_LLM_TIMEOUT", "60"))
# The most tokens the model may write in one answer (what a hosted API bills, with the prompt).
WORKSPACE_LLM_MAX_TOKENS = int(os.environ.get("WORKSPACE_LLM_MAX_TOKENS", "800"))
# What one answer of the model server may be, raw (knowledge/llm_bounds.py): one line of it (an event
# of the stream, or a whole answer not streamed), the whole of it, and one tool call's arguments.
# Past any of them, or past WORKSPACE_LLM_TIMEOUT over the whole answer, the request is cut off.
WORKSPACE_LLM_MAX_LINE_BYTES = int(os.environ.get("WORKSPACE_LLM_MAX_LINE_BYTES", str(1024 * 1024)))
WORKSPACE_LLM_MAX_RESPONSE_BYTES = int(os.environ.get("WORKSPACE_LLM_MAX_RESPONSE_BYTES", str(8 * 1024 * 1024)))
WORKSPACE_LLM_MAX_TOOL_ARGUMENT_BYTES = int(os.environ.get("WORKSPACE_LLM_MAX_TOOL_ARGUMENT_BYTES", str(1024 * 1024)))
# Ingest reads each upload in a child process (knowledge/extraction.py), so a small file that expands
# (a PDF "decompression bomb") fails with a reason instead of filling the worker and the database:
# the most text and chunks one document may give, the child's address space and CPU time, and how
# long the worker waits for it.
KNOWLEDGE_MAX_DOCUMENT_CHARS = int(os.environ.get("KNOWLEDGE_MAX_DOCUMENT_CHARS", "5000000"))
KNOWLEDGE_MAX_DOCUMENT_CHUNKS = int(os.environ.get("KNOWLEDGE_MAX_DOCUMENT_CHUNKS", "10000"))
# And relative to its upload: at most this many characters of text per byte uploaded (plain text
# gives at most one; compressed PDF text a few), with a floor so that small files are never held to
# less than KNOWLEDGE_EXPANSION_FLOOR_CHARS. A 7 KB PDF that unpacks to a million characters is refused.
KNOWLEDGE_MAX_EXPANSION = int(os.environ.get("KNOWLEDGE_MAX_EXPANSION", "20"))
KNOWLEDGE_EXPANSION_FLOOR_CHARS = int(os.environ.get("KNOWLEDGE_EXPANSION_FLOOR_CHARS", "100000"))
# How many of a document's chunks one background turn embeds before the worker's other tasks get
# theirs (knowledge/tasks.py `embed_document_task`).
KNOWLEDGE_EMBED_TURN_CHUNKS = int(os.environ.get("KNOWLEDGE_EMBED_TURN_CHUNKS", "32"))
KNOWLEDGE_EXTRACT_MEMORY_BYTES = int(os.environ.get("KNOWLEDGE_EXTRACT_MEMORY_BYTES", str(512 * 1024 * 1024)))
KNOWLEDGE_EXTRACT_CPU_SECONDS = int(os.environ.get("KNOWLEDGE_EXTRACT_CPU_SECONDS", "60"))
KNOWLEDGE_EXTRACT_TIMEOUT_SECONDS = float(os.environ.get("KNOWLEDGE_EXTRACT_TIMEOUT_SECONDS", "120"))

# Embeddings for hybrid retrieval (README "Hybrid retrieval"): an OpenAI-compatible /v1/embeddings
# endpoint (BASE_URL and MODEL; API_KEY where the server asks for one, sent to it alone) or a
# sentence-transformers model directory on disk (PATH; `make run` names the packaged
# all-MiniLM-L6-v2). Neither: lexical search only. TIMEOUT bounds one call to the endpoint: a
# question waits that long at most before it is answered by words alone.
WORKSPACE_EMBEDDINGS_BASE_URL = os.environ.get("WORKSPACE_EMBEDDINGS_BASE_URL", "")
WORKSPACE_EMBEDDINGS_MODEL = os.environ.get("WORKSPACE_EMBEDDINGS_MODEL", "")
WORKSPACE_EMBEDDINGS_API_KEY = os.environ.get("WORKSPACE_EMBEDDINGS_API_KEY", "")
WORKSPACE_EMBEDDINGS_PATH = os.environ.get("WORKSPACE_EMBEDDINGS_PATH", "")
WORKSPACE_EMBEDDINGS_TIMEOUT_SECONDS = float(os.environ.get("WORKSPACE_EMBEDDINGS_TIMEOUT_SECONDS", "10"))
# A question whose collections hold at least this many vectors is searched through an IVF index
# (knowledge/search/ivf.py: the nearest fifth of k-means lists) instead of against every vector;
# below it, exactly. 0 turns the index off (exact search at any size).
WORKSPACE_EMBEDDINGS_IVF_MIN_VECTORS = int(os.environ.get("WORKSPACE_EMBEDDINGS_IVF_MIN_VECTORS", "20000"))

# Reranking (README "Reranking"): a `/rerank` endpoint (BASE_URL and MODEL; API_KEY where the server
# asks for one, sent to it alone) that scores the first DEPTH passages of a question's retrieval
# against it; they are answered from in its order. Empty: the first stage's order. TIMEOUT bounds
# one call: past it, or on any failure, the first stage's order stands and a warning is logged.
WORKSPACE_RERANK_BASE_URL = os.environ.get("WORKSPACE_RERANK_BASE_URL", "")
WORKSPACE_RERANK_MODEL = os.environ.get("WORKSPACE_RERANK_MODEL", "")
WORKSPACE_RERANK_API_KEY = os.environ.get("WORKSPACE_RERANK_API_KEY", "")
WORKSPACE_RERANK_TIMEOUT_SECONDS = float(os.environ.get("WORKSPACE_RERANK_TIMEOUT_SECONDS", "5"))
WORKSPACE_RERANK_DEPTH = int(os.environ.get("WORKSPACE_RERANK_DEPTH", "10"))
# Or a cross-encoder on disk (an ONNX model and its tokenizer.json; `make run`: the packaged
# ms-marco MiniLM), reading each passage up to MAX_TOKENS tokens together with the question.
WORKSPACE_RERANK_PATH = os.environ.get("WORKSPACE_RERANK_PATH", "")
WORKSPACE_RERANK_MAX_TOKENS = int(os.environ.get("WORKSPACE_RERANK_MAX_TOKENS", "256"))
# A floor on the reranker's score (its own scale: logits for the packaged cross-encoder): a passage
# scored under it does not answer the question and is not answered from; when none reaches it the
# answer is "nothing found". Empty: no floor.
WORKSPACE_RERANK_MIN_SCORE = (
    float(os.environ["WORKSPACE_RERANK_MIN_SCORE"]) if os.environ.get("WORKSPACE_RERANK_MIN_SCORE") else None
)

# The sandbox boundary (README "What sandbox code can and cannot do"). "bwrap" runs every command
# of the local backend under bubblewrap; "none" is refused unless DEBUG is on (then it warns and
# item pages show a banner).
WORKSPACE_SANDBOX_ISOLATION = os.environ.get("WORKSPACE_SANDBOX_ISOLATION", "bwrap")
WORKSPACE_BWRAP = os.environ.get("WORKSPACE_BWRAP", "/usr/bin/bwrap")
# An open sandbox's holder is an exec agent (/usr/bin/perl, Debian's Essential perl-base) that forks
# each command inside the namespaces, instead of a chain of host programs entering them per exec.
# Off (or without perl), every exec enters with nsenter and setpriv as before.
WORKSPACE_SANDBOX_EXEC_AGENT = _env_flag("WORKSPACE_SANDBOX_EXEC_AGENT", True)
# Sandbox skeletons each server process keeps made ahead of opens (cgroups with a waiting process
# already inside, workspace/sandboxes/warm.py): an open skips moving a process into new
# cgroups, which waits for the kernel (8-25 ms measured). Used with the exec agent; 0 turns it off.
WORKSPACE_SANDBOX_WARM = int(os.environ.get("WORKSPACE_SANDBOX_WARM", "1"))
# When the server runs as root, sandbox code runs as host uid BASE + (item id mod COUNT): never 0,
# never the server's uid. Unprivileged servers cannot switch uid; their sandboxes keep the server's.
WORKSPACE_SANDBOX_UID_BASE = int(os.environ.get("WORKSPACE_SANDBOX_UID_BASE", "1500000000"))
WORKSPACE_SANDBOX_UID_COUNT = int(os.environ.get("WORKSPACE_SANDBOX_UID_COUNT", "500000000"))
# The kernel ceiling of every sandbox whose app resolves to no cpu, memory or pids limit (none, or
# 0 = unlimited): such a sandbox counts nothing against per-user totals, so this cap is what keeps
# it from taking the machine. Cores, a size string, a process count; empty turns that dimension's
# cap off (start-up warns about every app left without a kernel limit).
WORKSPACE_SANDBOX_CAP_CPU = os.environ.get("WORKSPACE_SANDBOX_CAP_CPU", "1")
WORKSPACE_SANDBOX_CAP_MEMORY = os.environ.get("WORKSPACE_SANDBOX_CAP_MEMORY", "1G")
WORKSPACE_SANDBOX_CAP_PIDS = os.environ.get("WORKSPACE_SANDBOX_CAP_PIDS", "512")
# Where the snapshots of the /etc entries sandboxes see are kept (workspace/sandboxes/
# etc_snapshot.py; empty: WORKSPACE_VAR_DIR/sandbox-etc). Others must be able to pass through it.
WORKSPACE_SANDBOX_ETC_DIR = os.environ.get("WORKSPACE_SANDBOX_ETC_DIR", "")
# The private /tmp of each sandbox (a tmpfs; its pages also count against the memory limit).
WORKSPACE_SANDBOX_TMP_BYTES = int(os.environ.get("WORKSPACE_SANDBOX_TMP_BYTES", str(64 * 1024 * 1024)))
# Disk bound of each workspace: "image" (a filesystem image of the app's disk limit, mounted at
# the workspace; needs root), "measure" (measured after each exec; an overrunning sandbox is
# stopped), or "auto" (image where the service may mount, else measure).
WORKSPACE_DISK_ENFORCEMENT = os.environ.get("WORKSPACE_DISK_ENFORCEMENT", "auto")
# The shared secret between the app and its sandbox hosts (`runsandboxhost`): the app sends it on
# every call, the host answers 401 without it and refuses to listen beyond loopback without one.
WORKSPACE_SANDBOX_HOST_TOKEN = _host_token(
    os.environ.get("WORKSPACE_SANDBOX_HOST_TOKEN", ""), "WORKSPACE_SANDBOX_HOST_TOKEN"
)
# A pool's hosts may each have their own secret: a JSON object of host URL -> token (as `[sandbox]
# hosts` spells the URL). A host it does not name gets WORKSPACE_SANDBOX_HOST_TOKEN.
WORKSPACE_SANDBOX_HOST_TOKENS = _host_tokens(os.environ.get("WORKSPACE_SANDBOX_HOST_TOKENS", ""))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json_line": {"format": "%(message)s"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain"},
        "request_lines": {"class": "logging.StreamHandler", "formatter": "json_line"},
    },
    "root": {"handlers": ["console"], "level": os.environ.get("WORKSPACE_LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # One JSON object per line (workspace/request_log.py); WORKSPACE_REQUEST_LOG_LEVEL=WARNING silences it.
        "workspace.requests": {
            "handlers": ["request_lines"],
            "level": os.environ.get("WORKSPACE_REQUEST_LOG_LEVEL", "INFO"),
            "propagate": False,
        },
        # The request log above replaces runserver's own access line.
        "django.server": {"level": "WARNING"},
        # The worker prints one line per task itself; the framework's start/finish lines double it.
        "django_tasks": {"level": "WARNING"},
    },
}

# Production serving (`make serve`, README "Production"). With DEBUG off, `collectstatic` writes a
# gzip copy of each file and WhiteNoise serves the collected files (with those copies) rather than
# the source folders; before any `collectstatic` it still falls back to the finders.
if not DEBUG:
    STORAGES = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
    }
    WHITENOISE_USE_FINDERS = not STATIC_ROOT.is_dir()

# Behind a load balancer that terminates TLS: trust its X-Forwarded-Proto and send cookies over
# HTTPS only; origins (https://ws.example.com) allowed to POST forms to the pages.
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o]
WORKSPACE_BEHIND_PROXY = _env_flag("DJANGO_BEHIND_TLS_PROXY", False)
if WORKSPACE_BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True

# Password guessing (the login page, the admin login and HTTP Basic) is throttled by django-axes
# before any hash is computed: after AXES_FAILURE_LIMIT wrong passwords for one username, or from one
# address, further attempts get 429 with Retry-After until the cool-off ends.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = int(os.environ.get("WORKSPACE_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=int(os.environ.get("WORKSPACE_LOGIN_COOLOFF_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = ["ip_address", "username"]
# Off: axes would delete every failure matching the login's address or its username, so anyone's
# login from an address reset the lockout of every username guessed from there (issue 44). A login
# forgives its own username's failures from its own address alone (collab.throttle.forgive_own_failures).
AXES_RESET_ON_SUCCESS = False
AXES_LOCKOUT_CALLABLE = "collab.throttle.lockout_response"
AXES_CLIENT_IP_CALLABLE = "collab.throttle.client_address"
AXES_VERBOSE = False
