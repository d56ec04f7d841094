"""Terminals in a sandbox (issue 43, its first part): a shell on a PTY inside the sandbox's boundary,
kept by the sandbox's agent, which outlives the connection that opened it and replays what it
kept, once, to the next (workspace/sandboxes/terminals.py). Real kernel: bubblewrap, namespaces.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import socket
import struct
import time
from collections.abc import Callable, Iterator

import pytest

from tests.fixtures.exec_agent import wait_for
from tests.fixtures.items import exec_ok, sandbox_of
from tests.fixtures.terminals import link_output_until
from workspace.sandboxes.base import SandboxGone, SandboxUnavailable
from workspace.sandboxes.boundary import configured_boundary
from workspace.sandboxes.filestore import workspace_dir
from workspace.sandboxes.registry import backend_named
from workspace.sandboxes.terminals import (
    Busy,
    Exited,
    Live,
    Output,
    Replaying,
    TakenOver,
    TerminalGone,
    TerminalLink,
    TerminalRefused,
)

pytestmark = pytest.mark.django_db
# How long a test waits for a shell to answer before it says what it saw (a wait, not a measure).
ANSWER_WAIT_SECONDS = 20
# What the server would keep in the terminal's row; code in the sandbox does not know it.
SECRET = "s" * 32


@pytest.fixture
def sandbox(alice_api, make_item) -> tuple[str, object]:
    """alice's notebook with its sandbox open on the local backend: (its id, the item)."""
    item = make_item(created_by="alice")
    exec_ok(alice_api, item, "true")
    sandbox_id, _state = sandbox_of(item)
    return sandbox_id, item


@pytest.fixture
def terminal(sandbox) -> Iterator[Callable[..., TerminalLink]]:
    """Starts terminals in the sandbox; each is closed when the test ends."""
    sandbox_id, _item = sandbox
    started: list[str] = []

    def start(terminal_id: str = "t1", rows: int = 24, cols: int = 80, idle_seconds: int = 0) -> TerminalLink:
        started.append(terminal_id)
        backend = backend_named("local")
        return backend.terminal_start(
            sandbox_id, terminal_id=terminal_id, secret=SECRET, rows=rows, cols=cols, idle_seconds=idle_seconds
        )

    yield start
    for terminal_id in started:
        with contextlib.suppress(TerminalGone, SandboxGone, OSError):
            backend_named("local").terminal_attach(sandbox_id, terminal_id=terminal_id, secret=SECRET).close_terminal()


def _said(marker: str) -> Callable[[bytes], bool]:
    return lambda seen: marker.encode() in seen


def test_a_terminal_is_a_shell_inside_the_sandbox_boundary(sandbox, terminal):
    # Given alice's open sandbox and a terminal in it
    _sandbox_id, item = sandbox
    link = terminal()
    # When she asks who she is, where, on which terminal, and whether the network is there
    link.send_input(b"echo id=$(id -u) pwd=$(pwd) tty=$(tty)\n")
    link.send_input(b"echo net=$(grep -o '^ *[a-z0-9]*:' /proc/net/dev | tr -d ' :\\n'); echo =E''ND\n")
    seen, _events = link_output_until(link, _said("=END\r\n"))
    # Then it runs as the sandbox's uid, in the workspace, on a terminal of its own, with only
    # the loopback device
    text = seen.decode(errors="replace")
    uid = configured_boundary().uid_for(str(item.pk))
    assert f"id={uid} pwd=/workspace tty=/dev/pts/0" in text
    assert "net=lo\r\n" in text


def test_ctrl_c_interrupts_the_foreground_command_and_the_shell_goes_on(terminal):
    # Given a terminal running `sleep 100` in the foreground
    link = terminal()
    link.send_input(b"sleep 100; echo after=$?\n")
    link_output_until(link, _said("sleep 100"))
    time.sleep(0.3)  # the shell forks sleep after it echoed the line: give it the moment
    # When Ctrl-C is typed
    link.send_input(b"\x03")
    link.send_input(b"echo ba''ck\n")
    seen, _events = link_output_until(link, _said("back\r\n"))
    # Then sleep was interrupted (its status 130 is never printed: the whole line was) and the shell answers
    assert b"back\r\n" in seen
    assert b"after=0" not in seen


