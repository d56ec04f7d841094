"""Module-level, uniquely named serializers of the workspace core endpoints."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from collab.serializers import BlankAsNullField
from quotas.models import SandboxActivity
from quotas.values import host_name
from workspace.items.selectors import ITEMS_DEFAULT_LIMIT, ITEMS_MAX_LIMIT
from workspace.sandboxes.base import EndReason
from workspace.sandboxes.filebatch import MAX_GLOB_CHARS


class WorkspaceAppResourcesOutputSerializer(serializers.Serializer):
    cpu_cores = serializers.FloatField(
        source="sandbox.cpu_cores", allow_null=True, help_text="None: unspecified; 0: unlimited."
    )
    memory_bytes = serializers.IntegerField(source="sandbox.memory_bytes", allow_null=True)
    pids_max = serializers.IntegerField(source="sandbox.pids_max", allow_null=True)
    disk_bytes = serializers.IntegerField(help_text="0: unlimited.")


class WorkspaceAppOutputSerializer(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    resources = WorkspaceAppResourcesOutputSerializer()


OWNER_HELP = (
    "Who pays: a user id, or a display name only one person has (stored as their id); blank: the creator. "
    "Naming someone else asks them first."
)


class ItemCreateInputSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=200, allow_blank=False, trim_whitespace=True)
    # The spec's field name; the services call the billed person the payer.
    owner = serializers.CharField(
        max_length=150, required=False, allow_blank=True, default="", source="payer", help_text=OWNER_HELP
    )


class ItemUpdateInputSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=200, required=False, allow_blank=False)
    owner = serializers.CharField(
        max_length=150, required=False, allow_blank=True, source="payer", help_text=OWNER_HELP
    )


class ItemListQuerySerializer(serializers.Serializer):
    before = serializers.IntegerField(required=False, min_value=1, help_text="Keyset cursor: items with smaller ids.")
    limit = serializers.IntegerField(min_value=1, max_value=ITEMS_MAX_LIMIT, default=ITEMS_DEFAULT_LIMIT)


class ItemSandboxOutputSerializer(serializers.Serializer):
    sandbox_id = serializers.CharField(source="backend_sandbox_id")
    backend = serializers.CharField()
    host = serializers.SerializerMethodField(
        help_text="The sandbox host it runs on (address:port), where a pool places it; blank on the local backend."
    )
    cpu_cores = serializers.FloatField(allow_null=True)
    memory_bytes = serializers.IntegerField(allow_null=True)
    pids_max = serializers.IntegerField(allow_null=True)
    opened_at = serializers.DateTimeField()
    last_seen_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField()
    lease_expires_at = serializers.DateTimeField()

    def get_host(self, row: SandboxActivity) -> str:
        return host_name(row.host)


class ItemDiskOutputSerializer(serializers.Serializer):
    bytes = serializers.IntegerField()
    measured_at = serializers.DateTimeField()


class ItemOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    app = serializers.CharField(source="app_slug")
    title = serializers.CharField()
    owner = serializers.CharField(source="payer", help_text="The quota debtor; permissions follow created_by.")
    pending_owner = BlankAsNullField(help_text="Asked to pay for the item; `owner` becomes them once they accept.")
    created_by = serializers.CharField()
    updated_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class HandoverReturnOutputSerializer(serializers.Serializer):
    item_id = serializers.IntegerField()
    owner = serializers.CharField(help_text="Who pays for the item now.")


class HandoverAnswerOutputSerializer(HandoverReturnOutputSerializer):
    accepted = serializers.BooleanField()


class ItemDetailOutputSerializer(ItemOutputSerializer):
    sandbox = ItemSandboxOutputSerializer(allow_null=True)
    disk = ItemDiskOutputSerializer(allow_null=True, help_text="The last mirror-sweep measurement.")


class ItemListOutputSerializer(serializers.Serializer):
    results = ItemOutputSerializer(many=True)
    next_before = serializers.IntegerField(allow_null=True)


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "minLength": 1},
            {"type": "array", "items": {"type": "string"}, "minItems": 1},
        ]
    }
)
class CommandField(serializers.JSONField):
    """Any JSON to the parser (the view names a wrong type itself); the schema says what is accepted."""


class ExecTimeoutField(serializers.FloatField):
    """Seconds, above 0 and at most the configured `sandbox.exec_timeout_max` (the service refuses
    others: 400 `invalid_timeout`); the document reads the bound when it is generated."""


class ExecTimeoutFieldExtension(OpenApiSerializerFieldExtension):
    target_class = ExecTimeoutField

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        # Here, not at import: the configuration is read once the settings are.
        from workspace.items.config import get_config

        return {
            "type": "number",
            "format": "double",
            "minimum": 0,
            "exclusiveMinimum": True,
            "maximum": get_config().sandbox.exec_timeout_max,
        }


class ExecInputSerializer(serializers.Serializer):
    command = CommandField(help_text="A string (run by /bin/sh -c) or a list of strings (argv).")
    timeout = ExecTimeoutField(required=False, allow_null=True, help_text="Seconds.")


class ExecOutputSerializer(serializers.Serializer):
    """Renders an `ExecOutcome`: the command's result and the sandbox it ran in."""

    exit_code = serializers.IntegerField(source="result.exit_code")
    stdout = serializers.CharField(source="result.stdout", allow_blank=True)
    stderr = serializers.CharField(source="result.stderr", allow_blank=True)
    stdout_truncated = serializers.BooleanField(source="result.stdout_truncated")
    stderr_truncated = serializers.BooleanField(source="result.stderr_truncated")
    timed_out = serializers.BooleanField(source="result.timed_out")
    duration_ms = serializers.IntegerField(source="result.duration_ms")
    reason = serializers.ChoiceField(
        source="result.reason",
        choices=EndReason.ALL,
        help_text=(
            "Why it ended: by itself (`exited`, whatever its exit code), past its time limit, killed by the "
            "kernel at the sandbox's memory limit, stopped by someone, or its sandbox closed while it ran. An "
            "exit code of 137 alone only says it was killed."
        ),
    )
    reason_detail = serializers.CharField(
        source="result.reason_detail",
        allow_blank=True,
        help_text="The same in a sentence, with the limit's size or who did it (blank when it exited); "
        "stderr ends with it too.",
    )
    ended_by = serializers.CharField(
        source="result.ended_by", allow_blank=True, help_text="Who stopped it or closed its sandbox, if a person did."
    )
    exec_id = serializers.CharField(allow_blank=True, help_text="The id that stopped it while it ran.")
    sandbox_id = serializers.CharField(source="activity.backend_sandbox_id")
    sandbox_opened = serializers.BooleanField(source="opened", help_text="True when this exec opened a new sandbox.")
    sandbox_closed = serializers.BooleanField(
        source="closed",
        help_text="True when the sandbox was stopped after the command: its workspace is over its limit.",
    )


