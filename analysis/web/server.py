"""Serving the web explorer: a listening socket of our own, then uvicorn on it.

Binding the socket before uvicorn starts lets ``dobutsu-tb serve`` report a port in use as one
``error:`` line, take ``--port 0`` (any free port) and print the real address, and accept
connections from the moment it prints it.
"""

from __future__ import annotations

import socket

#: Connections served at once; more are answered 503 at once instead of queueing without end.
MAX_CONNECTIONS = 64
#: Seconds that open connections get to finish on Ctrl-C.
SHUTDOWN_SECONDS = 3


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


def serve(app, sock: socket.socket, access_log: bool = False) -> None:
    """Serve ``app`` on ``sock`` with uvicorn until Ctrl-C or SIGTERM.

    Parameters
    ----------
    app : ASGI application
        :func:`~dobutsu_tb.analysis.web.app.create_app`'s.
    sock : socket.socket
        From :func:`listen`.
    access_log : bool, optional
        Log every request on stderr.
    """
    import uvicorn

    config = uvicorn.Config(app, log_level="info" if access_log else "warning", access_log=access_log,
                            lifespan="on", limit_concurrency=MAX_CONNECTIONS,
                            timeout_graceful_shutdown=SHUTDOWN_SECONDS, server_header=False)
    uvicorn.Server(config).run(sockets=[sock])
