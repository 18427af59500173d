"""The build on a cluster (tablebase/cluster.py, docs/cluster.md): the file holds exactly the keys
and values of the in-process build, for any number of workers; a worker that dies, Ray missing or
a cluster out of reach is one error and no file.

The tests of the rounds themselves run the workers in this process (``--cluster serial``, no
Ray); the others start one small local Ray instance for the session (256 MiB of object store, no
dashboard) and skip when Ray is not installed (``pip install -e '.[cluster]'``), or fail then with
``DOBUTSU_TB_REQUIRE_RAY=1`` (as ``.ci/run`` sets)."""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import LION_CHICK, LION_CHICK_5X3
from dobutsu_tb.encoding import compact_layout, config
from dobutsu_tb.encoding.compact_layout import key_hash, make_layout
from dobutsu_tb.encoding.routing import owner_of, owners_of
from dobutsu_tb.tablebase import cluster, cluster_ray, retrograde
from dobutsu_tb.tablebase.build import build_tablebase
from dobutsu_tb.tablebase.cluster import (
    SERIAL,
    ClusterError,
    ClusterOptions,
    LocalRay,
    check_address,
    cluster_threads,
    local_threads,
)
from dobutsu_tb.tablebase.game.variant import get_variant, load_variant_file
from dobutsu_tb.tablebase.reader import TablebaseFile


def _contents(path):
    with TablebaseFile(path) as f:
        keys, values = f.read_all()
        return keys, values.astype(np.uint16), f.metadata


COUNTS = ("reachable", "nonterminal", "catch_terminal", "try_terminal", "no_moves", "wins", "draws", "losses",
          "start_wdl", "start_dtm", "max_dtm")


def assert_same_tablebase(path, reference):
    """The keys, values and counts of two files are equal."""
    keys, values, meta = _contents(path)
    want_keys, want_values, want = _contents(reference)
    assert keys.shape[0] == want.nonterminal
    assert np.array_equal(keys, want_keys) and np.array_equal(values, want_values)
    assert {k: getattr(meta, k) for k in COUNTS} == {k: getattr(want, k) for k in COUNTS}
    assert meta.variant == want.variant and meta.start == want.start


# --- the ownership of keys ---------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_owners_share_the_keys_evenly_and_spread_over_each_table(n, lion_chick_tb):
    keys, _, _ = _contents(lion_chick_tb.path)
    layout = make_layout(44, 19, 44, 1)
    hashes = np.array([key_hash(np.int64(k), layout) for k in keys], np.int64)
    owners = np.empty_like(hashes)
    owners_of(hashes, n, owners)
    assert owners.min() >= 0 and owners.max() < n
    assert all(int(owner_of(h, n)) == o for h, o in zip(hashes[:50].tolist(), owners[:50].tolist()))
    share = np.bincount(owners, minlength=n) / keys.shape[0]
    assert np.all(np.abs(share - 1 / n) < 0.05)
    # A worker's keys still fill every part of its table: the top bits of the hash (the home slot)
    # of the keys it owns are spread evenly.
    mine = hashes[owners == 0]
    top = np.bincount(mine >> (44 - 4), minlength=16) / mine.shape[0]
    assert np.all(np.abs(top - 1 / 16) < 0.03)


# --- the rounds, workers in this process --------------------------------------------------------

@pytest.fixture()
def small_tables(monkeypatch):
    """Tables of 2**14 slots at most a fifth full: the lion-and-chick build makes them grow."""
    monkeypatch.setattr(config, "DEFAULT_EXPECTED", 256)
    monkeypatch.setattr(config, "LOAD_FACTOR", 0.2)
    monkeypatch.setattr(config, "SET_LOAD_FACTOR", 0.2)
    monkeypatch.setattr(compact_layout, "MIN_SLOT_BITS", 14)