def _busy_until(link: TerminalLink, running: bool) -> list[bool]:
    """What the keeper said of its foreground, up to its saying `running`."""
    said: list[bool] = []
    for event in link.events(timeout=ANSWER_WAIT_SECONDS):
        if isinstance(event, Busy):
            said.append(event.running)
            if event.running == running:
                break
    return said


# A long command that says when it runs as itself: a signal sent between its shell's fork and its
# exec would meet the shell's own dispositions (an interactive shell ignores SIGTERM and SIGTSTP).
LONG_COMMAND = b"sh -c 'echo go''ing; exec sleep 100'\n"


def _running(link: TerminalLink) -> list[bool]:
    """Types LONG_COMMAND; what the keeper said of its foreground until the command runs as itself."""
    said: list[bool] = []
    link.send_input(LONG_COMMAND)
    seen = b""
    for event in link.events(timeout=ANSWER_WAIT_SECONDS):
        if isinstance(event, Busy):
            said.append(event.running)
        if isinstance(event, Output):
            seen += event.data
        if said and said[-1] and b"going\r\n" in seen:
            break
    return said


def test_the_keeper_says_when_a_command_holds_the_terminal_and_when_the_shell_has_it_back(terminal):
    # Given a terminal at its prompt, which the keeper says runs nothing
    link = terminal()
    assert _busy_until(link, False)[-1] is False
    # When a command runs in its foreground, then is interrupted
    started = _running(link)
    link.send_input(b"\x03")
    ended = _busy_until(link, False)
    # Then the keeper said so both times
    assert started[-1] is True
    assert ended[-1] is False


@pytest.mark.parametrize(("name", "status"), [("TERM", 143), ("HUP", 129), ("QUIT", 131)])
def test_a_signal_by_name_reaches_the_foreground_command(terminal, name, status):
    # Given a terminal running a long command in the foreground
    link = terminal()
    link.send_input(b"sh -c 'echo go''ing; exec sleep 100'; echo aft''er=$?\n")
    link_output_until(link, _said("going\r\n"))
    # When the signal is sent to the terminal
    link.signal(name)
    seen, _events = link_output_until(link, _said("after="))
    # Then sleep ended by it, as the shell reports
    assert f"after={status}".encode() in seen


def test_a_resize_reaches_the_programs_on_the_terminal(terminal):
    # Given a terminal of 24 rows and 80 columns
    link = terminal(rows=24, cols=80)
    # When it is resized to 40 x 132 and asked its size
    link.resize(rows=40, cols=132)
    link.send_input(b"stty size\n")
    seen, _events = link_output_until(link, _said("40 132"))
    # Then the terminal says its new size
    assert b"40 132" in seen


def test_a_terminal_outlives_its_connection_and_replays_what_it_kept_once(sandbox, terminal):
    # Given a terminal that printed "first" and whose connection then closed
    sandbox_id, _item = sandbox
    link = terminal()
    link.send_input(b"echo fi''rst\n")
    link_output_until(link, _said("first\r\n"))
    link.detach()
    # When a new connection attaches from the start and the shell is asked for more
    again = backend_named("local").terminal_attach(sandbox_id, terminal_id="t1", secret=SECRET, since=0)
    replayed, events = link_output_until(again, lambda seen: False if not seen else b"first\r\n" in seen)
    while not any(isinstance(event, Live) for event in events):
        more, more_events = link_output_until(again, lambda seen: True)
        replayed += more
        events += more_events
    again.send_input(b"echo sec''ond\n")
    live, _more = link_output_until(again, _said("second\r\n"))
    # Then it replays "first" once, from the start, says where live output begins, then goes on live
    assert events[0] == Replaying(0, events[0].end)
    assert replayed.count(b"first\r\n") == 1
    assert b"second\r\n" in live
    assert b"first\r\n" not in live


