"""Terminals (issue 43, points 4 and 8): an interactive shell on a PTY in an item's sandbox, opened
over REST and relayed over a WebSocket by `make serve`'s stack (gunicorn, ONE uvicorn worker) on a
throwaway PostgreSQL database, driven by a real WebSocket client (`websockets`, asyncio) signed in
with an API token, as a script would be.

Run: .venv/bin/python bench/terminals.py [--repo PATH] [--only NAME ...] [--keystrokes 500]
         [--throughput-bytes 200000000] [--idle-terminals 200] [--slow-seconds 60] [--attaches 200]

Scenarios (each on its own server and database):
- echo: keystroke to echo through the whole stack (WebSocket, relay, the sandbox's agent and the
  terminal's keeper, the PTY, and back), one byte at a time, timed from the client's send to that
  byte coming back: at bash's prompt (readline echoes it) and in `cat` (the kernel's tty echo, no
  program in between). Client-measured on loopback, so an upper bound of the server's share. Also
  the REST opening (the first one opens the sandbox) and a WebSocket's time to its `live` message.
- throughput: `head -c N /dev/zero | tr '\\0' y` into a client that reads as fast as it can; the
  bytes received, what the server announced as dropped (the keeper keeps no viewer that falls
  more than 1 MiB behind: it reattaches with `?since=`), whether any byte is garbled, and the CPU
  the app process, the keeper and this client used meanwhile.
- idle200: that many terminals of one person in one item, each opened over REST, attached over a
  WebSocket and left idle: the app process's RSS, threads and descriptors before and after, and
  the sandbox side (the keepers, the shells and the agent's attach sessions) apart.
- slowclient: `yes` for --slow-seconds into a client that reads about 20 KB/s (a small socket
  receive buffer, a short queue, a sleep after each message), then reads what is left; the app
  process's RSS sampled meanwhile, and the stream checked byte by byte against its offsets: every
  byte is where "y\\r\\n" repeated puts it (what a terminal shows of `yes`), and every byte not
  received was announced (a `replay` whose `start` is past the `since` the client asked for).
throughput and slowclient run twice: without compression, and with permessage-deflate, which
browsers offer and `websockets` too (the other scenarios use it).
- first_attach (only with --only first_attach): --attaches terminals, each attached as soon as
  its opening answers, while busy loops spend the sandbox's cpu; how many first attaches the
  server closed, and whether those terminals are still listed, reachable, and running.

`--repo` serves another checkout (its own virtualenv runs it when it has one). Prints one JSON
object per scenario; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.live import (  # noqa: E402
    DEFAULT_SERVER_URL,
    Client,
    Server,
    children_of,
    close_sandboxes,
    gunicorn,
    migrate,
    production_env,
    run_django,
    throwaway_database,
)

PERSON, PASSWORD = "alice", "bench-secret-1"
ACCOUNT = f"""
from django.contrib.auth.models import User
User.objects.create_user({PERSON!r}, password={PASSWORD!r})
"""
# The notebook app's sandbox, sized for idle200: each terminal is a keeper (perl), a shell (bash)
# and an attach session (perl) in the sandbox, some 1.5 MB charged to it: 200 of them pass the
# shipped 512 processes, and would leave little of the shipped 512 MB.
SANDBOX_MEMORY = "1G"
SANDBOX_PIDS = 4096
# A bound to give up at on a loaded machine, never a speed anyone asserts.
ANSWER_SECONDS = 30.0
# Output quiet for this long: the shell has printed its prompt.
QUIET_SECONDS = 0.5
# Keystrokes on one line before Ctrl-U clears it, so that the line never wraps (the terminal is 80
# columns) and each echo is the typed byte alone.
KEYS_PER_LINE = 40
WARMUP_KEYSTROKES = 20
# The slow client: what it reads per second, its socket's receive buffer, its library's queue.
SLOW_READ_BYTES_PER_SECOND = 20_000
SLOW_RECEIVE_BUFFER = 4096
SLOW_QUEUE_MESSAGES = 1
RSS_SAMPLE_SECONDS = 5.0
IDLE_SETTLE_SECONDS = 10.0
# Printed by the commands around their output, split in the typed line so that its echo never
# matches: `printf '%s-%s\n' BENCH BEGIN` prints BENCH-BEGIN.
BEGIN_MARK, END_MARK = b"BENCH-BEGIN\r\n", b"BENCH-END"


def _marked(command: str) -> bytes:
    return f"stty -echo; printf '%s-%s\\n' BENCH BEGIN; {command}; printf '%s-%s\\n' BENCH END\n".encode()


# -- the server ------------------------------------------------------------------------------


@contextmanager
def _serving(repo: Path, database_url: str, **settings: str) -> Iterator[Server]:
    """gunicorn with ONE app process on a throwaway database, one person, no per-person bound on
    terminals, and a notebook sandbox big enough for idle200; its sandboxes closed after."""
    folder = Path(tempfile.mkdtemp(prefix="bench-terminals-"))
    folder.chmod(0o711)  # sandbox uids pass through to their workspaces
    config = folder / "bench.toml"
    config.write_text(f"[sandbox]\npids = {SANDBOX_PIDS}\n")
    apps = folder / "apps"
    apps.mkdir()
    for descriptor in sorted((repo / "workspace" / "apps").glob("*.toml")):
        text = descriptor.read_text()
        if descriptor.name == "notebook.toml":
            text = re.sub(r'(?m)^memory = ".*"$', f'memory = "{SANDBOX_MEMORY}"', text)
        (apps / descriptor.name).write_text(text)
    env = production_env(
        database_url,
        folder / "var",
        WORKSPACE_SERVE_PREPARE="0",
        WORKSPACE_SERVE_WORKER="0",
        WORKSPACE_CONFIG=str(config),
        WORKSPACE_APPS_DIR=str(apps),
        WORKSPACE_TERMINALS_PER_USER="0",
        **settings,
    )
    migrate(env)
    run_django(ACCOUNT, env)
    python = repo / ".venv" / "bin" / "python"
    try:
        with gunicorn(
            env, folder / "gunicorn.log", workers=1, config=repo / "workspace" / "gunicorn.conf.py",
            python=str(python) if python.exists() else sys.executable, cwd=repo,
        ) as server:  # fmt: skip
            yield server
    finally:
        close_sandboxes(env)
        # Its workspace images (some 60 MB a scenario) go too, once nothing of them is mounted.
        if str(folder) not in Path("/proc/mounts").read_text():
            shutil.rmtree(folder, ignore_errors=True)


def _app_process(server: Server) -> int:
    """gunicorn's one worker (the app process), not its master."""
    workers = [pid for pid in children_of(server.process.pid) if b"manage.py" not in _cmdline(pid)]
    if len(workers) != 1:
        raise RuntimeError(f"expected one app process under gunicorn, found {workers}")
    return workers[0]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _status(pid: int) -> dict[str, str]:
    text = Path(f"/proc/{pid}/status").read_text()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in text.splitlines())}


