"""The full tablebase from the standard start (slow: minutes and about 4 GiB).

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
