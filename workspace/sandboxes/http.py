"""The `http` backend: a client of the sandbox host (`python manage.py runsandboxhost`)."""

from __future__ import annotations

import http.client
import json
import selectors
import socket
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
    HostCapacity,
    OpenedSandbox,
    SandboxGone,
    SandboxHostUnreachable,
    SandboxMisconfigured,
    SandboxUnavailable,
    final_result,
)
from workspace.sandboxes.terminals import HOST_UPGRADE, TerminalLink, TerminalRefused, checked_id

# Headroom over the command's own timeout for the host to kill it and answer.
_EXEC_GRACE_SECONDS = 15.0
# The most a host's answer may be: an exec's, its two bounded outputs escaped as JSON, is far smaller.
MAX_ANSWER_BYTES = 2 * 1024 * 1024


class HttpBackend:
    name = "http"

    def __init__(self, base_url: str, *, token: str = "", timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _unreachable(self, problem: str) -> SandboxHostUnreachable:
        return SandboxHostUnreachable(f"the sandbox host at {self.base_url} {problem}", host=self.base_url)

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
        except ValueError as exc:
            # A token or an address no request can carry: waiting will not fix it.
            connection.close()
            raise SandboxMisconfigured(
                f"a request to the sandbox host at {self.base_url} cannot be sent: {exc}"
            ) from exc
        except OSError as exc:
            connection.close()
            raise self._unreachable(f"cannot be reached: {exc}") from exc
        return connection

    def _answer(self, connection: http.client.HTTPConnection, path: str) -> Any:
        try:
            response = connection.getresponse()
            raw = response.read(MAX_ANSWER_BYTES + 1)
        except (OSError, http.client.HTTPException) as exc:
            raise self._unreachable(f"cannot be reached: {exc}") from exc
        if len(raw) > MAX_ANSWER_BYTES:
            raise SandboxUnavailable(f"the sandbox host answered more than {MAX_ANSWER_BYTES} bytes")
        if response.status == 404:
            raise SandboxGone(f"the sandbox host does not know {path}")
        if response.status >= 400:
            detail = raw[:500].decode("utf-8", errors="replace")
            if _error_code(detail) == MISCONFIGURED:
                raise SandboxMisconfigured(f"the sandbox host is misconfigured: {detail}")
            raise SandboxUnavailable(f"the sandbox host answered {response.status}: {detail}")
        try:
            return strict_json(raw) if raw else None
        except (ValueError, RecursionError) as exc:
            raise SandboxUnavailable("the sandbox host answered with something that is not JSON") from exc

    def host_defaults(self) -> SandboxSize:
        """What the host enforces when a dimension is sent as null (`GET /healthz`)."""
        defaults = (self._call("GET", "/healthz") or {}).get("defaults", {})
        return SandboxSize(
            cpu_cores=defaults.get("cpu_cores"),
            memory_bytes=defaults.get("memory_bytes"),
            pids_max=defaults.get("pids_max"),
        )

    def host_capacity(self) -> HostCapacity | None:
        """What the host offers a pool in all (`GET /healthz`); None from a host that does not say."""
        return HostCapacity.from_report(self.health().get("capacity"))

    def health(self) -> dict[str, Any]:
        """The host's `GET /healthz` answer (its defaults and capacity), {} when it is not an object."""
        answer = self._call("GET", "/healthz")
        return answer if isinstance(answer, dict) else {}

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
                raise self._unreachable(f"did not answer within {patience:g} s")
            answer = self._answer(connection, path)
        finally:
            connection.close()
        known = ExecResult.__dataclass_fields__.keys()
        result = ExecResult(**{key: value for key, value in (answer or {}).items() if key in known})
        for name, text in (("stdout", result.stdout), ("stderr", result.stderr)):
            if text:
                yield name, text.encode()
        yield result

    def terminal_start(
        self, sandbox_id: str, *, terminal_id: str, secret: str, rows: int, cols: int, idle_seconds: int = 0
    ) -> TerminalLink:
        """A new terminal in the sandbox on the host, which relays its keeper (host.py, terminals)."""
        body = {"terminal_id": terminal_id, "secret": secret, "rows": rows, "cols": cols, "idle_seconds": idle_seconds}
        return self._upgraded(f"/sandboxes/{sandbox_id}/terminals", body)

    def terminal_attach(self, sandbox_id: str, *, terminal_id: str, secret: str, since: int = 0) -> TerminalLink:
        """A link to a terminal of the sandbox on the host, replaying its output from `since`."""
        checked_id(terminal_id)
        body = {"secret": secret, "since": since}
        return self._upgraded(f"/sandboxes/{sandbox_id}/terminals/{terminal_id}/attach", body)

    def _upgraded(self, path: str, body: dict[str, Any]) -> TerminalLink:
        """The host's connection, upgraded to carry a terminal's keeper (101), as a TerminalLink.

        A plain socket, not http.client: after the 101 the connection is the keeper's stream,
        waited on by the relay on the event loop, and the first frames may come with the answer."""
        address = urllib.parse.urlsplit(self.base_url)
        if address.scheme != "http":
            raise SandboxUnavailable(
                f"Terminals are relayed from a sandbox host at an http:// address; {self.base_url} is not one."
            )
        raw = json.dumps(body).encode()
        head = [
            f"POST {address.path}{path} HTTP/1.1",
            f"Host: {address.netloc}",
            "Content-Type: application/json",
            f"Content-Length: {len(raw)}",
            "Connection: Upgrade",
            f"Upgrade: {HOST_UPGRADE}",
        ]
        if self.token:
            head.append(f"Authorization: Bearer {self.token}")
        try:
            connection = socket.create_connection((address.hostname or "", address.port or 80), timeout=self.timeout)
        except OSError as exc:
            raise self._unreachable(f"cannot be reached: {exc}") from exc
        try:
            connection.sendall("\r\n".join(head).encode() + b"\r\n\r\n" + raw)
            status, length, rest = _answer_head(connection)
            if status == 101:
                connection.settimeout(None)
                return TerminalLink(connection, buffered=rest)
            detail = _answer_body(connection, rest, length).decode("utf-8", errors="replace")
        except (OSError, ValueError) as exc:
            connection.close()
            raise self._unreachable(f"did not relay the terminal: {exc}") from exc
        connection.close()
        if status == 404:
            raise SandboxGone(f"the sandbox host does not know {path}")
        if status == 400:
            raise TerminalRefused(_error_detail(detail))
        if status == 409:
            raise SandboxUnavailable(_error_detail(detail))
        raise SandboxUnavailable(f"the sandbox host answered {status}: {detail[:500]}")

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


# The most an answer's head (or the body of a refused upgrade) may be: the host's are far smaller.
_HEAD_LIMIT = 64 * 1024


def _answer_head(connection: socket.socket) -> tuple[int, int, bytes]:
    """The status and Content-Length of the host's answer, and the bytes read past its head."""
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = connection.recv(4096)
        if not chunk or len(received) > _HEAD_LIMIT:
            raise ValueError("the sandbox host's answer ended before its head did")
        received += chunk
    head, _blank, rest = received.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length = 0
    for line in lines[1:]:
        name, _colon, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    return status, length, rest


def _answer_body(connection: socket.socket, received: bytes, length: int) -> bytes:
    wanted = min(length, _HEAD_LIMIT)
    while len(received) < wanted:
        chunk = connection.recv(4096)
        if not chunk:
            break
        received += chunk
    return received[:wanted]


def _not_a_number(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def strict_json(raw: bytes | str) -> Any:
    """JSON as RFC 8259 has it: NaN and Infinity (which Python's parser takes) are refused."""
    return json.loads(raw, parse_constant=_not_a_number)


def _error_detail(body: str) -> str:
    """The `detail` of a host's JSON error body, or the body itself."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return body[:500]
    return str(parsed.get("detail", body[:500])) if isinstance(parsed, dict) else body[:500]


def _error_code(body: str) -> str:
    """The `error` of a host's JSON error body; empty when it is not one."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return ""
    return str(parsed.get("error", "")) if isinstance(parsed, dict) else ""