@dataclass(frozen=True)
class ProcessFigures:
    rss: int
    threads: int
    descriptors: int

    def as_json(self, suffix: str) -> dict[str, Any]:
        return {
            f"rss_mb_{suffix}": _mb(self.rss),
            f"threads_{suffix}": self.threads,
            f"open_fds_{suffix}": self.descriptors,
        }


def _process_figures(pid: int) -> ProcessFigures:
    fields = _status(pid)
    return ProcessFigures(
        rss=int(fields["VmRSS"].split()[0]) * 1024,
        threads=int(fields["Threads"]),
        descriptors=len(list(Path(f"/proc/{pid}/fd").iterdir())),
    )


def _cpu_seconds(pid: int) -> float:
    """The CPU time (user and system) a process has used so far."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    user, system = stat[stat.rindex(")") + 2 :].split()[11:13]
    return (int(user) + int(system)) / os.sysconf("SC_CLK_TCK")


def _machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent not idle, all cores together (/proc/stat)."""
    ticks = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _mb(size: float) -> float:
    return round(size / 1024 / 1024, 1)


# -- the sandbox side -----------------------------------------------------------------------


def _process_table() -> dict[int, tuple[int, str]]:
    """Every process: its parent and its command name."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        table[int(entry.name)] = (parent, name)
    return table


def _memory_of(pid: int) -> tuple[int, int]:
    """A process's RSS and PSS (its share of the pages it shares with others), in bytes."""
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0, 0
    fields = dict(re.findall(r"^(Rss|Pss):\s+(\d+) kB", rollup, re.M))
    return int(fields.get("Rss", 0)) * 1024, int(fields.get("Pss", 0)) * 1024


def _sandbox_roles(app_pid: int) -> dict[str, list[int]]:
    """The sandboxes' processes under the app process, by role: the agents (the perl each sandbox's
    bubblewrap runs), the terminals' keepers (an agent's fork whose child is the shell), their
    shells, and the agent's attach sessions (a fork per attached WebSocket that copies bytes to its
    keeper). A warm skeleton's waiting process (a perl that is no bubblewrap's) is none of them."""
    table = _process_table()
    children: dict[int, list[int]] = collections.defaultdict(list)
    for pid, (parent, _name) in table.items():
        children[parent].append(pid)
    below, stack = [], list(children[app_pid])
    while stack:
        pid = stack.pop()
        below.append(pid)
        stack.extend(children[pid])
    roles: dict[str, list[int]] = collections.defaultdict(list)
    for pid in below:
        parent, name = table[pid]
        parent_name = table.get(parent, (0, ""))[1]
        if name in {"bash", "sh"} and parent_name == "perl":
            roles["shells"].append(pid)
        elif name != "perl":
            continue
        elif parent_name == "bwrap":
            roles["agents"].append(pid)
        elif parent_name != "perl":
            continue
        elif any(table[child][1] in {"bash", "sh"} for child in children[pid]):
            roles["keepers"].append(pid)
        else:
            roles["attach_sessions"].append(pid)
    return roles


