"""The development servers (`runserver` of `make run`, and the live server of the browser tests)
with TCP_NODELAY on every connection they accept.

Django's development server writes a response's headers and its body in separate sends. On a
kept-alive connection (a browser's, any HTTP client's session) the body then waits for the
client's delayed ACK of the headers (Nagle's algorithm): about 40 ms on every request but a
connection's first, measured here on every page, stylesheet and poll (cpython#108736). gunicorn
(`make serve`) sets TCP_NODELAY itself.
"""

from __future__ import annotations

import socket
from typing import Any

from django.core.servers.basehttp import ThreadedWSGIServer, WSGIServer


class _NoDelay:
    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = super().get_request()  # type: ignore[misc]
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection, address


class NoDelayWSGIServer(_NoDelay, WSGIServer):
    """`runserver`'s server (threaded, as Django's own)."""


class NoDelayThreadedWSGIServer(_NoDelay, ThreadedWSGIServer):
    """The live server's (`LiveServerThread.server_class`)."""