def test_an_attach_from_an_offset_replays_only_what_came_after_it(sandbox, terminal):
    # Given a terminal that printed "one" and whose output ended at some offset, then printed "two"
    sandbox_id, _item = sandbox
    link = terminal()
    link.send_input(b"echo o''ne\n")
    link_output_until(link, _said("one\r\n"))
    link.detach()
    marker = backend_named("local").terminal_attach(sandbox_id, terminal_id="t1", secret=SECRET, since=0)
    _seen, events = link_output_until(marker, lambda seen: False, until=Live)
    offset = next(event.end for event in events if isinstance(event, Live))
    marker.send_input(b"echo t''wo\n")
    link_output_until(marker, _said("two\r\n"))
    marker.detach()
    # When a connection attaches from that offset
    later = backend_named("local").terminal_attach(sandbox_id, terminal_id="t1", secret=SECRET, since=offset)
    replayed, events = link_output_until(later, lambda seen: b"two\r\n" in seen)
    # Then it is sent "two" and not "one"
    assert events[0] == Replaying(offset, events[0].end)
    assert b"two\r\n" in replayed
    assert b"one\r\n" not in replayed


def test_an_ended_terminal_says_its_code_to_every_attach_and_is_not_started_again(sandbox, terminal):
    # Given a terminal whose shell exits with 3
    sandbox_id, _item = sandbox
    link = terminal()
    link.send_input(b"exit 3\n")
    _seen, events = link_output_until(link, lambda seen: False)
    # When it is attached to again
    again = backend_named("local").terminal_attach(sandbox_id, terminal_id="t1", secret=SECRET, since=0)
    _replayed, again_events = link_output_until(again, lambda seen: False)
    # Then both say it exited with 3, and the second replays and exits: no new shell answers
    assert events[-1] == Exited(3)
    assert again_events[-1] == Exited(3)
    assert any(isinstance(event, Live) for event in again_events)


def test_attaching_to_a_terminal_the_sandbox_does_not_keep_is_refused(sandbox):
    # Given alice's open sandbox, with no terminal "nope"
    sandbox_id, _item = sandbox
    # When someone attaches to it / Then they are told there is no such terminal
    link = backend_named("local").terminal_attach(sandbox_id, terminal_id="nope", secret=SECRET)
    with pytest.raises(TerminalGone):
        list(link.events(timeout=ANSWER_WAIT_SECONDS))


@pytest.mark.parametrize(
    ("rows", "cols"), [(0, 80), (24, 0), (10**6, 80), (24, 10**6)], ids=["no rows", "no columns", "rows", "columns"]
)
def test_a_terminal_size_out_of_bounds_is_refused_before_the_sandbox_is_asked(sandbox, rows, cols):
    # Given alice's open sandbox
    sandbox_id, _item = sandbox
    # When a terminal of an impossible size is asked for / Then it is refused
    with pytest.raises(TerminalRefused):
        backend_named("local").terminal_start(sandbox_id, terminal_id="odd", secret=SECRET, rows=rows, cols=cols)


def test_closing_a_terminal_ends_its_shell_and_its_keeper(sandbox, terminal):
    # Given a terminal running a long command
    sandbox_id, _item = sandbox
    link = terminal()
    link.send_input(b"sleep 500\n")
    link_output_until(link, _said("sleep 500"))
    # When it is closed
    link.close_terminal()
    list(link.events(timeout=ANSWER_WAIT_SECONDS))
    # Then nothing answers for it any more, and no sleep is left in the sandbox
    with pytest.raises(TerminalGone):
        list(backend_named("local").terminal_attach(sandbox_id, terminal_id="t1", secret=SECRET).events(timeout=5))
    left = backend_named("local").exec(sandbox_id, command="pgrep -c -x sleep || true", timeout=10)
    assert left.stdout.strip() == "0"


def test_closing_the_sandbox_ends_its_terminals(alice_api, sandbox, terminal):
    # Given a terminal in alice's sandbox
    sandbox_id, item = sandbox
    link = terminal()
    link.send_input(b"echo rea''dy\n")
    link_output_until(link, _said("ready\r\n"))
    # When she closes the sandbox
    assert alice_api.delete(f"/a/notebook/items/{item.pk}/sandbox").status_code in (200, 204)
    # Then the terminal's connection ends, and the sandbox keeps no terminals any more
    list(link.events(timeout=ANSWER_WAIT_SECONDS))
    assert sandbox_id not in backend_named("local").sandboxes()