def _sandbox_figures(app_pid: int) -> dict[str, Any]:
    """The sandbox side by role (`_sandbox_roles`), and what the sandbox's memory cgroup charges.
    RSS counts shared pages in each process; PSS splits them, so its sum is what they cost together."""
    roles = _sandbox_roles(app_pid)
    figures: dict[str, Any] = {}
    for role in ("keepers", "shells", "attach_sessions", "agents"):
        memory = [_memory_of(pid) for pid in roles[role]]
        figures[f"sandbox_{role}"] = len(memory)
        figures[f"sandbox_{role}_rss_mb"] = _mb(sum(rss for rss, _pss in memory))
        figures[f"sandbox_{role}_pss_mb"] = _mb(sum(pss for _rss, pss in memory))
    if roles["agents"]:
        figures["sandbox_cgroup_memory_mb"] = _cgroup_memory(roles["agents"][0])
    return figures


def _cgroup_file(pid: int, controller: str, v1_name: str, v2_name: str) -> Path | None:
    """A control file of the cgroup `pid` is in: `v1_name` of `controller`'s hierarchy (cgroup
    v1), else `v2_name` of the unified one."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _number, controllers, path = line.split(":", 2)
        relative = path.lstrip("/")
        if controller in controllers.split(","):
            candidates = [Path("/sys/fs/cgroup") / controllers / relative / v1_name]
        elif controllers == "":
            candidates = [Path(root) / relative / v2_name for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")]
        else:
            continue
        for candidate in candidates:
            if candidate.exists() and relative:
                return candidate
    return None


def _cgroup_memory(pid: int) -> float | None:
    """What the sandbox's memory cgroup charges (its processes, their page cache and kernel memory)."""
    found = _cgroup_file(pid, "memory", "memory.usage_in_bytes", "memory.current")
    return _mb(int(found.read_text())) if found else None


def _cgroup_throttled_seconds(pid: int) -> float | None:
    """How long the kernel has held the sandbox's processes back at its cpu limit, in all."""
    found = _cgroup_file(pid, "cpu", "cpu.stat", "cpu.stat")
    if found is None:
        return None
    fields = dict(line.split() for line in found.read_text().splitlines())
    if "throttled_time" in fields:  # v1: nanoseconds
        return int(fields["throttled_time"]) / 1e9
    return int(fields.get("throttled_usec", 0)) / 1e6


# -- the client -----------------------------------------------------------------------------


@dataclass
class Person:
    """The person's REST client, signed in with an API token (as a script is), and their item."""

    server: Server
    token: str
    item_id: int
    http: Client
    # First attaches the server closed before their replay (the race under "Bug" in bench/REPORT.md).
    refused_first_attaches: int = 0

    @classmethod
    def signed_in(cls, server: Server) -> Person:
        browser = Client(server.port, timeout=60)
        browser.login(PERSON, PASSWORD)
        token = browser.request("POST", "/me/tokens", {"name": "bench"}).json()["token"]
        browser.close()
        http = Client(server.port, timeout=120)
        http.default_headers["Authorization"] = f"Token {token}"
        made = http.request("POST", "/a/notebook/items", {"title": "terminals"})
        if made.status != 201:
            raise RuntimeError(f"no item: {made.status} {made.body[:300]!r}")
        return cls(server, token, made.json()["id"], http)

    def open_terminal(self) -> dict[str, Any]:
        opened = self.http.request("POST", f"/a/notebook/items/{self.item_id}/terminals", {"rows": 24, "cols": 80})
        if opened.status != 201:
            raise RuntimeError(f"no terminal: {opened.status} {opened.body[:300]!r}")
        return opened.json()

    def close_terminal(self, terminal: dict[str, Any]) -> None:
        self.http.request("DELETE", f"/a/notebook/items/{self.item_id}/terminals/{terminal['id']}")


class Closed(Exception):
    """The server closed the WebSocket (its code is in the follower's `closes`)."""


