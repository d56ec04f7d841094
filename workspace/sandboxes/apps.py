"""The sandbox runtime as a Django app: the backends, the boundary, volumes, the file store and
the sandbox host. It knows nothing of items, apps or people: a workspace id, a size, a command."""

from __future__ import annotations

from django.apps import AppConfig


class SandboxesConfig(AppConfig):
    name = "workspace.sandboxes"
    label = "sandboxes"
