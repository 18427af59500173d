"""``dobutsu-tb serve`` as a process: one-line errors before it starts, and safe under concurrent
requests (the tablebase is used from one thread)."""

import http.client
import json
import random
import socket
import threading
import urllib.parse

import pytest

from conftest import LION_CHICK


def test_missing_or_corrupt_file_is_one_error_line(cli, tmp_path):
    result = cli("serve", "--tb", tmp_path / "none.h5", "--port", "0")
    assert result.exit_code == 1
    assert result.output.startswith("error: ") and "no such file" in result.output
    assert result.output.count("\n") == 1
    junk = tmp_path / "junk.h5"
    junk.write_text("junk")
    result = cli("serve", "--tb", junk, "--port", "0", "--chunked")
    assert result.exit_code == 1 and "not a readable HDF5 file" in result.output


def test_port_in_use_and_bad_host_are_one_error_line(cli, lion_chick_tb):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli("serve", "--tb", lion_chick_tb.path, "--port", port, "--chunked")
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == f"error: cannot listen on 127.0.0.1 port {port}: Address already in use"
    result = cli("serve", "--tb", lion_chick_tb.path, "--host", "no such host.invalid", "--chunked")
    assert result.exit_code == 1 and result.output.splitlines()[-1].startswith("error: cannot listen on")
    assert cli("serve", "--tb", lion_chick_tb.path, "--port", "70000").exit_code == 2


def test_default_tablebase_follows_the_other_commands(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("DOBUTSU_TB", str(tmp_path / "from-env.h5"))
    result = cli("serve", "--port", "0")
    assert result.exit_code == 1 and "from-env.h5: no such file" in result.output


def _get(port, url):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", url)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_concurrent_requests_get_the_right_answers(web_server, lion_chick_tb):
    """Eight threads probe, judge and ask for lines at once; every answer matches the answer to
    the same request made alone."""
    from dobutsu_tb.tablebase.probe import open_tablebase

    port = int(web_server.rsplit(":", 1)[1].strip("/"))
    rng = random.Random(3)
    positions = [LION_CHICK]
    with open_tablebase(lion_chick_tb.path) as tb:
        while len(positions) < 60:
            moves = [m for m in tb.probe_moves(positions[-1]) if m.position is not None and m.wdl is not None]
            positions.append(rng.choice(moves).position.text() if moves else LION_CHICK)
    urls = [f"/api/probe?position={urllib.parse.quote(p, safe='/')}" for p in positions]
    urls += [f"/api/line?position={urllib.parse.quote(p, safe='/')}" for p in positions[:10]]
    urls += ["/api/probe?position=nonsense", "/api/probe?position=S/gle/-c-/-C-/ELG/-"]
    expected = {url: _get(port, url) for url in urls}
    failures = []

    def worker(seed):
        order = urls[:]
        random.Random(seed).shuffle(order)
        for url in order:
            got = _get(port, url)
            if got != expected[url]:
                failures.append(url)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert expected["/api/probe?position=nonsense"][0] == 400
    assert expected["/api/probe?position=S/gle/-c-/-C-/ELG/-"][0] == 404


@pytest.mark.parametrize("request_bytes", [
    b"GET /api/probe?position=" + b"A" * 200_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X-Junk: " + b"y" * 100_000 + b"\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64,  # a TLS hello
    b"NONSENSE\r\n\r\n",
])
def test_malformed_http_is_refused_without_a_500(web_server, request_bytes):
    port = int(web_server.rsplit(":", 1)[1].strip("/"))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        try:
            s.sendall(request_bytes)
            answer = s.recv(200)
        except ConnectionResetError:
            answer = b""
    assert not answer.startswith(b"HTTP/1.1 5")
    assert _get(port, "/api/info")[0] == 200  # and the server still serves


# --- holding up: stopping, disconnects, slow clients (issue 24) ----------------------------------


class Server:
    """``dobutsu-tb serve`` on a free port as a process of its own (SIGINT at its default, a
    session of its own, as at a terminal); ``stop(sig)`` sends the signal and returns (exit code,
    seconds to exit, stderr lines, children left)."""

    def __init__(self, tb, *options):
        import re
        import signal
        import subprocess
        import sys

        def default_signals():
            signal.signal(signal.SIGINT, signal.SIG_DFL)

        self.proc = subprocess.Popen([sys.executable, "-m", "dobutsu_tb.analysis.cli", "serve", "--tb", str(tb),
                                      "--port", "0", *options], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, preexec_fn=default_signals, start_new_session=True)
        first = self.proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", first)
        if found is None:
            self.proc.kill()
            pytest.fail(f"serve did not start: {first}{self.proc.stderr.read()}")
        self.port = int(found.group(1))

    def stop(self, sig):
        import os
        import signal
        import time

        from test_signals import descendants

        below = descendants(self.proc.pid)
        sent = time.monotonic()
        if sig == signal.SIGINT:
            os.killpg(self.proc.pid, sig)
        else:
            self.proc.send_signal(sig)
        self.proc.wait(timeout=30)
        took = time.monotonic() - sent
        err = self.proc.stderr.read()
        time.sleep(0.05)
        return self.proc.returncode, took, err.splitlines(), [p for p in below if os.path.exists(f"/proc/{p}")]

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def server(lion_chick_tb):
    servers = []

    def make(*options):
        servers.append(Server(lion_chick_tb.path, *options))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def _in_thread(port, url, answers, method="GET", body=None):
    def ask():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            conn.request(method, url, body=body)
            answers.append(conn.getresponse().status)
        except OSError as exc:
            answers.append(type(exc).__name__)
        finally:
            conn.close()
    thread = threading.Thread(target=ask)
    thread.start()
    return thread


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_stopping_with_requests_in_flight(server, sig):
    """The statistics being counted in a child process and probes under way: the server exits
    within a second with one line, the requests get an answer (503) or a closed connection,
    never a traceback, and the child is gone (no zombie)."""
    import signal
    import time

    from test_signals import descendants

    s = server()
    answers = []
    threads = [_in_thread(s.port, "/api/stats", answers)]
    deadline = time.monotonic() + 30
    while not descendants(s.proc.pid):
        assert time.monotonic() < deadline and s.proc.poll() is None, "the statistics' child never started"
        time.sleep(0.01)
    threads += [_in_thread(s.port, f"/api/line?position={LION_CHICK}", answers) for _ in range(4)]
    code, took, err, left = s.stop(getattr(signal, sig))
    for t in threads:
        t.join(30)
    assert code == 128 + getattr(signal, sig) and took < 1.0, (code, took, err)
    assert err == ["press Ctrl-C to stop", f"error: interrupted by {sig}"], err
    assert left == []
    assert all(a in (200, 503) or a in ("RemoteDisconnected", "ConnectionResetError") for a in answers), answers


def test_the_statistics_child_never_takes_the_terminals_signals(server):
    """The flaky run of the test above, under load: 'counting the statistics failed: exit code -2'
    beside the server's line. The child was in the server's process group from its fork to its
    setsid, and a Ctrl-C then (a signal to the group) killed it; polling /proc for the child and
    sending SIGINT at once did so in 7 of 20 runs. It now starts with SIGINT, SIGTERM and SIGHUP
    blocked, which /proc shows once it runs our code (its mask before exec blocks everything)."""
    import signal
    import time

    from test_signals import descendants

    s = server()
    threads = [_in_thread(s.port, "/api/stats", [])]
    deadline, mask = time.monotonic() + 30, None
    while mask is None and time.monotonic() < deadline and s.proc.poll() is None:
        for pid in descendants(s.proc.pid):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    ran = b"print_stats" in f.read()
                with open(f"/proc/{pid}/status") as f:
                    status = dict(line.split(":\t", 1) for line in f.read().splitlines() if ":\t" in line)
            except OSError:  # (it ended meanwhile: ask again)
                continue
            if ran:
                mask = int(status["SigBlk"], 16)
        time.sleep(0.002)
    code, _, err, left = s.stop(signal.SIGINT)
    for t in threads:
        t.join(30)
    assert mask is not None, "the statistics' child was never seen running"
    assert [sig.name for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP) if not mask >> (sig - 1) & 1] == []
    assert code == 130 and err == ["press Ctrl-C to stop", "error: interrupted by SIGINT"] and left == [], err


