"""`manage.py runsandboxhost --port N`: serve the sandbox host protocol over the local backend."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from workspace.sandboxes.host import build_server


class Command(BaseCommand):
    help = "Run a sandbox host (POST/GET/DELETE /sandboxes, /healthz) using SANDBOX_HOST_* defaults."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8700)
        parser.add_argument("--bind", default="127.0.0.1", help="Address to listen on (default loopback only).")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            server = build_server(options["bind"], options["port"])
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc
        address, port = server.server_address[:2]
        self.stdout.write(f"Sandbox host listening on http://{address}:{port}/", ending="\n")
        self.stdout.flush()
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
