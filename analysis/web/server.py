"""Serving the web explorer: a listening socket of our own, then uvicorn on it, guarded.

Binding the socket before uvicorn starts lets ``dobutsu-tb serve`` report a port in use as one
``error:`` line, take ``--port 0`` (any free port) and print the real address, and accept
connections from the moment it prints it.

What uvicorn alone does not do, and :func:`serve` adds:

- **Slow clients time out.** A connection must deliver each request, headers and body, within
  ``client_timeout`` seconds of its first byte (and its first request within that time of
  connecting), or it is closed; an idle keep-alive connection is closed after
  :data:`KEEP_ALIVE_SECONDS`. Connections still sending their request do not count against the
  requests waiting for the tablebase, so clients that trickle a header line or a body's bytes
  every few seconds cannot lock others out (uvicorn's ``limit_concurrency`` counts every open
  connection).
- **Bounded load.** At most :data:`~dobutsu_tb.analysis.web.app.MAX_QUEUED` requests wait for
  the tablebase at once and :data:`~dobutsu_tb.analysis.web.app.MAX_REQUESTS` are in the
  application (more get a 503 at once), and :data:`MAX_CONNECTIONS` connections are open (more
  are closed at once). A client sending its request, headers or body, holds no place in the
  tablebase's queue.
- **One log line at most per failure.** A client that disconnects is not logged at all, a
  malformed request is uvicorn's one warning line, an unexpected error one line (no traceback).
- **Stopping.** SIGINT or SIGTERM (flags of :func:`~dobutsu_tb.encoding.interrupt.stop_on_signals`,
  polled every 0.1 s) closes the listening socket, gives the requests in flight
  :data:`GRACE_SECONDS` to finish (those still running then are answered 503), stops the
  statistics' child process and returns; the command then exits with its one ``error:`` line
  within a second.
"""

from __future__ import annotations

import contextlib
import logging
import socket

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from dobutsu_tb.encoding import interrupt

#: Open connections at once; more are closed as they come.
MAX_CONNECTIONS = 512
#: Seconds a client gets to send a request (headers and body), by default.
CLIENT_TIMEOUT = 10.0
#: Seconds an idle keep-alive connection is kept.
KEEP_ALIVE_SECONDS = 5
#: Seconds the requests in flight get to finish when the server is stopped.
GRACE_SECONDS = 0.2

log = logging.getLogger("dobutsu_tb.web")


def listen(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host`` and ``port``.

    Parameters
    ----------
    host : str
        An address or name: ``127.0.0.1`` (loopback only), ``::1``, ``0.0.0.0`` (every interface).
    port : int
        0 for any free port.

    Returns
    -------
    socket.socket

    Raises
    ------
    OSError
        If the name does not resolve or the address cannot be bound (in use, not ours); the
        message is one line.
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise OSError(f"cannot listen on {host!r}: {getattr(exc, 'strerror', None) or exc}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {host} port {port}: {exc.strerror or exc}") from None
    return sock


def url_of(sock: socket.socket) -> str:
    """The page's address on a listening socket (a wildcard address is shown as loopback)."""
    host, port = sock.getsockname()[:2]
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


class _GuardedProtocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline on each request and a cap on connections."""

    client_timeout = CLIENT_TIMEOUT

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._deadline = None
        if len(self.connections) > MAX_CONNECTIONS:
            transport.abort()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state in (h11.IDLE, h11.SEND_BODY):
            if self._deadline is None:  # the first bytes of a new request: its time starts
                self._arm()
        else:  # the whole request is in (or the connection is done)
            self._disarm()

    def on_response_complete(self) -> None:
        self._disarm()  # the keep-alive timeout takes over until the next request's first byte
        super().on_response_complete()

    def connection_lost(self, exc) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.client_timeout, self._too_slow)

    def _disarm(self) -> None:
        if getattr(self, "_deadline", None) is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
            self.transport.close()  # a request not sent in time (a request under way sees a disconnect)


class _CancelNotice(logging.Filter):
    """Drops uvicorn's line about cancelling the requests still running at the end of the grace
    period: they are answered 503 (:class:`~dobutsu_tb.analysis.web.app.Guard`) and the command
    says why it stops."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Cancel ")


def serve(app, sock: socket.socket, access_log: bool = False, client_timeout: float = CLIENT_TIMEOUT) -> None:
    """Serve ``app`` on ``sock`` with uvicorn until SIGINT or SIGTERM (module docstring).

    Parameters
    ----------
    app : ASGI application
        :func:`~dobutsu_tb.analysis.web.app.create_app`'s.
    sock : socket.socket
        From :func:`listen`.
    access_log : bool, optional
        Log every request on stderr.
    client_timeout : float, optional
        Seconds a client gets to send each request, headers and body.

    Raises
    ------
    dobutsu_tb.encoding.interrupt.Interrupted
        After the server stopped on SIGINT or SIGTERM.
    """
    protocol = type("GuardedProtocol", (_GuardedProtocol,), {"client_timeout": float(client_timeout)})
    config = uvicorn.Config(app, log_level="warning", access_log=access_log, lifespan="on", loop="asyncio",
                            http=protocol, timeout_keep_alive=KEEP_ALIVE_SECONDS,
                            timeout_graceful_shutdown=GRACE_SECONDS, server_header=False)
    if access_log:
        logging.getLogger("uvicorn.access").setLevel(logging.INFO)
    logging.getLogger("uvicorn.error").addFilter(_CancelNotice())
    with interrupt.stop_on_signals():
        _Server(config).run(sockets=[sock])


class _Server(uvicorn.Server):
    """uvicorn's server, stopping when :func:`~dobutsu_tb.encoding.interrupt.requested` says so;
    its own signal handlers are not installed (ours stay, in :func:`serve`'s block)."""

    def capture_signals(self):
        return contextlib.nullcontext()

    async def on_tick(self, counter: int) -> bool:
        if interrupt.requested():
            return True
        return await super().on_tick(counter)
