"""The `http` backend: a client of the sandbox host (`python manage.py runsandboxhost`)."""

from __future__ import annotations

import http.client
import json
import selectors
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from collab.waits import Readable, readable
from quotas.values import SandboxSize
from workspace.sandboxes.base import (
    MISCONFIGURED,
    Command,
    ExecEvent,
    ExecResult,
    OpenedSandbox,
    SandboxGone,
    SandboxMisconfigured,
    SandboxUnavailable,
    final_result,
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
        connection = self._sent(method, path, body, timeout=timeout)
        try:
            return self._answer(connection, path)
        finally:
            connection.close()

    def _sent(
        self, method: str, path: str, body: dict[str, Any] | None, *, timeout: float | None
    ) -> http.client.HTTPConnection:
        """A connection to the host with the request on it; its answer is `_answer`'s to read."""
        address = urllib.parse.urlsplit(self.base_url)
        kind = http.client.HTTPSConnection if address.scheme == "https" else http.client.HTTPConnection
        connection = kind(address.netloc, timeout=timeout or self.timeout)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            connection.request(
                method, address.path + path, body=None if body is None else json.dumps(body), headers=headers
            )
        except OSError as exc:
            connection.close()
            raise SandboxUnavailable(f"the sandbox host at {self.base_url} cannot be reached: {exc}") from exc
        return connection

    def _answer(self, connection: http.client.HTTPConnection, path: str) -> Any:
        try:
            response = connection.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise SandboxUnavailable(f"the sandbox host at {self.base_url} cannot be reached: {exc}") from exc
        if response.status == 404:
            raise SandboxGone(f"the sandbox host does not know {path}")
        if response.status >= 400:
            detail = raw[:500].decode("utf-8", errors="replace")
            if _error_code(detail) == MISCONFIGURED:
                raise SandboxMisconfigured(f"the sandbox host is misconfigured: {detail}")
            raise SandboxUnavailable(f"the sandbox host answered {response.status}: {detail}")
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
        self, *, workspace_id: str, spec: SandboxSize, workspace: Path | None = None, disk_bytes: int | None = None
    ) -> OpenedSandbox:
        # Undeclared dimensions go as null, never as a number, so the host's tuned defaults stand.
        payload = {
            "item_id": str(workspace_id),
            "cpu": spec.cpu_cores,
            "memory": spec.memory_bytes,
            "pids": spec.pids_max,
        }
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

    def exec(self, sandbox_id: str, *, command: Command, timeout: float, exec_id: str = "") -> ExecResult:
        return final_result(self.exec_streaming(sandbox_id, command=command, timeout=timeout, exec_id=exec_id))

    def exec_streaming(
        self, sandbox_id: str, *, command: Command, timeout: float, exec_id: str = ""
    ) -> Iterator[ExecEvent | Readable]:
        """The host answers an exec whole, once the command ended: its output arrives at once, at
        the end. Driven from the event loop (collab.waits), the wait for that answer is the loop's."""
        path = f"/sandboxes/{sandbox_id}/exec"
        # An older host ignores `exec_id` (it cannot stop a command then) and answers no `reason`.
        body = {"command": command, "timeout": timeout, "exec_id": exec_id}
        connection = self._sent("POST", path, body, timeout=timeout + _EXEC_GRACE_SECONDS)
        try:
            patience = timeout + _EXEC_GRACE_SECONDS
            answered_by = time.monotonic() + patience
            with selectors.DefaultSelector() as selector:
                selector.register(connection.sock, selectors.EVENT_READ)
                while not (answered := bool(selector.select(timeout=0))):
                    if (left := answered_by - time.monotonic()) <= 0:
                        break
                    yield from readable(selector, (connection.sock.fileno(),), left)
            if not answered:
                raise SandboxUnavailable(f"the sandbox host at {self.base_url} did not answer within {patience:g} s")
            answer = self._answer(connection, path)
        finally:
            connection.close()
        known = ExecResult.__dataclass_fields__.keys()
        result = ExecResult(**{key: value for key, value in (answer or {}).items() if key in known})
        for name, text in (("stdout", result.stdout), ("stderr", result.stderr)):
            if text:
                yield name, text.encode()
        yield result

    def stop(self, sandbox_id: str, exec_id: str) -> bool:
        try:
            self._call("DELETE", f"/sandboxes/{sandbox_id}/exec/{exec_id}")
        except SandboxGone:
            return False  # no such command runs there (or an older host that cannot stop one)
        return True

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
