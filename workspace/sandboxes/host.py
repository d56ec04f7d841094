"""The sandbox host: the HTTP protocol of docs/ARCHITECTURE.md §5 served over a local backend.

Stdlib `ThreadingHTTPServer` on purpose: the host is a small, separately deployed process with
a few routes, and a blocking exec per thread is exactly its job.

Terminals: `POST /sandboxes/<id>/terminals` (a new one) and `POST /sandboxes/<id>/terminals/<tid>/attach`
upgrade their connection (`Connection: Upgrade`, `Upgrade: workspace-terminal`; 101) and then carry
the terminal's keeper's own frames both ways (workspace/sandboxes/terminals.py), so the app relays
a terminal on a host exactly as one on its own machine. A terminal lives in its sandbox, not in the
host: an attached one costs the host a thread while it is attached, and none once its page went away.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import logging
import os
import re
import selectors
import socket
import urllib.parse
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from crudgen.parsers import loads_bounded
from quotas.sizes import SizeError, parse_optional_size, parse_size
from quotas.values import SandboxSize
from workspace.sandboxes.base import (
    MISCONFIGURED,
    CommandInvalid,
    HostCapacity,
    SandboxGone,
    SandboxMisconfigured,
    SandboxUnavailable,
    validate_command,
)
from workspace.sandboxes.boundary import boundary_warnings, configured_boundary
from workspace.sandboxes.isolation import cap_warnings, configured_cap, configured_driver, warn_about_enforcement
from workspace.sandboxes.local import LocalBackend, valid_exec_id
from workspace.sandboxes.reach import unreachable_reason
from workspace.sandboxes.share import share_marker_written, share_report
from workspace.sandboxes.terminals import HOST_UPGRADE, TerminalLink, TerminalRefused
from workspace.sandboxes.volumes import disk_enforcement, enforcement_warnings

logger = logging.getLogger(__name__)
_ITEM_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SANDBOX_PATH = re.compile(r"^/sandboxes/([A-Za-z0-9_-]{1,100})(/exec)?$")
_EXEC_PATH = re.compile(r"^/sandboxes/([A-Za-z0-9_-]{1,100})/exec/([A-Za-z0-9_-]{1,64})$")
_TERMINAL_PATH = re.compile(r"^/sandboxes/([A-Za-z0-9_-]{1,100})/terminals(?:/([A-Za-z0-9_-]{1,64})/attach)?$")
_CONTENT_LENGTH = re.compile(r"^[0-9]{1,19}$")
MAX_BODY_BYTES = 1024 * 1024
# A client that stops sending (a stalled body, an idle kept-alive connection) frees its thread after this.
READ_TIMEOUT_SECONDS = 30.0
DEFAULT_EXEC_TIMEOUT = 30.0
MAX_EXEC_TIMEOUT = 3600.0
# Beyond these no kernel takes the value (cgroup files refuse it, a loop image cannot be that big):
# a caller asking for more made a mistake, and hears so as a 400 rather than a 500.
MAX_CPU_CORES = 4096.0
MAX_PIDS = 4 * 1024 * 1024
MAX_MEMORY_BYTES = 2**60
MAX_DISK_BYTES = 2**50


class BadRequest(Exception):
    """A request the host cannot take as sent: a 400 (or `status`) with a JSON error."""

    status = 400
    error = "bad_request"


class BodyTimeout(BadRequest):
    status = 408
    error = "request_timeout"


def _setting(name: str, default: str = "") -> str:
    return str(getattr(settings, name)) or default


def configured_capacity() -> HostCapacity:
    """`SANDBOX_HOST_CAPACITY_CPU`, `_MEMORY`, `_SANDBOXES`; empty: what the machine has, and no
    bound on the count. Nonsense stops start-up: a pool would place sandboxes by it."""
    cpu = _setting("SANDBOX_HOST_CAPACITY_CPU")
    memory = _setting("SANDBOX_HOST_CAPACITY_MEMORY")
    count = _setting("SANDBOX_HOST_CAPACITY_SANDBOXES")
    try:
        capacity = HostCapacity(
            cpu_cores=float(cpu) if cpu else float(len(os.sched_getaffinity(0))),
            memory_bytes=parse_size(memory) if memory else _machine_memory(),
            sandboxes=int(count) if count else None,
        )
    except (ValueError, SizeError) as exc:
        raise ImproperlyConfigured(f"SANDBOX_HOST_CAPACITY_*: {exc}") from exc
    if not (0 < capacity.cpu_cores <= MAX_CPU_CORES and 0 < capacity.memory_bytes <= MAX_MEMORY_BYTES):
        raise ImproperlyConfigured(
            f"SANDBOX_HOST_CAPACITY_CPU and _MEMORY must be above 0 (cores up to {MAX_CPU_CORES:g}), "
            f"got {capacity.cpu_cores:g} cores and {capacity.memory_bytes} bytes."
        )
    if capacity.sandboxes is not None and capacity.sandboxes < 1:
        raise ImproperlyConfigured(f"SANDBOX_HOST_CAPACITY_SANDBOXES must be 1 or more, got {capacity.sandboxes}.")
    return capacity


def _machine_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


@dataclass(frozen=True)
class HostSettings:
    defaults: SandboxSize
    workspace_root: Path
    state_dir: Path
    token: str = ""
    capacity: HostCapacity | None = None

    @classmethod
    def from_settings(cls) -> HostSettings:
        """`SANDBOX_HOST_CPU`, `_MEMORY`, `_PIDS`, `_WORKSPACES`, `_STATE_DIR` (settings, then env)."""
        var_dir = Path(settings.WORKSPACE_VAR_DIR)
        cpu = _setting("SANDBOX_HOST_CPU")
        defaults = SandboxSize(
            cpu_cores=float(cpu) if cpu else None,
            memory_bytes=parse_optional_size(_setting("SANDBOX_HOST_MEMORY"), allow_max=True),
            pids_max=int(_setting("SANDBOX_HOST_PIDS", "0")) or None,
        )
        return cls(
            defaults=defaults,
            workspace_root=Path(_setting("SANDBOX_HOST_WORKSPACES", str(var_dir / "workspaces"))),
            state_dir=Path(_setting("SANDBOX_HOST_STATE_DIR", str(var_dir / "sandbox-host"))),
            token=settings.WORKSPACE_SANDBOX_HOST_TOKEN,
            capacity=configured_capacity(),
        )


def _number(value: Any, key: str, maximum: float) -> float | None:
    """JSON allows NaN, Infinity and 400-digit numbers; none of them is a limit or a timeout."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRequest(f"{key} must be a non-negative number or null")
    if not 0 <= value <= maximum:  # NaN compares false, so it is refused here too
        raise BadRequest(f"{key} must be a number from 0 to {maximum:g}, or null")
    return float(value)