@pytest.mark.parametrize("workers,threads", [(1, 1), (2, 1), (3, 1), (4, 1), (2, 2)])
def test_serial_workers_build_the_in_process_file(tmp_path, workers, threads, small_tables, lion_chick_tb):
    """Small rounds (64 positions a worker), tables that grow, workers of one or two threads (and
    as many shards): the file is the in-process one."""
    options = ClusterOptions(SERIAL, workers, threads, batch=64, frontier=50)
    result = build_tablebase(tmp_path / "c.h5", LION_CHICK, progress=False, cluster=options)
    assert_same_tablebase(result.path, lion_chick_tb.path)
    report = result.cluster
    assert len(report.workers) == workers and report.rounds["enumeration"] > 11_711 // (64 * workers)
    assert all(w["threads"] == threads for w in report.workers)
    assert sum(w["positions"] for w in report.workers) == 11_711
    assert report.sent["records"] == 8 * 11_711
    assert (report.sent["enumeration"] > 0) == (workers > 1)
    assert all(w["capacity"] > 1 << 14 for w in report.workers)  # the tables grew


def test_serial_workers_on_other_variants(tmp_path, tiny_3x3_tb, lion_chick_5x3_tb):
    for name, start, reference, workers in (("dobutsu-3x3", None, tiny_3x3_tb, 3),
                                            ("dobutsu-5x3", LION_CHICK_5X3, lion_chick_5x3_tb, 2)):
        options = ClusterOptions(SERIAL, workers, batch=500, frontier=300)
        result = build_tablebase(tmp_path / f"{name}.h5", start, progress=False, variant=get_variant(name),
                                 cluster=options)
        assert_same_tablebase(result.path, reference.path)


def test_serial_workers_with_dtms_too_long_for_a_byte(tmp_path, monkeypatch, lion_chick_tb):
    """DTMs of 5 plies or more stand for the long ones: two-byte values, equal to the plain file's."""
    monkeypatch.setattr(retrograde, "LONG_DTM", 5)
    result = build_tablebase(tmp_path / "wide.h5", LION_CHICK, progress=False,
                             cluster=ClusterOptions(SERIAL, 3, batch=100, frontier=100))
    assert TablebaseFile(result.path).value_dtype == np.dtype("<u2")
    assert_same_tablebase(result.path, lion_chick_tb.path)


def test_without_ray_the_cluster_build_is_one_error_and_the_plain_build_works(cli, tmp_path, monkeypatch,
                                                                             lion_chick_tb):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    result = cli("build", "--start", LION_CHICK, "--out", tmp_path / "x.h5", "--cluster", "local")
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert result.output.startswith("error: a build on a cluster needs Ray: pip install 'dobutsu-tablebase[cluster]'")
    assert list(tmp_path.iterdir()) == []
    result = cli("build", "--start", LION_CHICK, "--out", tmp_path / "x.h5", "--quiet")  # Ray is optional
    assert result.exit_code == 0, result.output
    assert_same_tablebase(tmp_path / "x.h5", lion_chick_tb.path)


def test_cluster_options_are_checked(cli, tmp_path):
    with pytest.raises(ValueError):
        ClusterOptions("local", 0)
    with pytest.raises(ValueError, match="is not a Ray address"):
        ClusterOptions("http://head:8265", 2)
    for args, message in ((["--workers", "2"], "--workers needs --cluster"),
                          (["--cluster", "local", "--max-memory", "1G"], "--max-memory applies to a build in this"),
                          (["--cluster", " "], "the address is empty"),
                          (["--cluster", "local", "--workers", "0"], "0 is not in the range"),
                          (["--cluster", "http://x"], "'http://x' is not a Ray address: give local, auto, HOST:PORT or "
                                                      "ray://HOST:PORT (an http:// address is the dashboard's"),
                          (["--cluster", "headnode"], "'headnode' is not a Ray address")):
        result = cli("build", "--start", LION_CHICK, "--out", str(tmp_path / "x.h5"), *args)
        assert result.exit_code == 2 and message in result.output, result.output
    assert list(tmp_path.iterdir()) == []


