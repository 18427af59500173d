"""The ``serve`` command: the web explorer on a local address."""

from __future__ import annotations

import click

from dobutsu_tb.analysis.cli.common import tb_option


@click.command()
@tb_option
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on: loopback only by default; 0.0.0.0 for every interface.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on (0: any free port).")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in the default web browser.")
@click.option("--in-memory/--chunked", default=False, show_default=True,
              help="Read the whole tablebase into memory at start (seconds and about 1 GiB for the full one; more "
                   "probes per second), or read it a chunk at a time (the default: starts at once, little memory).")
@click.option("--access-log", is_flag=True, help="Log every request on stderr.")
@click.option("--client-timeout", default=10.0, show_default=True, type=click.FloatRange(0.1, 3600),
              metavar="SECONDS", help="Seconds a client gets to send each request, headers and body; slower "
                                      "clients are disconnected.")
def serve(tb_path, host, port, open_browser, in_memory, access_log, client_timeout):
    """Serve the web explorer: see any position, click moves, play against perfect play, judge a line.

    Prints the page's address, then serves until Ctrl-C, SIGTERM or SIGHUP (then exit code 130, 143
    or 129, within a second). The tablebase file is fixed at start. Loopback only unless --host says
    otherwise.
    """
    import threading
    import webbrowser

    from dobutsu_tb.analysis.web import create_app, listen
    from dobutsu_tb.analysis.web.server import serve as run
    from dobutsu_tb.analysis.web.server import url_of
    from dobutsu_tb.tablebase.probe import open_tablebase

    open_tablebase(tb_path).close()  # a missing or damaged file: one error line, at once
    if in_memory:
        click.echo(f"reading {tb_path} into memory ...", err=True)
    app = create_app(tb_path, in_memory=in_memory)
    sock = listen(host, port)
    url = url_of(sock)
    meta = app.state.service.metadata
    click.echo(f"serving {tb_path} ({meta.nonterminal:,} positions from {meta.start}) at {url}")
    click.echo("press Ctrl-C to stop", err=True)
    if open_browser:
        threading.Timer(0.5, webbrowser.open, args=(url,)).start()
    try:
        run(app, sock, access_log=access_log, client_timeout=client_timeout)
    finally:
        sock.close()