@dataclass
class Follower:
    """One client of a terminal's WebSocket across reconnects: the offset of the next output byte,
    what the server said (replays, live offsets, close codes), and every output byte by offset."""

    person: Person
    terminal: dict[str, Any]
    compression: str | None = "deflate"  # what a browser offers
    # Output made only of this byte is counted, not kept (a 200 MB stream of `y`).
    uniform_byte: int | None = None
    offset: int = 0
    connection: ClientConnection | None = None
    connections: int = 0
    pieces: list[tuple[int, bytes | int]] = field(default_factory=list)  # (offset, bytes or a length)
    received: int = 0
    replays: list[dict[str, int]] = field(default_factory=list)  # asked, start, end
    closes: collections.Counter[str] = field(default_factory=collections.Counter)
    close_log: list[dict[str, Any]] = field(default_factory=list)  # code, offset, at_ms
    mismatches: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)  # what replays' `at_ms` count from
    lives: int = 0  # `live` messages: one per connection once its replay is done
    exit_code: int | None = None

    async def connect(self, *, slow: bool = False) -> None:
        """A new WebSocket, replaying from the offset of the next byte this client lacks."""
        url = self.terminal["ws_url"] + (f"?since={self.offset}" if self.offset else "")
        options: dict[str, Any] = {}
        if slow:
            # The window a slow network gives: the kernel holds little for the client, and the
            # library stops reading the socket past one message waiting.
            parts = urlsplit(url)
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SLOW_RECEIVE_BUFFER)
            sock.connect((parts.hostname, parts.port))
            sock.setblocking(False)
            options = {"sock": sock, "max_queue": SLOW_QUEUE_MESSAGES}
        self.connection = await connect(
            url,
            additional_headers={"Authorization": f"Token {self.person.token}"},
            compression=self.compression,
            proxy=None,
            open_timeout=ANSWER_SECONDS,
            # The bench's own pings would be queued behind the output a slow client has not read.
            ping_interval=None,
            **options,
        )
        self.connections += 1

    async def output(self, timeout: float) -> bytes:
        """The next output bytes; control messages are taken in passing. TimeoutError after
        `timeout` without any; Closed when the server closed the connection."""
        async with asyncio.timeout(timeout):
            while True:
                message = await self._message()
                if isinstance(message, bytes):
                    return message

    async def until_live(self, timeout: float = ANSWER_SECONDS) -> None:
        """Reads the replay up to the server's `live` message."""
        lives = self.lives
        async with asyncio.timeout(timeout):
            while self.lives == lives:
                await self._message()

    async def _message(self) -> bytes | dict[str, Any]:
        assert self.connection is not None
        try:
            message = await self.connection.recv()
        except ConnectionClosed as closed:
            received, sent = closed.rcvd, closed.sent
            said = f"{received.code} {received.reason}".strip() if received else "no close frame"
            if sent is not None and (received is None or sent.code != received.code):
                said += f" (this client closed with {sent.code} {sent.reason})".replace(" )", ")")
            self.closes[said] += 1
            self.close_log.append({"code": said, "offset": self.offset, "at_ms": self._ms()})
            self.connection = None
            raise Closed() from None
        if isinstance(message, bytes):
            self._keep(message)
            return message
        control = json.loads(message)
        self._control(control)
        return control

    def _ms(self) -> int:
        return round((time.monotonic() - self.started) * 1000)

    def _keep(self, data: bytes) -> None:
        if self.uniform_byte is not None and data.count(self.uniform_byte) == len(data):
            self.pieces.append((self.offset, len(data)))
        else:
            self.pieces.append((self.offset, data))
        self.offset += len(data)
        self.received += len(data)

    def _control(self, control: dict[str, Any]) -> None:
        if control["type"] == "replay":
            self.replays.append(
                {
                    "asked": self.offset,
                    "start": control["start"],
                    "end": control["end"],
                    "at_ms": self._ms(),
                }
            )
            if control["start"] < self.offset:
                self.mismatches.append(f"replay from {control['start']} before the offset asked, {self.offset}")
            self.offset = control["start"]
        elif control["type"] == "live":
            # After a replay of start..end, this client's offset is `end`: a live offset elsewhere
            # means bytes of the replay went missing (or came twice).
            if control["offset"] != self.offset:
                self.mismatches.append(f"live at {control['offset']}, the client counted {self.offset}")
                self.offset = control["offset"]
            self.lives += 1
        elif control["type"] == "exit":
            self.exit_code = control["code"]

    async def quiet(self, seconds: float = QUIET_SECONDS) -> bytes:
        """Everything output until nothing comes for `seconds` (the shell waits at its prompt)."""
        taken = b""
        while True:
            try:
                taken += await self.output(seconds)
            except TimeoutError:
                return taken

    async def until(self, wanted: bytes, timeout: float = ANSWER_SECONDS) -> bytes:
        taken = b""
        async with asyncio.timeout(timeout):
            while wanted not in taken:
                taken += await self.output(timeout)
        return taken

    async def send(self, data: bytes | str) -> None:
        assert self.connection is not None
        await self.connection.send(data)

    async def close(self) -> None:
        if self.connection is not None:
            await self.connection.close()
            self.connection = None

    def announced_gaps(self) -> list[tuple[int, int]]:
        """The output the server said it dropped: from the offset asked to the replay's start."""
        return [(replay["asked"], replay["start"]) for replay in self.replays if replay["start"] > replay["asked"]]


async def _attached(person: Person, terminal: dict[str, Any] | None = None, **options: Any) -> Follower:
    """`terminal` (else a new one) attached and past its replay. A first attach the server closes
    before that is counted in `person.refused_first_attaches`, and a new terminal opened instead."""
    for _attempt in range(3):
        terminal = terminal or await asyncio.to_thread(person.open_terminal)
        follower = Follower(person, terminal, **options)
        await follower.connect()
        try:
            await follower.until_live()
            return follower
        except Closed:
            person.refused_first_attaches += 1
            terminal = None
    raise RuntimeError("the server closed three first attaches in a row")


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(int(fraction * len(ordered)), len(ordered) - 1)], 3)


# -- echo -----------------------------------------------------------------------------------