def test_addresses_are_checked_for_their_form():
    for good in ("local", "serial", "auto", "head:6379", "10.0.0.1:6379", "[::1]:6379", "ray://head:10001",
                 "ray://head"):
        check_address(good)
    for bad in ("", "x", "head", "head:", ":6379", "head:port", "head:0", "head:65536", "http://head:8265",
                "https://head", "ray://", "ray://:10001", "ray://head:x", "head:6379/path", "a b:1", "ray:/head:1",
                "head:６３７９"):
        with pytest.raises(ValueError, match="is not a Ray address"):
            check_address(bad)


def test_a_local_cluster_is_sized_to_the_machine():
    """``--cluster local``: at most twice as many threads as CPUs in all, at most the CPUs in one worker."""
    assert [local_threads(w, None, cpus=2) for w in (1, 2, 3, 4)] == [2, 1, 1, 1]
    assert local_threads(2, 2, cpus=2) == 2 and local_threads(1, 4, cpus=4) == 4 and local_threads(8, None, 4) == 1
    for workers, threads, message in ((5, None, "5 workers of 1 thread(s) are 5 threads, and this machine runs at "
                                                "most 4 (2 for each of its 2 CPU(s))"),
                                      (4, 2, "4 workers of 2 thread(s) are 8 threads"),
                                      (64, None, "64 workers"),
                                      (1, 3, "a worker of 3 threads, and this machine has 2 CPU(s); ask for "
                                             "--worker-threads 2 or fewer")):
        with pytest.raises(ClusterError, match=re.escape(message)):
            local_threads(workers, threads, cpus=2)
    assert cluster.usable_cpus() == len(os.sched_getaffinity(0))


def test_a_cluster_hosts_each_worker_on_one_node():
    """A worker's threads are CPUs of one node: nodes of 8 and 4 CPUs host 3 workers of 4 threads, not 4."""
    assert cluster_threads([4], 2) == 2 and cluster_threads([4], 4) == 1 and cluster_threads([4], 3) == 1
    assert cluster_threads([8, 4], 2) == 4 and cluster_threads([8, 4], 3) == 4 and cluster_threads([8, 4], 4) == 2
    assert cluster_threads([8, 4], 2, 4) == 4 and cluster_threads([8, 4], 1, 6) == 6
    assert cluster_threads([8, 4], 12, 1) == 1
    for nodes, workers, threads, message in (
            ([4], 5, None, "the Ray cluster has 4 CPUs on 1 node: it can host 4 workers of 1 thread(s), not 5"),
            ([8, 4], 2, 5, "the Ray cluster has 12 CPUs on 2 nodes, the largest 8: it can host 1 workers of 5 "
                           "thread(s), not 2"),
            ([2], 1, 200, "it can host 0 workers of 200 thread(s), not 1"),
            ([64], 4096, None, "it can host 64 workers of 1 thread(s), not 4096")):
        with pytest.raises(ClusterError, match=re.escape(message)):
            cluster_threads(nodes, workers, threads)