def test_disconnects_and_bad_requests_are_one_log_line_at_most(server):
    """70 clients that send half a POST body and go away, malformed requests, bad inputs: the
    log holds one line per malformed request at most, nothing for the rest, no traceback."""
    import signal

    s = server()
    for _ in range(70):
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as c:
            c.sendall(b"POST /api/verify-line HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 1000\r\n\r\n{\"start\": ")
    bad = [b"NONSENSE\r\n\r\n", b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X-Junk: " + b"y" * 100_000 + b"\r\n\r\n"]
    for request in bad:
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as c:
            c.sendall(request)
            c.recv(100)
    assert _get(s.port, "/api/probe?position=nonsense")[0] == 400
    assert _get(s.port, "/api/probe?position=S/gle/-c-/-C-/ELG/-")[0] == 404
    assert _get(s.port, "/api/info")[0] == 200
    code, took, err, _ = s.stop(signal.SIGTERM)
    assert code == 143 and err[0] == "press Ctrl-C to stop" and err[-1] == "error: interrupted by SIGTERM", err
    assert len(err) - 2 <= len(bad) and not any("Traceback" in line for line in err), err


def test_trickling_clients_cannot_lock_others_out(server):
    """100 connections each send a little more every half second, 30 a header line, 70 a POST
    body's bytes (more than the 64 requests that may wait for the tablebase), never ending their
    request: a normal client meanwhile gets every answer, and the server closes the tricklers
    once the client timeout (here 5 s) is over."""
    import select
    import signal
    import time

    s = server("--client-timeout", "5")
    trickling = []
    for k in range(100):
        c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        c.sendall(b"GET /api/info HTTP/1.1\r\nHost: x\r\n" if k < 30 else
                  b"POST /api/verify-line HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 60000\r\n\r\n[")
        trickling.append(c)
    stop = threading.Event()

    def trickle():
        n = 0
        while not stop.is_set():
            for k, c in enumerate(trickling):
                try:
                    c.sendall(b"X-Slow-%d: 1\r\n" % n if k < 30 else b"1,")
                except OSError:
                    pass
            n += 1
            stop.wait(0.5)

    thread = threading.Thread(target=trickle)
    thread.start()
    try:
        started = time.monotonic()
        answers = [_get(s.port, f"/api/probe?position={LION_CHICK}")[0] for _ in range(20)]
        assert answers == [200] * 20
        held = not select.select(trickling, [], [], 0)[0]  # none closed yet: the answers came while they held
        assert held or time.monotonic() - started > 4, "a trickling connection was closed too soon"
        time.sleep(max(0.0, started + 5.5 - time.monotonic()))
        closed = 0
        for c in trickling:
            c.settimeout(1)
            try:
                closed += c.recv(100) == b""
            except OSError:
                closed += 1
        assert closed == 100
    finally:
        stop.set()
        thread.join()
        for c in trickling:
            c.close()
    code, _, err, _ = s.stop(signal.SIGINT)
    assert code == 130 and err == ["press Ctrl-C to stop", "error: interrupted by SIGINT"], err