async def _keystrokes(follower: Follower, count: int) -> list[float]:
    """Milliseconds from sending each key to its echo, `count` of them after a few untimed."""
    times = []
    for number in range(WARMUP_KEYSTROKES + count):
        if number % KEYS_PER_LINE == 0:
            await follower.send(b"\x15")  # Ctrl-U: the line is cleared, its erasure echoed
            await follower.quiet(0.05)
        key = b"abcdefghijklmnopqrstuvwxyz"[number % 26 : number % 26 + 1]
        began = time.perf_counter()
        await follower.send(key)
        await follower.until(key)
        if number >= WARMUP_KEYSTROKES:
            times.append((time.perf_counter() - began) * 1000)
    await follower.send(b"\x15")
    await follower.quiet(0.1)
    return times


async def echo(server: Server, args: argparse.Namespace) -> dict[str, Any]:
    person = await asyncio.to_thread(Person.signed_in, server)
    began = time.perf_counter()
    terminal = await asyncio.to_thread(person.open_terminal)
    first_open_ms = (time.perf_counter() - began) * 1000  # opens the item's sandbox too
    opens, attaches = [], []
    for _ in range(args.opens):
        began = time.perf_counter()
        other = await asyncio.to_thread(person.open_terminal)
        opens.append((time.perf_counter() - began) * 1000)
        follower = Follower(person, other)
        began = time.perf_counter()
        await follower.connect()
        try:
            await follower.until_live()
            attaches.append((time.perf_counter() - began) * 1000)
            await follower.close()
            await asyncio.to_thread(person.close_terminal, other)
        except Closed:
            person.refused_first_attaches += 1
    follower = await _attached(person, terminal)
    await follower.quiet()
    at_prompt = await _keystrokes(follower, args.keystrokes)
    # `cat` reads lines: the kernel's line discipline echoes each key, no program in between.
    await follower.send(b"cat\n")
    await follower.quiet()
    tty_echo = await _keystrokes(follower, args.keystrokes)
    await follower.send(b"\x04")
    await follower.close()
    return {
        "keystrokes": args.keystrokes,
        "echo_at_bash_prompt_p50_ms": _percentile(at_prompt, 0.5),
        "echo_at_bash_prompt_p99_ms": _percentile(at_prompt, 0.99),
        "echo_at_bash_prompt_min_ms": round(min(at_prompt), 3),
        "echo_by_tty_p50_ms": _percentile(tty_echo, 0.5),
        "echo_by_tty_p99_ms": _percentile(tty_echo, 0.99),
        "echo_by_tty_min_ms": round(min(tty_echo), 3),
        "measured": "client-side, loopback: an upper bound of the server's time",
        "rest_open_first_ms": round(first_open_ms, 1),
        "rest_open_p50_ms": _percentile(opens, 0.5),
        "attach_to_live_p50_ms": _percentile(attaches, 0.5),
        "compression": follower.compression or "none",
        "first_attaches_refused": person.refused_first_attaches,
    }


# -- throughput -----------------------------------------------------------------------------


def _blocks(follower: Follower) -> list[tuple[int, bytes]]:
    """The kept output bytes, contiguous pieces joined: (offset, bytes)."""
    blocks: list[tuple[int, bytearray]] = []
    for offset, data in follower.pieces:
        if isinstance(data, int):
            continue
        if blocks and blocks[-1][0] + len(blocks[-1][1]) == offset:
            blocks[-1][1].extend(data)
        else:
            blocks.append((offset, bytearray(data)))
    return [(offset, bytes(data)) for offset, data in blocks]


def _mark_offsets(follower: Follower) -> tuple[int | None, int | None]:
    """Where the command's own output begins (after BEGIN_MARK) and ends (at END_MARK)."""
    begin = end = None
    for offset, data in _blocks(follower):
        if begin is None and (found := data.find(BEGIN_MARK)) >= 0:
            begin = offset + found + len(BEGIN_MARK)
        if (found := data.find(END_MARK)) >= 0:
            end = offset + found
    return begin, end