#: Ray's errors as Ray 2.60 words them (str() of each): the line that says what went wrong is
#: neither always the first nor always the last.
RAY_ERRORS = {
    "task": ("\x1b[36mray::A.boom()\x1b[39m (pid=14191, ip=192.0.2.2, actor_id=53c3, repr=<exp1.A object at 0x7f78>)\n"
             "           ^^^^^^^^^^^^^^^^^^^^\n"
             "  File \"/tmp/exp1.py\", line 8, in boom\n"
             "    def boom(self): raise ValueError(\"bad thing\\nmore\")\n"
             "                    ^^^^^^^^^^^^^^^^^^^\n"
             "ValueError: bad thing\nmore", False, "ValueError: bad thing"),
    "died": ("The actor died unexpectedly before finishing this task.\n\tclass_name: ShardWorker\n\tactor_id: 53c3\n"
             "\tpid: 14191\n\tnamespace: 696c\n\tip: 192.0.2.2\n"
             "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit "
             "detail: Worker unexpectedly exits with a connection error code 2. End of file. Some common causes "
             "include: (1) the process was killed by the OOM killer due to high memory usage, (2) ray stop --force "
             "was called, or (3) the worker crashed unexpectedly due to SIGSEGV or another unexpected error. If the "
             "process was killed by the kernel OOM killer (verifiable by checking for OOM in dmesg of the OOMing "
             "node), consider enabling resource isolation.", True,
             "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit "
             "detail: Worker unexpectedly exits with a connection error code 2. End of file."),
    "version": ("Version mismatch: The cluster was started with:\n    Ray: 2.9.0\n    Python: 3.10.12\n"
                "This process on node 192.0.2.2 was started with:\n    Ray: 2.60.0\n    Python: 3.11.7\n", False,
                "Version mismatch: The cluster was started with: Ray: 2.9.0 Python: 3.10.12 This process on node "
                "192.0.2.2 was started with: Ray: 2.60.0 Python: 3.11.7"),
    "address": ("Invalid Ray address: 'http://x'. It looks like you set RAY_ADDRESS to an HTTP address (e.g. the API "
                "server address). To fix this, either:\n  1. Unset RAY_ADDRESS if you are running from a Ray node, "
                "or\n  2. Set RAY_ADDRESS to the GCS address instead (e.g. <head_node_ip>:6379).", False,
                "Invalid Ray address: 'http://x'. It looks like you set RAY_ADDRESS to an HTTP address (e.g. the API "
                "server address). To fix this, either: 1. Unset RAY_ADDRESS if you are running from a Ray node, or "
                "2. Set RAY_ADDRESS to the GCS address instead (e.g. <head_node_ip>:6379)."),
}


@pytest.mark.parametrize("name", RAY_ERRORS)
def test_a_ray_error_is_said_by_its_informative_line(name):
    text, last, want = RAY_ERRORS[name]
    assert cluster_ray._gist(RuntimeError(text), last=last) == want
    assert cluster_ray._gist(RuntimeError("")) == "RuntimeError"
    long = cluster_ray._gist(RuntimeError("word " * 100))
    assert len(long) == 300 and long.endswith("...")


def test_what_ray_printed_while_it_failed_to_connect_is_said_in_the_line():
    printed = "".join(f"[2026-11-25 19:26:{i:02d},028 W 24492 24492] gcs_client.cc:210: Failed to get cluster ID "
                      f"from GCS server: Unauthenticated: RPC error: InvalidAuthToken: Authentication token is "
                      f"missing or incorrect\n" for i in range(20))
    line = cluster_ray._connect_failure(ConnectionError("Failed to connect to Ray cluster at h:1"), printed)
    assert line == ("Failed to connect to Ray cluster at h:1 (Failed to get cluster ID from GCS server: "
                    "Unauthenticated: RPC error: InvalidAuthToken: Authentication token is missing or incorrect); the "
                    "cluster asks for a token: set RAY_AUTH_MODE=token, and RAY_AUTH_TOKEN (or ~/.ray/auth_token) to "
                    "the cluster's token")
    assert cluster_ray._connect_failure(ConnectionError("Failed to connect\nat h:1"), "") == "Failed to connect at h:1"


