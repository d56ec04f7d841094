"""`manage.py release_sandboxes`: close every local sandbox and unmount the workspace images."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from workspace.sandboxes.registry import host_sandboxes_release, local_sandboxes_release


class Command(BaseCommand):
    help = (
        "Close every local sandbox under WORKSPACE_VAR_DIR (their processes end) and unmount its "
        "workspace images, e.g. before removing the var directory. Items and files are kept."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--host-state-dir",
            action="append",
            default=[],
            type=Path,
            help="Also close the sandboxes a stopped sandbox host left in this state directory "
            "(its SANDBOX_HOST_STATE_DIR); may be given more than once.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        hosts = sum(host_sandboxes_release(state_dir) for state_dir in options["host_state_dir"])
        closed, unmounted = local_sandboxes_release()
        closed += hosts
        self.stdout.write(f"closed {closed} sandboxes, unmounted {unmounted} workspace images")
