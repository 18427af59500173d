"""The public face: ``from dobutsu_tb import ...``, python-chess style moves, one value convention."""

import subprocess
import sys

import pytest

from conftest import LION_CHICK


def test_the_package_imports_nothing_until_a_name_is_used():
    # The command line's entry lives below dobutsu_tb: its start must stay quick and numba-free.
    code = "import sys, dobutsu_tb; print(sorted(m for m in ('numpy', 'h5py', 'numba') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_public_names_are_the_deep_ones():
    import dobutsu_tb
    from dobutsu_tb import Move, Position, open_tablebase
    from dobutsu_tb.tablebase.game.notation import Move as deep_move
    from dobutsu_tb.tablebase.game.position import Position as deep_position
    from dobutsu_tb.tablebase.probe import open_tablebase as deep_open

    assert (Position, Move, open_tablebase) == (deep_position, deep_move, deep_open)
    assert set(dobutsu_tb.__all__) <= set(dir(dobutsu_tb))
    with pytest.raises(AttributeError):
        dobutsu_tb.no_such_name  # noqa: B018


def test_moves_python_chess_style():
    from dobutsu_tb import Move, Position, get_variant

    start = Position.start()
    moves = start.legal_moves
    assert sorted(map(str, moves)) == ["Cb3xb2", "Gc4-c3", "Lb4-a3", "Lb4-c3"]
    assert all(isinstance(m, Move) for m in moves)
    after = start.push("Lb4-a3")
    assert after == start.push("b1a2") == start.push(Move.from_text("Lb4-a3")) == start.push(moves[1])
    assert after.text() == "G/gle/-c-/LC-/E-G/-" and start.text() == Position.START_TEXT  # values, not mutated
    assert start.push("Cb3-b2") == start.push("Cb3xb2")  # a capture written with "-" is read too
    assert start.parse_move("b2b3") == Move("C", "b2", "b3", capture=True)
    assert Position.from_text("S/-l-/-L-/---/---/-").push("Lb2xb1") is None  # the lion taken: no position follows
    for text in ("Lb4-a3", "Cb3xb2", "Ca2-a1+", "C*b2"):
        move = Move.from_text(text)
        assert str(move) == text and eval(repr(move)) == move
    assert Move.from_text("C*b2").uci() == "C@b3" and Move.from_text("Ca2-a1+").uci() == "a3a4+"
    five = get_variant("dobutsu-5x3")
    start5 = Position.start(five)
    assert eval(repr(start5)) == start5 and eval(repr(start)) == start
    assert start.mirror().mirror() == start and start.push("Lb4-a3").mirror() == start.mirror().push("Lb4-c3")


def test_one_value_convention(lion_chick_tb):
    from dobutsu_tb import WIN, Position, open_tablebase

    with open_tablebase(lion_chick_tb.path) as tb:
        start = Position.from_text(LION_CHICK)
        moves = tb.probe_moves(start)
        # A position's value is its side to move's; a move's is its player's: the best one's is the position's.
        assert (tb.probe_wdl(start), tb.probe_dtm(start)) == (WIN, 15) == (moves[0].wdl, moves[0].dtm)
        child = start.push(moves[0].move)
        assert (tb.probe_wdl(child), tb.probe_dtm(child)) == (moves[0].after_wdl, moves[0].after_dtm) == (-1, -14)