def test_a_sandbox_opened_before_terminals_is_told_to_reopen(sandbox):
    # Given alice's sandbox as one opened before its agent kept terminals (protocol 2) records itself
    sandbox_id, _item = sandbox
    backend = backend_named("local")
    state = backend.state(sandbox_id)
    state["init"]["agent"] = 2
    (backend.home(sandbox_id) / "state.json").write_text(json.dumps(state))
    # When a terminal is asked of it / Then it is refused with what to do
    with pytest.raises(SandboxUnavailable, match="close it"):
        backend.terminal_start(sandbox_id, terminal_id="t1", secret=SECRET, rows=24, cols=80)


def test_code_in_the_sandbox_that_holds_the_keepers_socket_silent_does_not_hold_the_terminal(sandbox, terminal):
    # Given a terminal, and code in the sandbox connected to its keeper's socket, saying nothing
    sandbox_id, _item = sandbox
    link = terminal()
    link.send_input(b"echo rea''dy\n")
    link_output_until(link, _said("ready\r\n"))
    link.detach()
    squat = (
        "python3 -c \"import socket, time; s = socket.socket(socket.AF_UNIX); s.connect('\\0ws-term-t1'); "
        "print('in', flush=True); time.sleep(8)\" &\nsleep 0.5"
    )
    assert "in" in backend_named("local").exec(sandbox_id, command=squat, timeout=20).stdout
    # When the server attaches to the terminal
    again = backend_named("local").terminal_attach(sandbox_id, terminal_id="t1", secret=SECRET, since=0)
    replayed, events = link_output_until(again, _said("ready\r\n"))
    # Then it is served, its output replayed
    assert isinstance(events[0], Replaying)
    assert b"ready\r\n" in replayed


def test_code_in_the_sandbox_that_keeps_connecting_silently_does_not_slow_the_terminal(sandbox, terminal):
    # Given a terminal, attached, and code in the sandbox that opens a silent connection to its
    # keeper every 50 ms for twenty seconds (each one would have held the keeper a second)
    sandbox_id, _item = sandbox
    link = terminal()
    link_output_until(link, _said("$ "))
    flood = (
        'python3 -c "import socket, time\n'
        "held = []\n"
        "for _ in range(400):\n"
        "    s = socket.socket(socket.AF_UNIX); s.connect('\\0ws-term-t1'); held.append(s); time.sleep(0.05)\n"
        "\" >/dev/null 2>&1 &\nsleep 1; echo flo''oding"
    )
    assert "flooding" in backend_named("local").exec(sandbox_id, command=flood, timeout=20).stdout
    # When a command is typed on the terminal meanwhile
    link.send_input(b"echo stil''l-here\n")
    seen, _events = link_output_until(link, _said("still-here\r\n"))
    # Then it answers while the flood goes on (as many connections made by then would have held
    # the keeper that many seconds)
    assert b"still-here\r\n" in seen
    flooding = "pgrep -f 'ws-term-t[1]' >/dev/null && echo still-flo''oding"
    assert "still-flooding" in backend_named("local").exec(sandbox_id, command=flooding, timeout=20).stdout


def test_a_second_attach_takes_the_terminal_over_and_the_first_is_told(sandbox, terminal):
    # Given a terminal, attached
    sandbox_id, _item = sandbox
    first = terminal()
    link_output_until(first, bool)
    # When another connection attaches to it
    second = backend_named("local").terminal_attach(sandbox_id, terminal_id="t1", secret=SECRET, since=0)
    _replayed, second_events = link_output_until(second, lambda seen: False, until=Live)
    # Then the first is told it was taken over (its connection then ends), and the second is live
    assert TakenOver() in list(first.events(timeout=ANSWER_WAIT_SECONDS))
    assert any(isinstance(event, Live) for event in second_events)


