"""`make serve` under the attacks that starved its threads (issue 41), against real server processes:
trickled headers, stalled bodies, several people's long commands and a hostile model server leave
everyone's short requests answered; long work past what a process takes is refused at once; a client
that leaves, and a server that stops, end what they held with nothing left behind."""

from __future__ import annotations

import json
import signal
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.live import Client, Server, children_of, close_sandboxes, gunicorn, query, run_django, wait_for
from tests.fixtures.agent import model_descriptors
from tests.fixtures.llm import Endless, Hang, LlmServer
from tests.production.conftest import USER, USER_PASSWORD

pytestmark = pytest.mark.postgres

# Long enough for every wait below on a loaded machine; a give-up bound, never a speed the test asserts.
GIVE_UP_SECONDS = 30
PEOPLE = ("alice", "carol", "dave", USER)
PASSWORD = "people-secret-1"
COMMANDS_PER_PROCESS = 12
TCP_ESTABLISHED = 1  # the kernel's tcp_states.h, the first byte of TCP_INFO

PEOPLE_ACCOUNTS = f"""
from django.contrib.auth.models import User
for name in {list(PEOPLE[:-1])!r}:
    user, _ = User.objects.get_or_create(username=name)
    user.set_password({PASSWORD!r})
    user.save()
"""

# What a test waits for, read straight from the database (a Django process per look costs a second
# of CPU, and these are polled).
COUNTS = """
SELECT
  (SELECT count(*) FROM items_execslot),
  (SELECT count(*) FROM items_runningexec),
  (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction')
"""

RELEASE = """
from workspace.items import services
from workspace.items.models import Item
for item in Item.objects.all():
    services.file_write(item=item, path="release", chunks=[b""])
"""

FORGET_RELEASE = """
from workspace.items import services
from workspace.items.models import Item
for item in Item.objects.all():
    try:
        services.file_delete(item=item, path="release")
    except Exception:
        pass
"""


def _hold(tag: str) -> str:
    """A command that runs until the test writes `release` into its workspace; `tag` finds its processes."""
    return f"until [ -e release ]; do sleep 0.1; done # {tag}"


def _processes_running(tag: str) -> int:
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if f"# {tag}".encode() in (entry / "cmdline").read_bytes():
                    count += 1
            except OSError:
                continue
    return count


def _counts(env: dict[str, str]) -> dict[str, int]:
    ((slots, running, idle_in_transaction),) = query(env, COUNTS)
    return {"slots": slots, "running": running, "idle_in_transaction": idle_in_transaction}


def _app_process(server: Server) -> int:
    (worker,) = children_of(server.process.pid)
    return worker