def _serve_once(answer: bytes | None):
    """A TCP server on a free port of 127.0.0.1 that reads what comes and answers ``answer``
    (None: says nothing, keeps the connection open) to each client; returns (port, stop)."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stopping = threading.Event()
    held = []

    def serve():
        while not stopping.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.recv(1024)
            if answer is None:
                held.append(conn)
            else:
                conn.sendall(answer)
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()

    def stop():
        stopping.set()
        thread.join()
        server.close()
        for conn in held:
            conn.close()
    return server.getsockname()[1], stop


def test_a_port_that_is_not_a_ray_heads_is_one_error_at_once(monkeypatch):
    """The dashboard's port, or any other service's: said within CONNECT_SECONDS (Ray alone would
    retry for minutes, a warning a second); a gRPC server's first frame (SETTINGS) passes."""
    monkeypatch.setattr(cluster_ray, "CONNECT_SECONDS", 0.5)
    for answer in (b"HTTP/1.0 400 Bad request\r\n\r\n", b"", None):
        port, stop = _serve_once(answer)
        try:
            with pytest.raises(ConnectionError, match=f"something answers at 127.0.0.1:{port}, but not as a Ray "
                                                      f"cluster does \\(no gRPC\\); give the head's GCS port"):
                cluster_ray._reachable(f"127.0.0.1:{port}")
            with pytest.raises(ConnectionError, match="give Ray Client's port"):
                cluster_ray._reachable(f"ray://127.0.0.1:{port}")
        finally:
            stop()
    port, stop = _serve_once(bytes([0, 0, 6, 4, 0, 0, 0, 0, 0]) + bytes(6))  # an HTTP/2 server's SETTINGS
    try:
        cluster_ray._reachable(f"127.0.0.1:{port}")
    finally:
        stop()
    with pytest.raises(ConnectionError, match="nothing answers at ray://127.0.0.1:9 \\(Connection refused\\)"):
        cluster_ray._reachable("ray://127.0.0.1:9")


# --- on Ray --------------------------------------------------------------------------------------

def _import_ray():
    """Ray, or a skip without it (a failure when ``DOBUTSU_TB_REQUIRE_RAY=1``, as ``.ci/run`` sets)."""
    try:
        import ray
    except ImportError:
        if os.environ.get("DOBUTSU_TB_REQUIRE_RAY") == "1":
            pytest.fail("Ray is not installed and DOBUTSU_TB_REQUIRE_RAY=1: pip install -e '.[test,cluster]'")
        pytest.skip("Ray is not installed (pip install -e '.[test,cluster]')")
    return ray


#: ``dobutsu-tb``, with at the start of the retrograde analysis (``$TEST_AT_RETROGRADE``): ``kill``,
#: its cluster workers' processes killed (the pids are those the workers report when they start);
#: ``sigint``, SIGINT to its process group, as Ctrl-C at a terminal (Ray's processes get it too).
_SCRIPTED_BUILD = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)  # as at a terminal (a test run in the background ignores it)
from dobutsu_tb.analysis.cli import run
from dobutsu_tb.tablebase import build, cluster_ray

pids = []
start_workers = cluster_ray.RayCluster._start_workers
def started(self):
    start_workers(self)
    pids.extend(info["pid"] for info in self.infos)
cluster_ray.RayCluster._start_workers = started
plain = build.build_tablebase
def on_phase(name):
    if name == "retrograde" and os.environ["TEST_AT_RETROGRADE"] == "kill":
        print(f"killing {len(pids)} workers", file=sys.stderr)
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
    if name == "retrograde" and os.environ["TEST_AT_RETROGRADE"] == "sigint":
        os.killpg(0, signal.SIGINT)