class RunningExecOutputSerializer(serializers.Serializer):
    """A command running in an item's sandbox, which its requester (or staff) may stop."""

    exec_id = serializers.CharField()
    command = serializers.CharField(help_text="Its first 200 characters.")
    requested_by = serializers.CharField()
    started_at = serializers.DateTimeField()
    stopped_by = serializers.CharField(allow_blank=True, help_text="Who stopped it; blank while it runs on.")


class ExecStartedOutputSerializer(serializers.Serializer):
    """Renders an `ExecStarted`: the sandbox a streamed command runs in, before any output."""

    sandbox_id = serializers.CharField(source="activity.backend_sandbox_id")
    sandbox_opened = serializers.BooleanField(source="opened", help_text="True when this exec opened a new sandbox.")
    timeout_seconds = serializers.FloatField(source="timeout", help_text="The command is stopped after this long.")
    exec_id = serializers.CharField(
        allow_blank=True, help_text="Stops it: POST .../execs/<exec_id>/stop (its requester or staff)."
    )


class FileEntryOutputSerializer(serializers.Serializer):
    path = serializers.CharField()
    size = serializers.IntegerField()
    is_dir = serializers.BooleanField()
    modified = serializers.DateTimeField()


class FileChangeOutputSerializer(serializers.Serializer):
    path = serializers.CharField()
    old_size = serializers.IntegerField()
    new_size = serializers.IntegerField()


