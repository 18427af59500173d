"""The full tablebase from the standard start (slow: minutes and about 4 GiB), in this process and
on a local Ray cluster.

Run with ``python -m pytest -m slow``.
"""

import pytest

from dobutsu_tb.tablebase.build import build_tablebase
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.probe import open_tablebase
from dobutsu_tb.tablebase.values import LOSS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def full_tb(tmp_path_factory):
    return build_tablebase(tmp_path_factory.mktemp("full") / "dobutsu.h5", progress=False)


def test_spec_figures(full_tb):
    m = full_tb.metadata
    assert m.reachable == 246_803_167  # docs/rules.md §6
    assert m.nonterminal == 99_485_568
    assert (m.start_wdl, m.start_dtm) == (LOSS, 78)  # docs/rules.md §7


def test_start_position_probes(full_tb):
    with open_tablebase(full_tb.path) as tb:
        start = Position.start()
        assert tb.probe_dtm(start) == -78
        assert tb.probe_dtm(Position.from_state(start.state(), 1)) == -78  # Gote to move
        moves = tb.probe_moves(start)
        assert all(m.wdl == LOSS for m in moves)  # Sente's every move loses
        assert min(m.dtm for m in moves) == -78 and moves[0].dtm == -78
        assert len(tb.principal_variation(start)) == 78


def test_no_position_without_moves(full_tb):
    assert full_tb.metadata.no_moves == 0  # docs/rules.md §6


def test_a_local_ray_cluster_of_two_workers_builds_the_same_file(full_tb, tmp_path):
    """The standard game on a local Ray instance with two workers: every key and value, and the
    counts, of the in-process file (docs/cluster.md, "Same answer"; skipped without Ray:
    ``pip install -e '.[test,cluster]'``; ``scripts/check_cluster_build.py`` does 2, 3 and 4)."""
    pytest.importorskip("ray")
    import numpy as np

    from dobutsu_tb.tablebase.cluster import ClusterOptions
    from dobutsu_tb.tablebase.reader import TablebaseFile

    result = build_tablebase(tmp_path / "cluster.h5", progress=False,
                             cluster=ClusterOptions("local", 2, object_store_memory=1 << 29))
    assert len(result.cluster.workers) == 2
    with TablebaseFile(full_tb.path) as f, TablebaseFile(result.path) as g:
        (keys, values), (got_keys, got_values) = f.read_all(), g.read_all()
    assert np.array_equal(keys, got_keys) and np.array_equal(values, got_values)
    counts = ("reachable", "nonterminal", "catch_terminal", "try_terminal", "no_moves", "wins", "draws", "losses",
              "start_wdl", "start_dtm", "max_dtm")
    assert [getattr(result.metadata, k) for k in counts] == [getattr(full_tb.metadata, k) for k in counts]


def test_an_export_of_the_full_game_is_probe_and_probe_moves(full_tb, tmp_path):
    """A sample of 3,000 positions of the full game exported (docs/export.md): each row is what
    probe and probe_moves say (its checks are tests/test_export.py's)."""
    pq = pytest.importorskip("pyarrow.parquet")
    from test_export import check_row

    from dobutsu_tb.tablebase.export import export_parquet

    out = tmp_path / "sample.parquet"
    assert export_parquet(full_tb.path, out, sample=3000, seed=44).rows == 3000
    with open_tablebase(full_tb.path) as tb:
        for row in pq.read_table(out).to_pylist():
            check_row(tb, row)
