"""The build on a cluster (tablebase/cluster.py, docs/cluster.md): the file holds exactly the keys
and values of the in-process build, for any number of workers; a worker that dies, Ray missing or
a cluster out of reach is one error and no file.

The tests of the rounds themselves run the workers in this process (``--cluster serial``, no
Ray); the others start one small local Ray instance for the session (256 MiB of object store, no
dashboard) and skip when Ray is not installed (``pip install -e '.[cluster]'``), or fail then with
``DOBUTSU_TB_REQUIRE_RAY=1`` (as ``.ci/run`` sets)."""

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import LION_CHICK, LION_CHICK_5X3
from dobutsu_tb.encoding import compact_layout, config
from dobutsu_tb.encoding.compact_layout import key_hash, make_layout
from dobutsu_tb.tablebase import retrograde
from dobutsu_tb.tablebase.build import build_tablebase
from dobutsu_tb.tablebase.cluster import SERIAL, ClusterOptions
from dobutsu_tb.tablebase.cluster_kernels import owner_of, owners_of
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
    for args, message in ((["--workers", "2"], "--workers needs --cluster"),
                          (["--cluster", "local", "--max-memory", "1G"], "--max-memory applies to a build in this"),
                          (["--cluster", " "], "the address is empty"),
                          (["--cluster", "local", "--workers", "0"], "0 is not in the range")):
        result = cli("build", "--start", LION_CHICK, "--out", str(tmp_path / "x.h5"), *args)
        assert result.exit_code == 2 and message in result.output
    assert list(tmp_path.iterdir()) == []


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


#: ``dobutsu-tb`` with its cluster workers' processes killed as the retrograde analysis starts (the
#: pids are those the workers report when they start).
_KILLING_BUILD = """
import os, signal, sys
from dobutsu_tb.analysis.cli import run
from dobutsu_tb.tablebase import build, cluster

pids = []
start_workers = cluster._Cluster._start_workers
def started(self):
    start_workers(self)
    pids.extend(info["pid"] for info in self.infos)
cluster._Cluster._start_workers = started
plain = build.build_tablebase
def on_phase(name):
    if name == "retrograde":
        print(f"killing {len(pids)} workers", file=sys.stderr)
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
build.build_tablebase = lambda *a, **k: plain(*a, **dict(k, on_phase=on_phase))
sys.argv = ["dobutsu-tb"] + sys.argv[1:]
run()
"""


def test_a_worker_killed_mid_build_is_one_error_line_and_no_file(tmp_path):
    """``dobutsu-tb build --cluster local`` (a Ray instance of its own, started and stopped by the
    build), whose workers' processes are killed as the retrograde analysis starts: one ``error:``
    line naming a worker, exit code 1, nothing on stdout (Ray's own messages about the dead worker
    are not printed), nothing written. (Before the tests that use the session's instance: two
    instances never run at once.)"""
    _import_ray()
    out = tmp_path / "killed.h5"
    proc = subprocess.run([sys.executable, "-c", _KILLING_BUILD, "build", "--start", LION_CHICK, "--out", str(out),
                           "--quiet", "--cluster", "local", "--workers", "2"],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, RAY_USAGE_STATS_ENABLED="0"))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and proc.stdout == "", (proc.stdout, proc.stderr)
    assert lines[0] == "killing 2 workers" and len(lines) == 2, proc.stderr
    assert re.fullmatch(r"error: cluster worker \d \(pid \d+ on .*\) died \(.*\); the build stopped, "
                        r".*killed\.h5 was not written", lines[1]), lines[1]
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
    round's messages of these small builds take a few MB)."""
    ray = _import_ray()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=4, object_store_memory=1 << 28, include_dashboard=False, log_to_driver=False,
             logging_level="ERROR")
    yield ray
    ray.shutdown()


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
