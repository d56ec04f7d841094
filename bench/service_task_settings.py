"""The service as shipped (workspace.settings, every middleware) plus the bench's Task model routes
(bench/crudgen_http_urls.py); no statement counting, so nothing is timed that production lacks."""

from __future__ import annotations

from workspace.settings import *  # noqa: F403

ROOT_URLCONF = "bench.crudgen_http_urls"