def _stream_check(follower: Follower, pattern: bytes) -> dict[str, Any]:
    """The command's output, between the marks, checked against `pattern` repeated from its first
    byte: each byte received where its offset puts it (garbled otherwise), and each byte not
    received inside a gap the server announced (unannounced otherwise)."""
    begin, end = _mark_offsets(follower)
    if begin is None or end is None:
        return {"stream_check": f"marks not seen (begin {begin}, end {end})"}
    received = garbled = 0
    seen_until = begin
    overlaps = 0
    for offset, data in follower.pieces:
        length = data if isinstance(data, int) else len(data)
        low, high = max(offset, begin), min(offset + length, end)
        if low >= high:
            continue
        if low < seen_until:
            overlaps += seen_until - low  # a byte received twice
        seen_until = max(seen_until, high)
        received += high - low
        if isinstance(data, int):
            # Kept as a count: every byte was the uniform byte, which the pattern must be.
            garbled += 0 if pattern == bytes([follower.uniform_byte or 0]) else high - low
            continue
        phase = (low - begin) % len(pattern)
        expected = (pattern * ((high - low) // len(pattern) + 2))[phase : phase + high - low]
        actual = data[low - offset : high - offset]
        if actual != expected:
            garbled += sum(1 for a, b in zip(actual, expected, strict=True) if a != b)
    announced = sum(max(0, min(stop, end) - max(start, begin)) for start, stop in follower.announced_gaps())
    return {
        "stream_bytes": end - begin,
        "bytes_received": received,
        "bytes_announced_dropped": announced,
        "bytes_unannounced_missing": end - begin - received - announced,
        "bytes_received_twice": overlaps,
        "bytes_garbled": garbled,
    }


async def _read_to_end(follower: Follower, *, slow_until: float = 0.0) -> None:
    """Reads (and reconnects, from its offset) until the END mark has come; slowly, about
    SLOW_READ_BYTES_PER_SECOND, until the monotonic time `slow_until`."""
    tail = b""
    while END_MARK not in tail:
        slow = time.monotonic() < slow_until
        if follower.connection is None:
            await follower.connect(slow=slow)
        try:
            data = await follower.output(ANSWER_SECONDS * 4)
        except Closed:
            continue
        # The mark may straddle two messages: the end of the last one is kept with the next.
        tail = tail[-len(END_MARK) :] + data
        if slow:
            await asyncio.sleep(len(data) / SLOW_READ_BYTES_PER_SECOND)


async def throughput(server: Server, args: argparse.Namespace) -> dict[str, Any]:
    """Both with permessage-deflate (what browsers offer) and without; the CPU the app process and
    this client used meanwhile say which of them the stream waited on (2 cores for everything)."""
    app = _app_process(server)
    person = await asyncio.to_thread(Person.signed_in, server)
    results: dict[str, Any] = {"bytes_asked": args.throughput_bytes}
    for compression in ("deflate", None):
        follower = await _attached(person, compression=compression, uniform_byte=ord("y"))
        await follower.quiet()
        roles = _sandbox_roles(app)
        keeper, agent = roles["keepers"][0], roles["agents"][0]
        began, app_cpu, client_cpu = time.perf_counter(), _cpu_seconds(app), time.process_time()
        keeper_cpu, throttled = _cpu_seconds(keeper), _cgroup_throttled_seconds(agent)
        machine = _machine_busy_seconds()
        await follower.send(_marked(f"head -c {args.throughput_bytes} /dev/zero | tr '\\0' y"))
        await _read_to_end(follower)
        seconds = time.perf_counter() - began
        app_cpu, client_cpu = _cpu_seconds(app) - app_cpu, time.process_time() - client_cpu
        keeper_cpu = _cpu_seconds(keeper) - keeper_cpu
        machine = _machine_busy_seconds() - machine
        if throttled is not None:
            throttled = (_cgroup_throttled_seconds(agent) or 0) - throttled
        await follower.close()
        check = _stream_check(follower, b"y")
        label = compression or "none"
        results[label] = {
            "seconds": round(seconds, 2),
            "received_mb_per_s": round(check.get("bytes_received", 0) / seconds / 1e6, 1),
            "produced_mb_per_s": round(check.get("stream_bytes", 0) / seconds / 1e6, 1),
            "app_cpu_share": round(app_cpu / seconds, 2),
            "client_cpu_share": round(client_cpu / seconds, 2),
            "keeper_cpu_share": round(keeper_cpu / seconds, 2),
            "machine_cpu_busy_cores": round(machine / seconds, 2),  # of 2, whoever used them
            "messages": len(follower.pieces),
            # The sandbox (the keeper, the attach session, head and tr) held back at its 1 core.
            "sandbox_throttled_share": round(throttled / seconds, 2) if throttled is not None else None,
            **check,
            "connections": follower.connections,
            "closes": dict(follower.closes),
            "gaps_announced": len(follower.announced_gaps()),
            "protocol_mismatches": follower.mismatches[:5],
        }
        await asyncio.to_thread(person.close_terminal, follower.terminal)
    results["first_attaches_refused"] = person.refused_first_attaches
    return results


# -- idle200 --------------------------------------------------------------------------------


async def _quiet_or_closed(follower: Follower) -> None:
    """Reads until the shell is quiet; a connection the server closed meanwhile is counted, not raised."""
    with contextlib.suppress(Closed):
        await follower.quiet()


async def idle(server: Server, args: argparse.Namespace) -> dict[str, Any]:
    """--idle-terminals terminals attached and idle: what each costs the app process, and the
    sandbox, and whether each still answers after."""
    app = _app_process(server)
    person = await asyncio.to_thread(Person.signed_in, server)
    cold = _process_figures(app)
    # One terminal opened, attached, used and closed first: the sandbox is open and the code the
    # terminals run is loaded, so that what follows is what each terminal costs.
    warmup = await _attached(person)
    await warmup.send(b"echo warm''ed\n")
    await warmup.until(b"warmed\r\n")
    await warmup.close()
    await asyncio.to_thread(person.close_terminal, warmup.terminal)
    await asyncio.sleep(2)
    before = _process_figures(app)
    sandbox_before = _sandbox_figures(app)
    followers = []
    began = time.perf_counter()
    for _ in range(args.idle_terminals):
        follower = Follower(person, await asyncio.to_thread(person.open_terminal))
        await follower.connect()
        followers.append(follower)
    # Each one replayed what its shell printed, then went live, then is left alone.
    await asyncio.gather(*(_quiet_or_closed(follower) for follower in followers))
    opened_seconds = time.perf_counter() - began
    live = sum(1 for follower in followers if follower.connection is not None and follower.lives)
    await asyncio.sleep(IDLE_SETTLE_SECONDS)
    still_open = sum(1 for follower in followers if follower.connection is not None)
    after = _process_figures(app)
    sandbox_after = _sandbox_figures(app)
    await asyncio.sleep(IDLE_SETTLE_SECONDS)
    later = _process_figures(app)

    async def answers(follower: Follower) -> bool:
        if follower.connection is None:
            return False
        try:
            await follower.send(b"echo fi''ne\n")
            await follower.until(b"fine\r\n")
            return True
        except (TimeoutError, Closed, ConnectionClosed):
            return False

    answered = sum(await asyncio.gather(*(answers(follower) for follower in followers)))
    closes: collections.Counter[str] = sum((follower.closes for follower in followers), collections.Counter())
    await asyncio.gather(*(follower.close() for follower in followers))
    count = args.idle_terminals
    return {
        "terminals": count,
        "attached_and_live": live,
        "still_open_after_idling": still_open,
        "answered_after_idling": answered,
        "closed_by_the_server": dict(closes),
        "open_and_attach_all_seconds": round(opened_seconds, 1),
        "app_rss_mb_cold": _mb(cold.rss),
        **before.as_json("before"),
        **after.as_json("with"),
        "rss_mb_after_another_10s": _mb(later.rss),
        "app_rss_kb_per_terminal": round((after.rss - before.rss) / count / 1024, 1),
        "app_fds_per_terminal": round((after.descriptors - before.descriptors) / count, 2),
        "sandbox_before": sandbox_before,
        "sandbox_with": sandbox_after,
        "sandbox_pss_kb_per_terminal": round(
            sum(sandbox_after[f"sandbox_{role}_pss_mb"] for role in ("keepers", "shells", "attach_sessions"))
            * 1024
            / count,
            1,
        ),
    }


# -- slowclient -----------------------------------------------------------------------------


async def _sampled(app: int, samples: dict[str, list[float]], stop: asyncio.Event) -> None:
    """Every RSS_SAMPLE_SECONDS until `stop`: the app process's RSS, and the sandbox's keepers'."""
    while not stop.is_set():
        samples["app_rss_mb"].append(_mb(_process_figures(app).rss))
        samples["keepers_rss_mb"].append(_sandbox_figures(app)["sandbox_keepers_rss_mb"])
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), RSS_SAMPLE_SECONDS)


