"""crudgen alone: a bare Django project (no middleware, no authentication, no access policy) that
registers the Task model of bench/crudgen_http_urls.py on crudgen's Django storage. The baseline
bench/service_vs_crudgen.py measures the service against."""

from __future__ import annotations

import os

import dj_database_url

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "bench-only")
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = ["django.contrib.contenttypes", "rest_framework", "crudgen"]
MIDDLEWARE: list[str] = []
ROOT_URLCONF = "bench.crudgen_alone_urls"
DATABASES = {"default": dj_database_url.config(env="DATABASE_URL", conn_max_age=60)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The same SQLite settings as the service's (workspace/settings.py): WAL, IMMEDIATE writers.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": [],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["crudgen.parsers.BoundedJSONParser"],
    "UNAUTHENTICATED_USER": None,
}