class FileMoveInputSerializer(serializers.Serializer):
    source = serializers.CharField(max_length=4096, trim_whitespace=False, help_text="The file or folder to move.")
    target = serializers.CharField(max_length=4096, trim_whitespace=False, help_text="Its new path; must not exist.")


class FileTruncateInputSerializer(serializers.Serializer):
    path = serializers.CharField(max_length=4096, trim_whitespace=False, help_text="The file to shrink.")
    size = serializers.IntegerField(
        min_value=0, max_value=2**63 - 1, help_text="How many of its first bytes to keep (0 empties it)."
    )


class FolderCreateInputSerializer(serializers.Serializer):
    path = serializers.CharField(max_length=4096, trim_whitespace=False)


_TEXT = {"type": "string"}
# Standard base64 with its padding (`base64.b64decode(..., validate=True)`).
_BASE64 = {"type": "string", "pattern": "^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"}


def _batch_operation(op: str, members: dict[str, Any], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    properties = {"op": {"type": "string", "enum": [op]}, **members}
    return {"type": "object", "properties": properties, "required": [n for n in properties if n not in optional]}


@extend_schema_field(
    {
        "anyOf": [
            _batch_operation("copy", {"from": _TEXT, "to": _TEXT}),
            _batch_operation(
                "replace",
                {
                    "search": {"type": "string", "minLength": 1},
                    "replace": _TEXT,
                    "glob": {"type": "string", "maxLength": MAX_GLOB_CHARS},
                },
                optional=("glob",),
            ),
            _batch_operation("stage", {"path": _TEXT, "content": _TEXT}),
            _batch_operation("stage", {"path": _TEXT, "content_base64": _BASE64}),
        ]
    }
)
class FileBatchOperationField(serializers.DictField):
    """One operation of a batch; `workspace.sandboxes.filebatch` checks it (400 `invalid_batch`)."""


class FileBatchInputSerializer(serializers.Serializer):
    operations = serializers.ListField(
        child=FileBatchOperationField(),
        min_length=1,
        help_text=(
            "Each one of: {op: 'copy', from, to} (a file or folder); {op: 'replace', search, replace, glob?} "
            "across text files; {op: 'stage', path, content | content_base64} (execution inputs)."
        ),
    )


class FileBatchOutputSerializer(serializers.Serializer):
    changes = FileChangeOutputSerializer(many=True)
    delta = serializers.IntegerField()


class TerminalOpenInputSerializer(serializers.Serializer):
    """Documents the body of a terminal's opening; the service checks it (400 `invalid_terminal_size`)."""

    rows = serializers.IntegerField(min_value=1, max_value=9999, default=24)
    cols = serializers.IntegerField(min_value=1, max_value=9999, default=80)


class TerminalOutputSerializer(serializers.Serializer):
    """An open terminal of an item: an interactive shell in its sandbox, its opener's alone."""

    id = serializers.CharField(source="terminal_id")
    rows = serializers.IntegerField(help_text="Its size when it was opened; the WebSocket's resize changes it.")
    cols = serializers.IntegerField()
    opened_at = serializers.DateTimeField()
    ws_url = serializers.SerializerMethodField(
        help_text=(
            "Its WebSocket (same origin; session or token auth). Binary frames are the terminal's bytes both "
            'ways; text frames JSON control: from the client {"type": "resize", "cols", "rows"} and '
            '{"type": "signal", "name": "INT|QUIT|TSTP|HUP|TERM"}; from the server {"type": "replay", "start", '
            '"end"} before the kept output (256 KiB) is replayed, {"type": "live", "offset"} once output is live '
            '(reconnect with ?since=<offset> to miss nothing), {"type": "exit", "code"}, and {"type": "stopped", '
            '"error", "detail"} when a command started in it was stopped because all your command slots are taken.'
        )
    )

    def get_ws_url(self, terminal: object) -> str:
        request = self.context["request"]
        path = reverse(
            "ws-item-terminal-socket",
            args=[terminal.item.app_slug, terminal.item_id, terminal.terminal_id],  # type: ignore[attr-defined]
        )
        scheme = "wss" if request.is_secure() else "ws"
        return f"{scheme}://{request.get_host()}{path}"
