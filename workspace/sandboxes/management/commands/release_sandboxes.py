"""`manage.py release_sandboxes`: close every local sandbox and unmount the workspace images."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from workspace.sandboxes.registry import local_sandboxes_release


class Command(BaseCommand):
    help = (
        "Close every local sandbox under WORKSPACE_VAR_DIR (their processes end) and unmount its "
        "workspace images, e.g. before removing the var directory. Items and files are kept."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        closed, unmounted = local_sandboxes_release()
        self.stdout.write(f"closed {closed} sandboxes, unmounted {unmounted} workspace images")