async def _slow_run(person: Person, app: int, compression: str | None, seconds: int) -> dict[str, Any]:
    follower = await _attached(person, compression=compression)
    await follower.quiet()
    # Seen the prompt: on again as the slow client (a fast connection's socket buffers would hold
    # megabytes, minutes of reading at its rate), from the offset it has.
    await follower.close()
    await follower.connect(slow=True)
    await follower.until_live()
    before = _process_figures(app)
    samples: dict[str, list[float]] = collections.defaultdict(list)
    stop = asyncio.Event()
    sampling = asyncio.create_task(_sampled(app, samples, stop))
    follower.started = began = time.monotonic()
    await follower.send(_marked(f"timeout {seconds} yes"))
    await _read_to_end(follower, slow_until=began + seconds)
    took = time.monotonic() - began
    stop.set()
    await sampling
    after = _process_figures(app)
    await follower.close()
    await asyncio.to_thread(person.close_terminal, follower.terminal)
    gaps = [stop_at - start for start, stop_at in follower.announced_gaps()]
    replays = follower.replays
    return {
        "seconds_to_end_mark": round(took, 1),
        **_stream_check(follower, b"y\r\n"),
        "bytes_received_all": follower.received,
        "connections": follower.connections,
        "closes": dict(follower.closes),
        "gaps_announced": len(gaps),
        "gap_mb_min_max": [_mb(min(gaps)), _mb(max(gaps))] if gaps else None,
        "replays": replays if len(replays) <= 6 else [*replays[:3], "...", *replays[-3:]],
        "closes_seen": follower.close_log[:3] + (["..."] if len(follower.close_log) > 3 else []),
        "protocol_mismatches": follower.mismatches[:5],
        "app_rss_mb_samples": samples["app_rss_mb"],
        "app_rss_mb_growth": round(samples["app_rss_mb"][-1] - samples["app_rss_mb"][0], 1),
        "keepers_rss_mb_samples": samples["keepers_rss_mb"],
        **before.as_json("before"),
        **after.as_json("after"),
    }