def test_an_attach_made_before_the_one_attached_never_takes_the_terminal_over(sandbox, terminal):
    # Given a terminal, attached by the page a reload opened (its attach made just now)
    sandbox_id, _item = sandbox
    link_output_until(terminal(), bool)
    backend = backend_named("local")
    now = time.monotonic_ns() // 1000
    reloaded = backend.terminal_attach(sandbox_id, terminal_id="t1", secret=SECRET, generation=now)
    link_output_until(reloaded, lambda seen: False, until=Live)

    # When the old page's attach, made a second before it, reaches the keeper only now (a loaded machine)
    late = backend.terminal_attach(sandbox_id, terminal_id="t1", secret=SECRET, generation=now - 1_000_000)

    # Then the late one is refused, and the reloaded page keeps the terminal: its input is answered
    assert [event for event in late.events(timeout=ANSWER_WAIT_SECONDS) if not isinstance(event, Output)] == []
    reloaded.send_input(b"echo st''ill here\n")
    output, events = link_output_until(reloaded, _said("still here\r\n"))
    assert b"still here\r\n" in output
    assert TakenOver() not in events


def test_a_terminal_nobody_attached_to_for_its_idle_limit_closes_itself_and_its_shell(sandbox, terminal):
    # Given a terminal with an idle limit of one second, running a long command, that nobody attaches to
    sandbox_id, _item = sandbox
    link = terminal(idle_seconds=1)
    link.send_input(b"sleep 600\n")
    link_output_until(link, _said("sleep 600"))
    backend = backend_named("local")

    def sleeping() -> bool:
        return backend.exec(sandbox_id, command="pgrep -c -x sleep || true", timeout=10).stdout.strip() == "1"

    wait_for(sleeping, seconds=20)
    link.detach()

    def sleep_gone() -> bool:
        # Asked from inside the sandbox: attaching to the terminal would make it not idle.
        return backend.exec(sandbox_id, command="pgrep -c -x sleep || true", timeout=10).stdout.strip() == "0"

    def terminal_gone() -> bool:
        try:
            list(backend.terminal_attach(sandbox_id, terminal_id="t1", secret=SECRET).events(timeout=1))
        except TerminalGone:
            return True
        return False  # its keeper was still hanging up

    # When its limit passes / Then its command is gone, and then the terminal
    wait_for(sleep_gone, seconds=20)
    assert wait_for(terminal_gone, seconds=10)


def _from_inside(sandbox_id: str, script: str) -> str:
    """Runs a Python `script` in the sandbox in the background, as its code would; says when it started."""
    command = f"python3 -c {shlex.quote(script)} >/dev/null 2>&1 &\nsleep 0.5; echo started"
    return backend_named("local").exec(sandbox_id, command=command, timeout=20).stdout


def test_code_in_the_sandbox_that_sends_one_byte_and_holds_does_not_hold_the_terminal(sandbox, terminal):
    # Given a terminal, and code in the sandbox connected to its keeper that sent one byte and holds
    sandbox_id, _item = sandbox
    link = terminal()
    link.send_input(b"echo rea''dy\n")
    link_output_until(link, _said("ready\r\n"))
    link.detach()
    squat = (
        "import socket, time; s = socket.socket(socket.AF_UNIX); s.connect('\\0ws-term-t1'); "
        "s.send(b'S'); time.sleep(30)"
    )
    assert "started" in _from_inside(sandbox_id, squat)
    # When the server attaches
    again = backend_named("local").terminal_attach(sandbox_id, terminal_id="t1", secret=SECRET, since=0)
    replayed, events = link_output_until(again, _said("ready\r\n"))
    # Then it is served
    assert isinstance(events[0], Replaying)
    assert b"ready\r\n" in replayed


