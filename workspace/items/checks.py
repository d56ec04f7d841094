"""System checks: `manage.py check`, and every command and server start that runs them (migrate,
runserver, the worker), refuse to go on while one fails."""

from __future__ import annotations

from typing import Any

from django.core import checks

from workspace.items.config import get_config
from workspace.sandboxes.boundary import configured_boundary
from workspace.sandboxes.reach import unreachable_reason
from workspace.sandboxes.volumes import workspaces_root


@checks.register("sandboxes")
def sandbox_workspaces_reachable(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """A root server whose sandbox uids cannot pass through to the workspaces would fail every exec,
    and no waiting would fix it: it does not start, and says which directory and what to do."""
    if get_config().sandbox.backend != "local":
        return []
    reason = unreachable_reason(workspaces_root(), configured_boundary().uid_for("0"))
    return [checks.Error(reason, id="items.E001")] if reason else []
