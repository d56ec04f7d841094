"""ASGI entry point of every app process (`make serve`, `make run`): workspace/serving.py."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workspace.settings")
django.setup(set_prefix=False)

from workspace.serving import WorkspaceASGIHandler  # noqa: E402 - Django is set up first

application = WorkspaceASGIHandler()