build.build_tablebase = lambda *a, **k: plain(*a, **dict(k, on_phase=on_phase))
sys.argv = ["dobutsu-tb"] + sys.argv[1:]
run()
"""


def _scripted_build(out, at_retrograde: str):
    """``dobutsu-tb build --cluster local --workers 2`` of the lion-and-chick start (a Ray instance of
    its own), in a process group of its own with ``$TMPDIR`` an empty folder (where Ray's default
    folder would be too, ``$TMPDIR/ray``); returns the process, what is left in that folder and
    the processes left that name it."""
    tmpdir = tempfile.mkdtemp(prefix="t", dir="/tmp")  # short: Ray's socket paths must fit in 107 bytes
    try:
        proc = subprocess.run([sys.executable, "-c", _SCRIPTED_BUILD, "build", "--start", LION_CHICK, "--out",
                               str(out), "--quiet", "--cluster", "local", "--workers", "2"],
                              capture_output=True, text=True, timeout=300, start_new_session=True,
                              env=dict(os.environ, RAY_USAGE_STATS_ENABLED="0", TMPDIR=tmpdir,
                                       TEST_AT_RETROGRADE=at_retrograde))
        for _ in range(40):  # processes killed a moment ago are gone at once, or nearly
            running = cluster_ray._processes_of(tmpdir)
            if not running:
                break
            time.sleep(0.05)
        return proc, sorted(os.listdir(tmpdir)), running
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def test_a_worker_killed_mid_build_is_one_error_line_and_no_file(tmp_path):
    """``dobutsu-tb build --cluster local`` (a Ray instance of its own, started and stopped by the
    build), whose workers' processes are killed as the retrograde analysis starts: one ``error:``
    line naming a worker, exit code 1, nothing on stdout (Ray's own messages about the dead worker
    are not printed), nothing written, nothing of Ray's left. (Before the tests that use the
    session's instance: two instances never run at once.)"""
    _import_ray()
    proc, left, running = _scripted_build(tmp_path / "killed.h5", "kill")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and proc.stdout == "", (proc.stdout, proc.stderr)
    assert lines[0] == "killing 2 workers" and len(lines) == 2, proc.stderr
    assert re.fullmatch(r"error: cluster worker \d \(pid \d+ on .*\) died \(The actor is dead because its worker "
                        r"process has died\..*\); the build stopped, .*killed\.h5 was not written", lines[1]), lines[1]
    assert list(tmp_path.iterdir()) == [] and left == [] and running == []


def test_a_dead_worker_is_named_with_ray_s_reason_not_its_last_line():
    """The third hostile round: a worker or the raylet killed gave 'cluster worker 1 died (The actor
    never ran - it was cancelled ...)', Ray's last line, which reads as if the worker had never
    started. The message names the worker (its number, process and host, from Ray's error when
    the workers' own report is missing) and Ray's reason; the build then says it stopped."""
    from types import SimpleNamespace

    ray = _import_ray()
    from ray.core.generated.common_pb2 import ActorDiedErrorContext

    def dead(actor_id, reason):
        return ray.exceptions.ActorDiedError(ActorDiedErrorContext(
            class_name="Worker", actor_id=actor_id, pid=4242, node_ip_address="10.0.0.7", error_message=reason,
            never_started=True))

    def raising(exc):
        def get(refs, timeout=None):
            raise exc
        return get

    ids = [bytes([k]) * 16 for k in range(2)]
    driver = cluster_ray.RayCluster.__new__(cluster_ray.RayCluster)
    driver.workers = [SimpleNamespace(_actor_id=SimpleNamespace(hex=actor_id.hex)) for actor_id in ids]
    driver.infos = []  # (the raylet died before the workers reported)
    for reason, said in [("The actor is dead because its node has died. Node Id: ab12",
                          "The actor is dead because its node has died. Node Id: ab12"),
                         ("", "killed")]:
        driver.ray = SimpleNamespace(get=raising(dead(ids[1], reason)), exceptions=ray.exceptions)
        with pytest.raises(cluster.ClusterError) as caught:
            driver.get([])
        assert str(caught.value) == f"cluster worker 1 (pid 4242 on 10.0.0.7) died ({said})"
    driver.infos = [{"pid": 11, "host": "a"}, {"pid": 12, "host": "b"}]
    driver.ray = SimpleNamespace(get=raising(dead(ids[0], "The actor is dead because its worker process has "
                                                           "died. Worker exit type: SYSTEM_ERROR")),
                                 exceptions=ray.exceptions)
    with pytest.raises(cluster.ClusterError, match=r"^cluster worker 0 \(pid 11 on a\) died \(The actor is dead "
                                                   r"because its worker process has died\. Worker exit type: "
                                                   r"SYSTEM_ERROR\)$"):
        driver.get([])


