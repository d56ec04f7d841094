"""The `http` backend: a client of the sandbox host (`python manage.py runsandboxhost`)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from quotas.values import SandboxSize
from workspace.items.sandboxes.base import (
    MISCONFIGURED,
    Command,
    ExecEvent,
    ExecResult,
    OpenedSandbox,
    SandboxGone,
    SandboxMisconfigured,
    SandboxUnavailable,
)

# Headroom over the command's own timeout for the host to kill it and answer.
_EXEC_GRACE_SECONDS = 15.0


class HttpBackend:
    name = "http"

    def __init__(self, base_url: str, *, token: str = "", timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None, *, timeout: float | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.base_url}{path}",
            data=data,
            method=method,
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json",
                **({"Authorization": f"Bearer {self.token}"} if self.token else {}),
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                raise SandboxGone(f"the sandbox host does not know {path}") from exc
            detail = exc.read()[:500].decode("utf-8", errors="replace")
            if _error_code(detail) == MISCONFIGURED:
                raise SandboxMisconfigured(f"the sandbox host is misconfigured: {detail}") from exc
            raise SandboxUnavailable(f"the sandbox host answered {exc.code}: {detail}") from exc
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            raise SandboxUnavailable(f"the sandbox host at {self.base_url} cannot be reached: {exc}") from exc
        try:
            return json.loads(raw) if raw else None
        except ValueError as exc:
            raise SandboxUnavailable("the sandbox host answered with something that is not JSON") from exc

    def host_defaults(self) -> SandboxSize:
        """What the host enforces when a dimension is sent as null (`GET /healthz`)."""
        defaults = (self._call("GET", "/healthz") or {}).get("defaults", {})
        return SandboxSize(
            cpu_cores=defaults.get("cpu_cores"),
            memory_bytes=defaults.get("memory_bytes"),
            pids_max=defaults.get("pids_max"),
        )

    def open(
        self, *, item_id: str, spec: SandboxSize, workspace: Path | None = None, disk_bytes: int | None = None
    ) -> OpenedSandbox:
        # Undeclared dimensions go as null, never as a number, so the host's tuned defaults stand.
        payload = {"item_id": str(item_id), "cpu": spec.cpu_cores, "memory": spec.memory_bytes, "pids": spec.pids_max}
        if disk_bytes is not None:
            payload["disk"] = disk_bytes
        created = self._call("POST", "/sandboxes", payload)
        if not isinstance(created, dict) or not created.get("id"):
            raise SandboxUnavailable("the sandbox host did not return a sandbox id")
        enforced = SandboxSize(
            cpu_cores=created.get("cpu_cores"),
            memory_bytes=created.get("memory_bytes"),
            pids_max=created.get("pids_max"),
        )
        if not {"cpu_cores", "memory_bytes"} <= created.keys():
            # An older host does not echo what it enforces; its health check names its defaults.
            enforced = spec.inherit(self.host_defaults())
        return OpenedSandbox(id=str(created["id"]), spec=enforced)

    def exec(self, sandbox_id: str, *, command: Command, timeout: float) -> ExecResult:
        result = self._call(
            "POST",
            f"/sandboxes/{sandbox_id}/exec",
            {"command": command, "timeout": timeout},
            timeout=timeout + _EXEC_GRACE_SECONDS,
        )
        known = ExecResult.__dataclass_fields__.keys()
        return ExecResult(**{key: value for key, value in (result or {}).items() if key in known})

    def exec_streaming(self, sandbox_id: str, *, command: Command, timeout: float) -> Iterator[ExecEvent]:
        # The host protocol answers an exec whole: its output arrives at once, at the end.
        result = self.exec(sandbox_id, command=command, timeout=timeout)
        for name, text in (("stdout", result.stdout), ("stderr", result.stderr)):
            if text:
                yield name, text.encode()
        yield result

    def probe(self, sandbox_id: str) -> bool:
        try:
            state = self._call("GET", f"/sandboxes/{sandbox_id}")
        except SandboxGone:
            return False
        return bool(state and state.get("alive"))

    def sandboxes_older_than(self, seconds: float) -> list[str]:
        listed = self._call("GET", f"/sandboxes?older_than={seconds:g}") or {}
        return [str(sandbox_id) for sandbox_id in listed.get("sandboxes", [])]

    def close(self, sandbox_id: str) -> None:
        try:
            self._call("DELETE", f"/sandboxes/{sandbox_id}")
        except SandboxGone:
            return


def _error_code(body: str) -> str:
    """The `error` of a host's JSON error body; empty when it is not one."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return ""
    return str(parsed.get("error", "")) if isinstance(parsed, dict) else ""