def _memory(value: Any) -> int | None:
    if value is None:
        return None
    try:
        memory = parse_optional_size(value, allow_max=True)
    except SizeError as exc:
        raise BadRequest(f"memory: {exc}") from exc
    if memory is not None and memory > MAX_MEMORY_BYTES:
        raise BadRequest(f"memory must be at most {MAX_MEMORY_BYTES} bytes")
    return memory


def _whole(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**62:
        raise BadRequest(f"{key} must be a whole number")
    return value


def _disk(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DISK_BYTES:
        raise BadRequest(f"disk must be a number of bytes from 0 to {MAX_DISK_BYTES}, or null")
    return value


class SandboxHost:
    """The routes, independent of the HTTP plumbing so they are easy to read and test."""

    def __init__(self, backend: LocalBackend, capacity: HostCapacity, workspaces: dict[str, str] | None = None) -> None:
        self.backend = backend
        self.capacity = capacity
        # How the app proves it shares this host's workspaces (workspace/sandboxes/share.py).
        self.workspaces = workspaces or {}

    def healthz(self) -> tuple[int, dict]:
        spec = self.backend.defaults
        return 200, {
            "status": "ok",
            "defaults": spec.as_dict(),
            "cap": self.backend.cap.as_dict(),
            "capacity": self.capacity.as_dict(),
            "workspaces": self.workspaces,
        }

    def create(self, body: dict) -> tuple[int, dict]:
        # Unknown fields are ignored on purpose: newer apps may send more than this host knows.
        item_id = str(body.get("item_id", ""))
        if not _ITEM_ID.match(item_id):
            raise BadRequest("item_id must be 1-64 letters, digits, dashes or underscores")
        pids = _number(body.get("pids"), "pids", MAX_PIDS)
        spec = SandboxSize(
            cpu_cores=_number(body.get("cpu"), "cpu", MAX_CPU_CORES),
            memory_bytes=_memory(body.get("memory")),
            pids_max=None if pids is None else int(pids),
        )
        try:
            opened = self.backend.open(workspace_id=item_id, spec=spec, disk_bytes=_disk(body.get("disk")))
        except SandboxMisconfigured:
            raise  # an operator's to fix, not a moment's: answered as such by the handler
        except (SandboxUnavailable, OSError) as exc:
            logger.warning("sandbox host could not open a sandbox for item %s: %s", item_id, exc)
            return 503, {"error": "sandbox_unavailable", "detail": "This host cannot open a sandbox right now."}
        return 201, {"id": opened.id, **opened.spec.as_dict()}

    def listing(self, query: str) -> tuple[int, dict]:
        """`GET /sandboxes?older_than=S`: the ids the app reconciles against its ledger."""
        values = urllib.parse.parse_qs(query).get("older_than", ["0"])
        try:
            older_than = float(values[0])
        except ValueError as exc:
            raise BadRequest("older_than must be a number of seconds") from exc
        return 200, {"sandboxes": self.backend.sandboxes_older_than(max(older_than, 0.0))}

    def state(self, sandbox_id: str) -> tuple[int, dict]:
        if sandbox_id not in self.backend.sandboxes():
            return 404, {"error": "not_found", "detail": f"No sandbox {sandbox_id}."}
        return 200, {"id": sandbox_id, "alive": self.backend.probe(sandbox_id)}

    def exec(self, sandbox_id: str, body: dict) -> tuple[int, dict]:
        try:
            command = validate_command(body.get("command"))
        except CommandInvalid as exc:
            raise BadRequest(str(exc)) from exc
        timeout = _number(body.get("timeout"), "timeout", MAX_EXEC_TIMEOUT) or DEFAULT_EXEC_TIMEOUT
        exec_id = body.get("exec_id") or ""
        if not isinstance(exec_id, str) or (exec_id and not valid_exec_id(exec_id)):
            raise BadRequest("exec_id must be 1-64 letters, digits, dashes or underscores")
        try:
            result = self.backend.exec(
                sandbox_id, command=command, timeout=min(timeout, MAX_EXEC_TIMEOUT), exec_id=exec_id
            )
        except SandboxGone:
            return 404, {"error": "not_found", "detail": f"No sandbox {sandbox_id}."}
        return 200, result.as_dict()

    def terminal(self, sandbox_id: str, terminal_id: str | None, body: dict) -> TerminalLink | tuple[int, dict]:
        """A link to a new terminal of the sandbox (`terminal_id` None: its id is in the body) or to
        the terminal `terminal_id`, to relay once the connection is upgraded; else the refusal."""
        secret = body.get("secret")
        if not isinstance(secret, str):
            raise BadRequest("secret must be the terminal's secret, a string")
        try:
            if terminal_id is None:
                link = self.backend.terminal_start(
                    sandbox_id,
                    terminal_id=str(body.get("terminal_id", "")),
                    secret=secret,
                    rows=_whole(body.get("rows"), "rows"),
                    cols=_whole(body.get("cols"), "cols"),
                    idle_seconds=_whole(body.get("idle_seconds", 0), "idle_seconds"),
                )
            else:
                since = _whole(body.get("since", 0), "since")
                link = self.backend.terminal_attach(sandbox_id, terminal_id=terminal_id, secret=secret, since=since)
        except TerminalRefused as exc:
            raise BadRequest(str(exc)) from exc
        except SandboxGone:
            return 404, {"error": "not_found", "detail": f"No sandbox {sandbox_id}."}
        except SandboxUnavailable as exc:
            return 409, {"error": "terminal_unavailable", "detail": str(exc)}
        except OSError as exc:
            logger.warning("sandbox host could not reach the terminal of sandbox %s: %s", sandbox_id, exc)
            return 503, {"error": "sandbox_unavailable", "detail": "This host cannot reach that sandbox right now."}
        return link

    def stop(self, sandbox_id: str, exec_id: str) -> tuple[int, dict | None]:
        """`DELETE /sandboxes/<id>/exec/<exec_id>`: stops that command, not the sandbox."""
        if not self.backend.stop(sandbox_id, exec_id):
            return 404, {"error": "not_found", "detail": f"No command {exec_id} runs in sandbox {sandbox_id}."}
        return 204, None

    def delete(self, sandbox_id: str) -> tuple[int, dict | None]:
        if sandbox_id not in self.backend.sandboxes():
            return 404, {"error": "not_found", "detail": f"No sandbox {sandbox_id}."}
        self.backend.close(sandbox_id)
        return 204, None


class _Handler(BaseHTTPRequestHandler):
    host: SandboxHost
    token: str
    protocol_version = "HTTP/1.1"
    timeout = READ_TIMEOUT_SECONDS
    body_read = False

    def log_message(self, format: str, *args: Any) -> None:
        logger.info("sandbox host: " + format, *args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """What the stdlib refuses before a route runs (a bad request line, too long a header, an
        unknown method) is answered in JSON too, and the connection closed: its rest is unread."""
        self.close_connection = True
        # A line too garbled to name its version leaves HTTP/0.9, which has no status line to send.
        self.request_version = "HTTP/1.0" if self.request_version == "HTTP/0.9" else self.request_version
        error = "bad_request" if code == HTTPStatus.BAD_REQUEST else HTTPStatus(code).phrase.lower().replace(" ", "_")
        self._reply(code, {"error": error, "detail": message or HTTPStatus(code).phrase})

    def _reply(self, status: int, body: dict | None) -> None:
        raw = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _content_length(self) -> int:
        """The body's length from its one Content-Length, a plain decimal; anything else is a 400."""
        if self.headers.get("Transfer-Encoding") is not None:
            raise BadRequest("send the body with a Content-Length; Transfer-Encoding is not supported")
        values = {value.strip() for value in self.headers.get_all("Content-Length") or []}
        if not values:
            return 0
        if len(values) > 1:
            raise BadRequest("the request has conflicting Content-Length headers")
        (value,) = values
        if not _CONTENT_LENGTH.match(value):
            raise BadRequest(f"Content-Length must be a non-negative whole number, got {value[:40]!r}")
        return int(value)

    def _body(self) -> dict:
        length = self._content_length()
        if length > MAX_BODY_BYTES:
            raise BadRequest("the request body is too large")
        try:
            raw = self.rfile.read(length) if length else b"{}"
        except TimeoutError as exc:
            raise BodyTimeout(f"the body did not arrive within {READ_TIMEOUT_SECONDS:g} seconds") from exc
        self.body_read = True
        if len(raw) < length:
            raise BadRequest("the body is shorter than its Content-Length")
        try:
            body = loads_bounded(raw or b"{}")
        except ValueError as exc:
            raise BadRequest("the body is not JSON") from exc
        if not isinstance(body, dict):
            raise BadRequest("the body must be a JSON object")
        return body

    def _authorised(self) -> bool:
        """Every call carries the shared token when the host has one (compared in constant time)."""
        if not self.token:
            return True
        sent = self.headers.get("Authorization", "")
        return hmac.compare_digest(sent.encode(), f"Bearer {self.token}".encode())

    def _route(self, method: str) -> None:
        if not self._authorised():
            # The body is not read: close the connection rather than leave it unread on a kept-alive one.
            self.close_connection = True
            self._reply(401, {"error": "unauthorized", "detail": "This sandbox host needs its shared token."})
            return
        self.body_read = False
        try:
            terminal = _TERMINAL_PATH.match(self.path.split("?", 1)[0])
            if terminal and method == "POST":
                self._relay_terminal(terminal.group(1), terminal.group(2))
                return
            answer = self._dispatch(method)
            # A body nobody read (a GET or DELETE that carried one) would be taken for the next request.
            if not self.body_read and self.headers.get("Content-Length", "0").strip() != "0":
                self.close_connection = True
            self._reply(*answer)
        except BadRequest as exc:
            # Whatever the client sent after the bad part is unread: this connection is done.
            self.close_connection = True
            self._reply(exc.status, {"error": exc.error, "detail": str(exc)})
        except SandboxMisconfigured as exc:
            logger.error("sandbox host misconfigured: %s", exc)
            self._reply(500, {"error": MISCONFIGURED, "detail": str(exc)})
        except Exception:
            logger.exception("sandbox host failed on %s %s", method, self.path)
            self._reply(500, {"error": "server_error", "detail": "The sandbox host failed."})

    def _relay_terminal(self, sandbox_id: str, terminal_id: str | None) -> None:
        """Upgrades the connection (101) and relays the terminal's keeper over it until either side ends."""
        upgrading = "upgrade" in self.headers.get("Connection", "").lower()
        if not upgrading or self.headers.get("Upgrade", "").lower() != HOST_UPGRADE:
            raise BadRequest(f"a terminal is relayed over an upgraded connection: send Upgrade: {HOST_UPGRADE}")
        answer = self.host.terminal(sandbox_id, terminal_id, self._body())
        if isinstance(answer, tuple):
            self._reply(*answer)
            return
        self.close_connection = True
        try:
            self.send_response(101)
            self.send_header("Connection", "Upgrade")
            self.send_header("Upgrade", HOST_UPGRADE)
            self.end_headers()
            _splice(self.connection, answer)
        finally:
            answer.detach()

    def _dispatch(self, method: str) -> tuple[int, dict | None]:
        path = self.path.split("?", 1)[0]
        if path == "/healthz" and method == "GET":
            return self.host.healthz()
        if path == "/sandboxes" and method == "POST":
            return self.host.create(self._body())
        if path == "/sandboxes" and method == "GET":
            return self.host.listing(self.path.partition("?")[2])
        running = _EXEC_PATH.match(path)
        if running and method == "DELETE":
            return self.host.stop(running.group(1), running.group(2))
        match = _SANDBOX_PATH.match(path)
        if match and match.group(2) and method == "POST":
            return self.host.exec(match.group(1), self._body())
        if match and not match.group(2) and method == "GET":
            return self.host.state(match.group(1))
        if match and not match.group(2) and method == "DELETE":
            return self.host.delete(match.group(1))
        return int(HTTPStatus.NOT_FOUND), {"error": "not_found", "detail": f"No route {method} {path}."}

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_DELETE(self) -> None:
        self._route("DELETE")


def _splice(client: socket.socket, link: TerminalLink) -> None:
    """Copies bytes both ways between the app's connection and the keeper's until either closes.
    Blocking on purpose, in this connection's thread: an app that reads slowly slows its own
    terminal, whose keeper keeps its ring and lets a viewer that lags too far go."""
    keeper = link.connection
    client.settimeout(None)
    keeper.settimeout(None)
    with contextlib.suppress(OSError), selectors.DefaultSelector() as selector:
        client.sendall(link.take_buffered())
        selector.register(client, selectors.EVENT_READ, keeper)
        selector.register(keeper, selectors.EVENT_READ, client)
        while True:
            for key, _events in selector.select():
                chunk = key.fileobj.recv(65536)
                if not chunk:
                    return
                key.data.sendall(chunk)


def build_server(address: str, port: int, host_settings: HostSettings | None = None) -> ThreadingHTTPServer:
    """A ready-to-serve host; port 0 picks a free port (read it from `server.server_address`)."""
    chosen = host_settings or HostSettings.from_settings()
    if not chosen.token and not _is_loopback(address):
        raise ImproperlyConfigured(
            f"The sandbox host will not listen on {address} without a token: set WORKSPACE_SANDBOX_HOST_TOKEN "
            "here and in the app, or listen on loopback."
        )
    if not chosen.token:
        logger.warning("The sandbox host has no token: any local process may open sandboxes through it.")
    driver = configured_driver()
    warn_about_enforcement(driver)
    boundary = configured_boundary()
    unreachable = unreachable_reason(chosen.workspace_root, boundary.uid_for("0"), setting="SANDBOX_HOST_WORKSPACES")
    if unreachable:
        raise ImproperlyConfigured(unreachable)
    cap = configured_cap()
    # What the host enforces for a dimension an app sends as null is its own default.
    loose = cap_warnings({"host": chosen.defaults}, cap, label="Sandboxes asked for without a {dimension} size")
    for warning in boundary_warnings(boundary) + enforcement_warnings() + loose:
        logger.warning(warning)
    backend = LocalBackend(
        state_dir=chosen.state_dir,
        workspace_root=chosen.workspace_root,
        driver=driver,
        boundary=boundary,
        defaults=chosen.defaults,
        cap=cap,
        warm=settings.WORKSPACE_SANDBOX_WARM,
    )
    marker = share_marker_written(chosen.workspace_root, chosen.state_dir)
    workspaces = share_report(marker, disk_enforcement=disk_enforcement())
    routes = SandboxHost(backend, chosen.capacity or configured_capacity(), workspaces)
    handler = type("SandboxHostHandler", (_Handler,), {"host": routes, "token": chosen.token})
    server = ThreadingHTTPServer((address, port), handler)
    server.daemon_threads = True
    return server


def _is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False