def _threads(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Threads:")))


def _environment(deployment: dict[str, str], folder: Path, llm: LlmServer, **settings: str) -> dict[str, str]:
    """The deployment with a 2 s client timeout, two request threads, one long-work thread, commands
    that may run two minutes, and every app's agent the model on the test model server."""
    config = folder / "patient.toml"
    config.write_text('[sandbox]\nexec_timeout = "120s"\n')
    apps = folder / "apps"
    apps.mkdir(exist_ok=True)
    for name, text in model_descriptors().items():
        (apps / name).write_text(text)
    return {
        **deployment,
        "WORKSPACE_CLIENT_TIMEOUT_SECONDS": "2",
        "WORKSPACE_REQUEST_THREADS": "2",
        "WORKSPACE_LONG_WORK_THREADS": "1",
        "WORKSPACE_RUNNING_COMMANDS_PER_PROCESS": str(COMMANDS_PER_PROCESS),
        "WORKSPACE_CONFIG": str(config),
        "WORKSPACE_APPS_DIR": str(apps),
        "WORKSPACE_LLM_BASE_URL": llm.base_url,
        "WORKSPACE_LLM_MODEL": "test-model",
        "WORKSPACE_LLM_TIMEOUT": "5",
        **settings,
    }


@pytest.fixture(scope="module")
def served(deployment, traversable_tmp: Path, llm_server_session: LlmServer) -> Iterator[tuple[Server, dict[str, str]]]:
    """One app process (one uvicorn worker) as `_environment` sets it up, with four people's accounts."""
    run_django(PEOPLE_ACCOUNTS, deployment)
    folder = Path(tempfile.mkdtemp(prefix="served", dir=traversable_tmp))
    env = _environment(deployment, folder, llm_server_session)
    try:
        with gunicorn(env, folder / "gunicorn.log", workers=1) as server:
            yield server, env
    finally:
        close_sandboxes(env)


@pytest.fixture
def released(served) -> Iterator[None]:
    """Whatever a test left running is released after it, and the release mark removed."""
    yield
    _server, env = served
    run_django(RELEASE, env)
    wait_for(lambda: _counts(env)["running"] == 0, "the commands left to end", seconds=GIVE_UP_SECONDS)
    run_django(FORGET_RELEASE, env)


def _signed_in(server: Server, name: str) -> Client:
    client = Client(server.port, timeout=GIVE_UP_SECONDS)
    client.login(name, USER_PASSWORD if name == USER else PASSWORD)
    return client


def _token(server: Server, name: str) -> str:
    client = _signed_in(server, name)
    made = client.request("POST", "/me/tokens", {"name": "issue 41"})
    client.close()
    assert made.status == 201, made.body
    return made.json()["token"]


def _me(port: int, token: str) -> int:
    client = Client(port, timeout=GIVE_UP_SECONDS)
    client.default_headers["Authorization"] = f"Token {token}"
    try:
        return client.get("/me").status
    finally:
        client.close()


def _item(client: Client) -> int:
    created = client.request("POST", "/a/notebook/items", {"title": "busy"})
    assert created.status == 201, created.body
    return created.json()["id"]


def _everything_sent(sock: socket.socket) -> bytes:
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    sock.close()
    return received


def test_trickled_headers_hold_no_thread_while_tokens_are_answered_and_are_closed_at_their_deadline(served):
    server, _env = served
    token = _token(server, USER)
    threads_before = _threads(_app_process(server))
    # Given 100 connections that each send a request line and then one header line every half second
    tricklers = []
    for _ in range(100):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=GIVE_UP_SECONDS)
        sock.sendall(b"GET /me HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        tricklers.append(sock)
    stop = threading.Event()

    def trickle() -> None:
        while not stop.wait(0.5):
            for sock in tricklers:
                try:
                    sock.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    continue

    trickling = threading.Thread(target=trickle)
    trickling.start()
    try:
        # When bob asks who he is twenty times meanwhile, each on a connection of its own
        answers = [_me(server.port, token) for _ in range(20)]
        # Then each was answered, and the process holds no more threads than before
        assert answers == [200] * 20
        assert _threads(_app_process(server)) <= threads_before + 1
        # And each trickling connection is answered 408 and closed once its headers are 2 s late
        for sock in tricklers:
            assert _everything_sent(sock).startswith(b"HTTP/1.1 408")
    finally:
        stop.set()
        trickling.join()


def test_a_body_that_stops_arriving_is_408_and_stores_nothing_while_health_answers(served):
    server, _env = served
    bob = _signed_in(server, USER)
    files = f"/a/notebook/items/{_item(bob)}/files"
    # Given four uploads that each announce 100000 bytes, send ten and stop
    stalled = []
    for number in range(4):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=GIVE_UP_SECONDS)
        cookies = "; ".join(f"{k}={v}" for k, v in bob.cookies.items())
        sock.sendall(
            f"PUT {files}/stalled-{number}.bin HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookies}\r\n"
            f"X-CSRFToken: {bob.cookies['csrftoken']}\r\nAccept: application/json\r\n"
            "Content-Type: application/octet-stream\r\nContent-Length: 100000\r\n\r\n".encode()
            + b"x" * 10
        )
        stalled.append(sock)
    # Then /healthz answers meanwhile, each upload is answered 408 saying why, and nothing was stored
    health = Client(server.port, timeout=GIVE_UP_SECONDS)
    assert health.get("/healthz").status in (200, 503)
    for sock in stalled:
        answer = _everything_sent(sock)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert b"request_body_timeout" in answer
    assert bob.get(f"{files}/stalled-0.bin").status == 404
    # And a whole upload goes through, its headers and its first megabyte sent in one write
    assert bob.request("PUT", f"{files}/whole.bin", b"y" * (1024 * 1024), raw=True).status == 200