def test_code_in_the_sandbox_without_the_secret_is_not_served_the_terminal(sandbox, terminal):
    # Given alice's terminal that printed a secret of hers, detached
    sandbox_id, item = sandbox
    link = terminal()
    link.send_input(b"export TOKEN=s3cr''3t; echo $TOKEN\n")
    link_output_until(link, _said("s3cr3t\r\n"))
    link.detach()
    # When code in the sandbox (another person's exec in the same item) attaches with a wrong secret
    thief = (
        "import socket, struct; s = socket.socket(socket.AF_UNIX); s.connect('\\0ws-term-t1'); "
        "d = b'0 ' + b'x' * 32; s.send(b'S' + struct.pack('>I', len(d)) + d); s.settimeout(3); got = b''\n"
        "try:\n    got = s.recv(65536)\nexcept OSError:\n    pass\n"
        "open('/workspace/stolen', 'wb').write(got)"
    )
    assert "started" in _from_inside(sandbox_id, thief)
    stolen = workspace_dir(item.pk) / "stolen"
    wait_for(stolen.exists, seconds=10)
    # Then it is let go with nothing, and the terminal is still its owner's
    assert stolen.read_bytes() == b""
    again = backend_named("local").terminal_attach(sandbox_id, terminal_id="t1", secret=SECRET, since=0)
    replayed, _events = link_output_until(again, _said("s3cr3t\r\n"))
    assert b"s3cr3t\r\n" in replayed


def test_a_terminal_is_there_to_attach_to_the_moment_its_start_returns(sandbox, terminal):
    # Given terminals started one after another, each let go at once
    sandbox_id, _item = sandbox
    started = [f"now{number}" for number in range(8)]
    for terminal_id in started:
        terminal(terminal_id).detach()
    # When each is attached to right away / Then each replays from its start, none is missing
    for terminal_id in started:
        link = backend_named("local").terminal_attach(sandbox_id, terminal_id=terminal_id, secret=SECRET)
        first = next(link.events(timeout=ANSWER_WAIT_SECONDS))
        link.detach()
        assert isinstance(first, Replaying)


def test_an_attached_viewer_slows_the_command_to_its_pace_and_misses_nothing(terminal):
    # Given a terminal, attached
    link = terminal()
    # When its command writes four megabytes, read as they come
    link.send_input(b"head -c 4000000 /dev/zero | tr '\\0' '\\101'; echo; echo do''ne\n")
    seen, events = link_output_until(link, _said("done\r\n"))
    # Then every byte came ("A", as tr was told in octal), and the replay at the start was the only
    # one (nothing was dropped)
    assert seen.count(b"A") == 4000000
    assert [event for event in events if isinstance(event, Replaying)] == [events[0]]


def test_a_viewer_that_reads_nothing_is_let_go_and_the_terminal_goes_on(sandbox, terminal):
    # Given a terminal whose viewer reads nothing while its command writes megabytes
    sandbox_id, item = sandbox
    stalled = terminal()
    stalled.connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.send_input(b"head -c 4000000 /dev/zero | tr '\\0' x; echo; echo do''ne; touch /workspace/finished\n")
    # When the command is done and another connection attaches
    # Then the keeper went on reading (the command finished) and serves the new connection
    assert wait_for((workspace_dir(item.pk) / "finished").exists, seconds=90)
    again = backend_named("local").terminal_attach(sandbox_id, terminal_id="t1", secret=SECRET, since=0)
    replayed, events = link_output_until(again, _said("done\r\n"))
    assert b"done\r\n" in replayed
    assert events[0].start > 0  # what the ring no longer holds was dropped, and the replay says so


def test_a_frame_longer_than_the_server_sends_lets_the_viewer_go(sandbox, terminal):
    # Given a terminal, attached
    link = terminal()
    link_output_until(link, bool)
    # When its connection says a frame of 100 MB is coming
    link.connection.sendall(b"I" + struct.pack(">I", 100 * 1024 * 1024) + b"x" * 65536)
    # Then the keeper lets that connection go rather than gather it (what it had sent before aside)
    link.connection.settimeout(ANSWER_WAIT_SECONDS)
    with contextlib.suppress(ConnectionResetError):  # let go with what it had not read: a reset
        while link.connection.recv(65536):
            pass
    # (a keeper that gathered it would still hold the connection: recv would time out, and fail this test)
    assert link.connection.recv(1) == b""
