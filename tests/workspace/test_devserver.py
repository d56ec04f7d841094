"""The development servers (`make run`'s runserver, the browser tests' live server) send each reply
at once on a kept-alive connection: TCP_NODELAY on every connection they accept
(workspace/devserver.py). Without it every request but a connection's first waited some 40 ms for
the client's delayed ACK; bench/REPORT.md has the figures, no test here times anything."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from django.contrib.staticfiles.management.commands.runserver import Command as StaticFilesRunserver
from django.core.management import get_commands, load_command_class
from django.core.servers.basehttp import WSGIRequestHandler

from workspace.devserver import NoDelayThreadedWSGIServer, NoDelayWSGIServer


@pytest.fixture(params=[NoDelayWSGIServer, NoDelayThreadedWSGIServer], ids=["runserver", "live server"])
def accepted(request: pytest.FixtureRequest) -> Iterator[socket.socket]:
    """The server's end of a connection a client just opened to one of the two servers."""
    server = request.param(("127.0.0.1", 0), WSGIRequestHandler)
    client = socket.create_connection(server.server_address[:2])
    connection, _ = server.get_request()
    yield connection
    for open_socket in (connection, client):
        open_socket.close()
    server.server_close()


def test_a_development_server_sends_replies_without_waiting_for_the_clients_ack(accepted) -> None:
    # Given a client connected to the server / Then Nagle's algorithm is off on the server's end
    assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_manage_py_runserver_is_the_one_that_sends_at_once_and_still_serves_static_files() -> None:
    # Given the installed apps / When manage.py looks up runserver
    command = load_command_class(get_commands()["runserver"], "runserver")
    # Then it is the workspace's: static files served as Django's, on the no-delay server
    assert isinstance(command, StaticFilesRunserver)
    assert command.server_cls is NoDelayWSGIServer


def test_the_browser_tests_live_server_sends_at_once(live_server) -> None:
    # Given the live server the browser tests drive / Then it is the no-delay server
    assert isinstance(live_server.thread.httpd, NoDelayThreadedWSGIServer)