async def slowclient(server: Server, args: argparse.Namespace) -> dict[str, Any]:
    """The slow client twice: without compression, then with permessage-deflate (what browsers
    offer: `yes` compresses some thousand to one, so the buffers on the way hold a minute of it).
    Each on a terminal of its own, in one app process: the second one's RSS is past its warm-up."""
    app = _app_process(server)
    person = await asyncio.to_thread(Person.signed_in, server)
    results: dict[str, Any] = {"slow_seconds": args.slow_seconds, "read_rate_bytes_per_s": SLOW_READ_BYTES_PER_SECOND}
    for compression in (None, "deflate"):
        results[compression or "none"] = await _slow_run(person, app, compression, args.slow_seconds)
    results["first_attaches_refused"] = person.refused_first_attaches
    return results


# -- first_attach (not run unless named) ------------------------------------------------------

# Busy loops in the sandbox, each wanting a core of the sandbox's one: its processes wait their turn.
BUSY_LOOPS = 8


async def first_attach(server: Server, args: argparse.Namespace) -> dict[str, Any]:
    """--attaches terminals, each attached the moment its REST opening answers 201 (as the page and
    the README's example do), while busy loops spend the sandbox's cpu: how many first attaches
    were refused, and what became of those terminals (listed, a reconnect, their keeper)."""
    app = _app_process(server)
    person = await asyncio.to_thread(Person.signed_in, server)
    busy = await _attached(person)
    await busy.quiet()
    await busy.send(f"for n in $(seq {BUSY_LOOPS}); do (while :; do :; done) & done\n".encode())
    await busy.quiet(1.0)
    outcomes: collections.Counter[str] = collections.Counter()
    for _ in range(args.attaches):
        follower = Follower(person, await asyncio.to_thread(person.open_terminal))
        try:
            await follower.connect()
            await follower.until_live()
            outcomes["live"] += 1
            await follower.close()
            continue
        except Closed:
            outcomes[f"closed {', '.join(follower.closes)}"] += 1
        await asyncio.sleep(1.0)  # the server's own clean-up after such a close
        outcomes.update(await _what_became_of(person, follower, app))
    listed = await asyncio.to_thread(person.http.request, "GET", f"/a/notebook/items/{person.item_id}/terminals")
    await busy.send(b"kill $(jobs -p)\n")
    return {
        "attaches": args.attaches,
        "busy_loops_in_the_sandbox": BUSY_LOOPS,
        **outcomes,
        "keepers_in_the_sandbox_at_the_end": len(_sandbox_roles(app)["keepers"]),
        "terminals_listed_at_the_end": len(listed.json()),  # the busy one among them
    }


async def _what_became_of(person: Person, refused: Follower, app: int) -> collections.Counter[str]:
    """A terminal whose first attach was refused, a second later: whether the API still lists it,
    whether its keeper listens in the sandbox (its abstract socket), and what a reconnect gets."""
    found: collections.Counter[str] = collections.Counter()
    terminal_id = refused.terminal["id"]
    listed = await asyncio.to_thread(person.http.request, "GET", f"/a/notebook/items/{person.item_id}/terminals")
    found[f"then listed: {any(row['id'] == terminal_id for row in listed.json())}"] += 1
    sockets = "".join(Path(f"/proc/{agent}/net/unix").read_text() for agent in _sandbox_roles(app)["agents"])
    found[f"then its keeper listening: {f'@ws-term-{terminal_id}' in sockets}"] += 1
    again = Follower(person, refused.terminal)
    try:
        await again.connect()
        await again.until_live()
        found["then a reconnect: live"] += 1
        await again.close()
    except Exception as refusal:  # what a client meets: a close, a refused handshake
        found[f"then a reconnect: {type(refusal).__name__} {str(refusal)[:70]}"] += 1
    return found


SCENARIOS: dict[str, Callable[[Server, argparse.Namespace], Awaitable[dict[str, Any]]]] = {
    "echo": echo,
    "throughput": throughput,
    "idle200": idle,
    "slowclient": slowclient,
    "first_attach": first_attach,
}
DEFAULT_SCENARIOS = ["echo", "throughput", "idle200", "slowclient"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=REPO)
    parser.add_argument("--database-url", default=DEFAULT_SERVER_URL)
    parser.add_argument("--only", nargs="*", choices=list(SCENARIOS), default=DEFAULT_SCENARIOS)
    parser.add_argument("--keystrokes", type=int, default=500)
    parser.add_argument("--opens", type=int, default=20, help="REST openings timed in echo")
    parser.add_argument("--throughput-bytes", type=int, default=200_000_000)
    parser.add_argument("--idle-terminals", type=int, default=200)
    parser.add_argument("--slow-seconds", type=int, default=60)
    parser.add_argument("--attaches", type=int, default=200, help="terminals opened and attached in first_attach")
    args = parser.parse_args()
    for name in args.only:
        with (
            throwaway_database(args.database_url, prefix="ws_bench_terminals") as url,
            _serving(args.repo, url) as server,
        ):
            figures = asyncio.run(SCENARIOS[name](server, args))
        # The machine is shared: its load says how much others ran beside the scenario.
        load = [round(value, 2) for value in os.getloadavg()]
        heading = {"scenario": name, "repo": str(args.repo), "workers": 1, "load_avg": load}
        print(json.dumps({**heading, **figures}), flush=True)


if __name__ == "__main__":
    main()
