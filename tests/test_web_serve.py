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