def test_headers_past_64_kib_are_refused_431_and_the_connection_closed(served):
    server, _env = served
    # Given a request whose headers go on past 64 KiB
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=GIVE_UP_SECONDS)
    sock.sendall(b"GET /me HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Padding: " + b"a" * 70_000 + b"\r\n")
    # When the server reads them / Then it answers 431 and closes the connection
    assert _everything_sent(sock).startswith(b"HTTP/1.1 431")


def test_four_people_with_three_long_commands_each_leave_everyones_short_requests_answered(served, released):
    server, env = served
    clients = {name: _signed_in(server, name) for name in PEOPLE}
    tokens = {name: _token(server, name) for name in PEOPLE}
    items = {name: _item(client) for name, client in clients.items()}
    threads_before = _threads(_app_process(server))
    # Given each of four people running three long commands at once (twelve, with two request threads)
    answers: list[int] = []

    def run(name: str) -> None:
        client = Client(server.port, timeout=120)
        client.cookies = dict(clients[name].cookies)
        command = {"command": _hold("four-people")}
        answers.append(client.request("POST", f"/a/notebook/items/{items[name]}/exec", command).status)
        client.close()

    runners = [threading.Thread(target=run, args=(name,)) for name in PEOPLE for _ in range(3)]
    for runner in runners:
        runner.start()
    wait_for(lambda: _counts(env)["running"] == 12, "twelve commands running", seconds=GIVE_UP_SECONDS)
    # When each of them asks who they are / Then each is answered, while the twelve run on
    assert [_me(server.port, tokens[name]) for name in PEOPLE] == [200] * 4
    assert answers == []
    # And the process holds the twelve without a thread each
    assert _threads(_app_process(server)) <= threads_before + 2
    # And a thirteenth command, past what the process runs at once, is refused at once, saying when
    # to come back, with nothing taken
    refused = clients["alice"].request("POST", f"/a/notebook/items/{items['alice']}/exec", {"command": "true"})
    assert (refused.status, refused.json()["error"], refused.headers.get("retry-after")) == (503, "server_busy", "5")
    assert _counts(env)["slots"] == 12
    # And once released, all twelve finish
    run_django(RELEASE, env)
    for runner in runners:
        runner.join(GIVE_UP_SECONDS)
    assert answers == [200] * 12