@pytest.mark.parametrize("at_retrograde", ["nothing", "sigint"])
def test_a_local_build_leaves_nothing_of_ray_behind(tmp_path, at_retrograde):
    """A ``--cluster local`` build that ends, or that Ctrl-C stops (Ray's processes get the signal
    too): its Ray instance's folder (``$TMPDIR/dobutsu-ray-*``, never ``/tmp/ray``) is gone, and so
    are its processes; after Ctrl-C, one line and exit code 130."""
    _import_ray()
    out = tmp_path / "lc.h5"
    proc, left, running = _scripted_build(out, at_retrograde)
    assert left == [] and running == [], (left, running, proc.stderr)
    if at_retrograde == "nothing":
        assert proc.returncode == 0 and "win in 15 plies" in proc.stdout, proc.stderr
        assert out.exists() and proc.stderr == ""
    else:
        assert proc.returncode == 130 and proc.stdout == "", proc.stderr
        # the build's own line, or the watcher's if the round under way outlasts its deadline
        assert re.fullmatch(r"error: interrupted by SIGINT(: the build stopped, .*lc\.h5 was not written)?\n",
                            proc.stderr), proc.stderr
        assert list(tmp_path.iterdir()) == []


def test_a_ray_address_without_ray_client_says_how_to_install_it(tmp_path):
    """A ``ray://`` address needs Ray Client (grpcio, ``ray[client]``): without it, one line that says so,
    at once."""
    _import_ray()
    code = ("import sys; sys.modules['grpc'] = None; sys.argv = ['dobutsu-tb'] + sys.argv[1:]\n"
            "from dobutsu_tb.analysis.cli import run; run()")
    proc = subprocess.run([sys.executable, "-c", code, "build", "--start", LION_CHICK, "--out", str(tmp_path / "x.h5"),
                           "--cluster", "ray://127.0.0.1:9"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stderr.splitlines() == [
        "error: cannot connect to the Ray cluster at ray://127.0.0.1:9: a ray:// address needs Ray Client: pip "
        f"install 'ray[client]' (or 'dobutsu-tablebase[cluster]' again); the build stopped, {tmp_path / 'x.h5'} "
        "was not written"], proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_cluster_out_of_reach_is_one_error_line(tmp_path):
    """A fresh process (not connected to Ray) asked for a cluster where nothing listens: one line
    at once (Ray alone would retry for minutes)."""
    _import_ray()
    out = tmp_path / "x.h5"
    proc = subprocess.run([sys.executable, "-m", "dobutsu_tb.analysis.cli", "build", "--start", LION_CHICK,
                           "--out", str(out), "--cluster", "127.0.0.1:9", "--workers", "2"],
                          capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: cannot connect to the Ray cluster at 127.0.0.1:9: nothing answers")
    assert lines[0].endswith("x.h5 was not written")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray instance for the session's cluster tests (builds reuse a connection they find):
    4 CPUs (the workers reserve one each; the machine may have fewer), 256 MiB of object store (a
    round's messages of these small builds take a few MB); its folder and processes gone at the end."""
    ray = _import_ray()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    local = LocalRay()
    local.start(ray, num_cpus=4, object_store_memory=1 << 28, include_dashboard=False, log_to_driver=False,
                logging_level="ERROR")
    yield ray
    folder = local.folder
    local.stop(ray)
    assert not os.path.exists(folder) and cluster_ray._processes_of(folder) == []


def test_the_session_instance_answers_as_a_ray_head(ray_session):
    """The check before connecting (a gRPC server answers at HOST:PORT) passes on a real head."""
    cluster_ray._reachable(ray_session.get_runtime_context().gcs_address)


def test_a_cluster_too_small_for_the_workers_is_one_error(tmp_path, ray_session):
    """The session's instance has 4 CPUs: 5 workers of one thread are refused before any starts."""
    with pytest.raises(ClusterError, match=re.escape("the Ray cluster has 4 CPUs on 1 node: it can host 4 workers of "
                                                     "1 thread(s), not 5; ask for fewer workers or --worker-threads; "
                                                     "the build stopped")):
        build_tablebase(tmp_path / "x.h5", LION_CHICK, progress=False, cluster=ClusterOptions("local", 5))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name,start,fixture,workers", [
    ("dobutsu", LION_CHICK, "lion_chick_tb", 2),
    ("dobutsu", LION_CHICK, "lion_chick_tb", 3),
    ("dobutsu", LION_CHICK, "lion_chick_tb", 4),
    ("dobutsu-3x3", None, "tiny_3x3_tb", 2),
    ("dobutsu-3x3", None, "tiny_3x3_tb", 3),
    ("dobutsu-5x3", LION_CHICK_5X3, "lion_chick_5x3_tb", 4),
])
def test_a_ray_cluster_builds_the_in_process_file(tmp_path, ray_session, request, name, start, fixture, workers):
    reference = request.getfixturevalue(fixture)
    options = ClusterOptions("local", workers, batch=1000, frontier=1000)
    result = build_tablebase(tmp_path / "c.h5", start, progress=False, variant=get_variant(name), cluster=options)
    assert_same_tablebase(result.path, reference.path)
    report = result.cluster
    assert len({w["pid"] for w in report.workers}) == workers and os.getpid() not in {w["pid"] for w in report.workers}
    assert all(w["peak_rss"] > 0 and w["positions"] > 0 for w in report.workers)
    assert report.sent["enumeration"] > 0 and report.sent["retrograde"] > 0


def test_the_command_line_builds_on_ray(cli, tmp_path, ray_session, lion_chick_tb):
    out = tmp_path / "lc.h5"
    result = cli("build", "--start", LION_CHICK, "--out", str(out), "--quiet", "--cluster", "local", "--workers", "2")
    assert result.exit_code == 0, result.output
    assert "win in 15 plies" in result.output and "2 workers; sent between workers" in result.output
    assert_same_tablebase(out, lion_chick_tb.path)


@pytest.mark.parametrize("address", [SERIAL, "local"])
def test_a_signal_stops_a_cluster_build_and_leaves_no_file(tmp_path, request, address):
    """SIGINT as the retrograde analysis starts: Interrupted at the next round, the workers gone,
    nothing written."""
    from dobutsu_tb.encoding.interrupt import Interrupted

    if address == "local":
        request.getfixturevalue("ray_session")

    def on_phase(name):
        if name == "retrograde":
            os.kill(os.getpid(), signal.SIGINT)

    out = tmp_path / "stopped.h5"
    with pytest.raises(Interrupted, match="the build stopped, .*stopped.h5 was not written"):
        build_tablebase(out, LION_CHICK, progress=False, on_phase=on_phase,
                        cluster=ClusterOptions(address, 2, batch=1000, frontier=1000))
    assert list(tmp_path.iterdir()) == []


#: A 3x3 board whose lions can be walled in by their own rocks: positions without a move.
ROCKS = Path(__file__).parent / "data" / "rocks.toml"


@pytest.mark.parametrize("address", [SERIAL, "local"])
def test_positions_without_a_move_on_a_cluster(cli_split, tmp_path, request, address):
    """The keys of the positions without a move (losses in 0) are the in-process build's, and so
    is the command's line of jh85's counts."""
    if address == "local":
        request.getfixturevalue("ray_session")
    reference = tmp_path / "plain.h5"
    code, plain, _ = cli_split("build", "--variant-file", ROCKS, "--out", reference, "--quiet")
    assert code == 0 and "positions without a move" in plain
    code, clustered, _ = cli_split("build", "--variant-file", ROCKS, "--out", tmp_path / "c.h5", "--quiet",
                                   "--cluster", address, "--workers", "3")
    assert code == 0
    assert clustered.splitlines()[-1] == plain.splitlines()[-1]  # the line of jh85's counts
    v = load_variant_file(ROCKS)
    want = build_tablebase(tmp_path / "p.h5", progress=False, variant=v)
    got = build_tablebase(tmp_path / "q.h5", progress=False, variant=v, cluster=ClusterOptions(address, 3))
    assert got.metadata.no_moves == 4 and got.no_move_keys.tolist() == want.no_move_keys.tolist()
    assert_same_tablebase(got.path, want.path)