def _streamed_exec(server: Server, client: Client, item_id: int, command: str) -> socket.socket:
    """An exec asked for as server-sent events, on a socket of its own, read up to its `started` event."""
    body = json.dumps({"command": command}).encode()
    cookies = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=GIVE_UP_SECONDS)
    sock.sendall(
        f"POST /a/notebook/items/{item_id}/exec HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookies}\r\n"
        f"X-CSRFToken: {client.cookies['csrftoken']}\r\nAccept: text/event-stream\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    received = b""
    while b"event: started" not in received:
        chunk = sock.recv(65536)
        assert chunk, received
        received += chunk
    return sock


def test_a_client_that_leaves_mid_stream_frees_its_slot_its_process_and_its_connection(served, released):
    server, env = served
    bob = _signed_in(server, USER)
    item_id = _item(bob)
    # Given bob's command streaming, running until released
    sock = _streamed_exec(server, bob, item_id, _hold("left"))
    wait_for(lambda: _processes_running("left") > 0, "the command running", seconds=GIVE_UP_SECONDS)
    # When his client goes away
    sock.close()
    # Then his slot, the command's record and its processes are gone, and no connection is left in a transaction
    wait_for(lambda: _counts(env)["slots"] == 0, "the slot given back", seconds=GIVE_UP_SECONDS)
    wait_for(lambda: _processes_running("left") == 0, "the command's processes gone", seconds=GIVE_UP_SECONDS)
    assert _counts(env) == {"slots": 0, "running": 0, "idle_in_transaction": 0}


def test_a_hostile_model_server_ends_the_turn_in_one_sentence_while_others_are_answered(served, llm_server):
    server, _env = served
    bob = _signed_in(server, USER)
    token = _token(server, USER)
    item_id = _item(bob)
    # Given a model server that answers with `data: ` and an endless line
    llm_server.push(Endless("line"))
    # When bob sends a chat message
    sent = bob.request("POST", f"/a/notebook/items/{item_id}/messages", {"content": "hello"})
    # Then the turn ended, its reply one sentence saying what happened, and he is answered meanwhile
    assert sent.status == 201, sent.body
    assert [reply["content"] for reply in sent.json()["replies"]] == [
        "The model server sent a line of more than 1,048,576 bytes, so this turn ended."
    ]
    assert _me(server.port, token) == 200


def test_a_model_turn_past_the_long_work_threads_is_refused_503_while_the_first_runs(served, llm_server):
    server, _env = served
    alice, bob = _signed_in(server, "alice"), _signed_in(server, USER)
    first_item, second_item = _item(alice), _item(bob)
    # Given alice's turn waiting on a model server that never answers (its one long-work thread taken)
    llm_server.push(Hang())
    answered: list[int] = []
    first = threading.Thread(
        target=lambda: answered.append(
            alice.request("POST", f"/a/notebook/items/{first_item}/messages", {"content": "hi"}).status
        )
    )
    first.start()
    wait_for(lambda: len(llm_server.chat_requests) == 1, "alice's turn asking the model", seconds=GIVE_UP_SECONDS)
    # When bob sends a message meanwhile
    refused = bob.request("POST", f"/a/notebook/items/{second_item}/messages", {"content": "hi"})
    # Then he is refused at once, saying when to come back, and his message was not stored
    assert (refused.status, refused.json()["error"], refused.headers.get("retry-after")) == (503, "server_busy", "5")
    assert bob.get(f"/a/notebook/items/{second_item}/messages").json() == []
    # And alice's turn ends (at the model server's timeout) with its reply
    first.join(GIVE_UP_SECONDS)
    assert answered == [201]


def test_a_server_stopped_with_open_streams_ends_them_with_a_result_that_says_why(
    deployment, traversable_tmp, llm_server_session
):
    run_django(PEOPLE_ACCOUNTS, deployment)
    folder = Path(tempfile.mkdtemp(prefix="stopped", dir=traversable_tmp))
    env = _environment(deployment, folder, llm_server_session)
    try:
        with gunicorn(env, folder / "gunicorn.log", workers=1) as server:
            bob = _signed_in(server, USER)
            # Given bob's command streaming, running until released
            sock = _streamed_exec(server, bob, _item(bob), _hold("stopped"))
            # When the server is told to stop
            server.process.send_signal(signal.SIGTERM)
            rest = _everything_sent(sock).decode()
            # Then his stream ended with the command's result, which says the server stopped it
            result = json.loads(rest.split("event: result\ndata: ", 1)[1].split("\n", 1)[0])
            assert result["reason"] == "stopped"
            assert "server it ran on was shutting down" in result["reason_detail"]
            # And the server stopped, leaving no slot, record or process of the command behind
            assert server.process.wait(GIVE_UP_SECONDS) == 0
            assert _processes_running("stopped") == 0
            assert _counts(env)["slots"] == 0
            assert _counts(env)["running"] == 0
    finally:
        close_sandboxes(env)


def test_a_download_nobody_reads_ends_its_connection_at_the_send_deadline(served):
    server, _env = served
    bob = _signed_in(server, USER)
    files = f"/a/notebook/items/{_item(bob)}/files"
    assert bob.request("PUT", f"{files}/big.bin", b"z" * (8 * 1024 * 1024), raw=True).status == 200
    # Given bob's client asking for the 8 MiB file with a tiny receive buffer, and reading nothing
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(GIVE_UP_SECONDS)
    sock.connect(("127.0.0.1", server.port))
    cookies = "; ".join(f"{k}={v}" for k, v in bob.cookies.items())
    sock.sendall(f"GET {files}/big.bin HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookies}\r\n\r\n".encode())
    # When it waits past the 2 s send deadline
    threading.Event().wait(5)
    # Then the server has ended the connection (reset it, what it had not sent dropped), though
    # the client never read: the socket is no longer established
    tcp_state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]
    assert tcp_state != TCP_ESTABLISHED
    received = 0
    try:
        while chunk := sock.recv(65536):
            received += len(chunk)
    except ConnectionResetError:
        pass
    sock.close()
    # And the file was not sent whole
    assert received < 8 * 1024 * 1024
