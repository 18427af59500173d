"""Move generation, unmoves and terminal rules against the naive reference and Fairy-Stockfish."""

import os

import numpy as np
import pytest

import naive
from conftest import DATA, random_positions
from dobutsu_tb.tablebase.game import kernels, rules, unmoves
from dobutsu_tb.tablebase.game.notation import move_text, uci_move_text
from dobutsu_tb.tablebase.game.position import Position

N_RANDOM = 3000


def _perft_cases():
    with open(os.path.join(DATA, "perft.txt")) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                text, depth, nodes = line.split()
                yield pytest.param(text, int(depth), int(nodes), id=f"{text} d{depth}")


@pytest.mark.parametrize("text,depth,nodes", list(_perft_cases()))
def test_perft(text, depth, nodes):
    assert rules.perft(Position.from_text(text).state(), depth) == nodes


def test_naive_perft_agrees_on_start():
    start = naive.NaivePosition.from_text(Position.START_TEXT)
    assert [naive.perft(start, d) for d in range(1, 5)] == [4, 17, 123, 976]


def _kernel_children(pos):
    """{move text: canonical child key} from the jitted kernels."""
    state = np.int64(pos.state())
    buf = np.empty(rules.MAX_MOVES, np.int64)
    n = kernels.gen_moves(state, buf)
    return sorted((move_text(pos, int(m)), int(kernels.canonical_key(kernels.make_move(state, m))))
                  for m in buf[:n])


def _naive_children(npos):
    out = []
    for text, child in naive.moves(npos):
        if naive.lion_square(child, child.turn) is None:  # the lion was captured
            out.append((text, None))
        else:
            out.append((text, naive.canonical_key(child)))
    return sorted(out)


def test_moves_match_naive_reference():
    checked = 0
    for pos, npos in random_positions(N_RANDOM, seed=1):
        assert kernels.game_over(pos.state()) == naive.game_over(npos), pos
        if naive.game_over(npos):
            assert len(rules.legal_moves(pos.state())) == 0
            continue
        kernel = _kernel_children(pos)
        ref = _naive_children(npos)
        assert [t for t, _ in kernel] == [t for t, _ in ref], pos
        # Children that still have both lions must have the same canonical key.
        for (t, k), (_, r) in zip(kernel, ref):
            if r is not None:
                assert k == r, (pos, t)
        checked += 1
    assert checked > N_RANDOM // 2


def test_keys_match_naive_reference():
    for pos, npos in random_positions(N_RANDOM, seed=2):
        assert pos.key() == naive.canonical_key(npos), pos


def test_classify_matches_naive_reference():
    seen = set()
    for pos, npos in random_positions(N_RANDOM, seed=3):
        got = {rules.NONTERMINAL: None, rules.CATCH: "catch", rules.TRY: "try"}[kernels.classify(pos.state())]
        assert got == naive.classify(npos), pos
        seen.add(got)
    assert seen == {None, "catch", "try"}


def test_move_count_bounds():
    worst_moves = worst_unmoves = 0
    for pos, _ in random_positions(N_RANDOM, seed=4):
        worst_moves = max(worst_moves, len(rules.legal_moves(pos.state())))
        worst_unmoves = max(worst_unmoves, len(unmoves.predecessors(pos.state())))
    assert 0 < worst_moves <= rules.MAX_MOVES
    assert 0 < worst_unmoves <= unmoves.MAX_UNMOVES


def test_unmoves_invert_moves():
    """Every child's predecessors include the parent, and every predecessor has the child."""
    for pos, npos in random_positions(1000, seed=5):
        state = pos.state()
        if kernels.game_over(state):
            continue
        parent = int(kernels.canonical_key(state))
        for m in rules.legal_moves(state):
            child = rules.play(state, int(m))
            if kernels.game_over(child) and not _both_lions(child):
                continue
            preds = {int(kernels.canonical_key(p)) for p in unmoves.predecessors(child)}
            assert parent in preds, (pos, move_text(pos, int(m)))
        # The other way round: each predecessor of this position has it as a child.
        me = pos.key()
        for pred in unmoves.predecessors(state):
            if kernels.game_over(int(pred)):
                continue
            ppos = Position.from_state(int(pred), 1 - pos.turn)
            kids = {naive.canonical_key(c) for _, c in naive.moves(naive.NaivePosition.from_text(ppos.text()))
                    if naive.lion_square(c, c.turn) is not None}
            assert me in kids, (pos, ppos)


def test_nonterminal_unmoves_are_the_nonterminal_predecessors():
    """Pruned unmove generation equals generating every unmove and dropping the terminal ones."""
    full, pruned = np.empty(unmoves.MAX_UNMOVES, np.int64), np.empty(unmoves.MAX_UNMOVES, np.int64)
    kept = dropped = 0
    for pos, _ in random_positions(N_RANDOM, seed=8):
        s = np.int64(pos.state())
        if kernels.game_over(s) or kernels.classify(s) != rules.NONTERMINAL:
            continue
        n = kernels.gen_unmoves(s, full, False)
        want = [p for p in full[:n] if _both_lions(int(p)) and kernels.classify(p) == rules.NONTERMINAL]
        m = kernels.gen_unmoves(s, pruned, True)
        assert list(pruned[:m]) == want, pos
        kept, dropped = kept + m, dropped + n - m
    assert kept > 1000 and dropped > 1000


def test_parent_keys_are_the_canonical_nonterminal_predecessors():
    """parent_keys joins keys from rank tables: it must equal canonicalising each non-terminal
    predecessor, in order; run jitted and as plain Python."""
    states, keys = np.empty(unmoves.MAX_UNMOVES, np.int64), np.empty(unmoves.MAX_UNMOVES, np.int64)
    total = 0
    for pos, _ in random_positions(N_RANDOM, seed=10):
        s = np.int64(pos.state())
        if kernels.game_over(s) or kernels.classify(s) != rules.NONTERMINAL:
            continue
        n = kernels.gen_unmoves(s, states, True)
        want = [int(kernels.canonical_key(p)) for p in states[:n]]
        assert [int(k) for k in keys[: kernels.parent_keys(s, keys)]] == want, pos
        if total < 400:
            assert [int(k) for k in keys[: unmoves.parent_keys(s, keys)]] == want, pos
        total += n
    assert total > 5000


def _both_lions(state):
    nibbles = [(state >> (4 * i)) & 15 for i in range(12)]
    return 3 in nibbles and 11 in nibbles


def test_moves_match_fairy_stockfish():
    """Our legal moves, written as UCI strings, are pyffish's (promotions, drops, squares)."""
    pyffish = pytest.importorskip("pyffish")
    compared = 0
    for pos, npos in random_positions(4 * N_RANDOM, seed=6):
        # Compare where neither program can see a finished game: both lions stand off the far ranks.
        if naive.game_over(npos) or naive.classify(npos) is not None:
            continue
        if any(letter == "L" and sq[1] in (1, 4) for sq, (_, letter) in npos.board.items()):
            continue
        ours = sorted(uci_move_text(pos, int(m)) for m in rules.legal_moves(pos.state()))
        assert ours == sorted(pyffish.legal_moves("dobutsu", pos.fen(), [])), pos
        compared += 1
    assert compared > 300


def test_plain_kernels_match_jitted():
    """The game's kernels run as plain Python (probing) and jitted (building): the same answers."""
    from dobutsu_tb.tablebase.game import key

    plain_buf, jit_buf = np.empty(unmoves.MAX_UNMOVES, np.int64), np.empty(unmoves.MAX_UNMOVES, np.int64)
    for pos, _ in random_positions(300, seed=7):
        s = pos.state()
        for name in ("encode_state", "canonical_key", "mirror_state", "flip_state"):
            assert int(getattr(key, name)(s)) == int(getattr(kernels, name)(np.int64(s))), (pos, name)
        k = int(key.encode_state(s))
        assert int(key.decode_key(k)) == int(kernels.decode_key(np.int64(k))) == s
        assert bool(rules.game_over(s)) == bool(kernels.game_over(np.int64(s)))
        if rules.game_over(s):
            continue
        assert rules.classify(s) == kernels.classify(np.int64(s))
        n = rules.gen_moves(s, plain_buf)
        assert n == kernels.gen_moves(np.int64(s), jit_buf)
        assert list(plain_buf[:n]) == list(jit_buf[:n])
        for m in plain_buf[:n]:
            assert int(rules.make_move(s, m)) == int(kernels.make_move(np.int64(s), m))
        for pruned in (False, True):
            n = unmoves.gen_unmoves(s, plain_buf, pruned)
            assert n == kernels.gen_unmoves(np.int64(s), jit_buf, pruned)
            assert list(plain_buf[:n]) == list(jit_buf[:n])


def test_child_keys_match_the_moves_and_classes_of_the_children():
    """child_keys classifies children from the parent's attack map: it must agree with making each
    move and classifying the child; run jitted and as plain Python."""
    moves, keys, classes = (np.empty(rules.MAX_MOVES, np.int64) for _ in range(3))
    seen = set()
    for pos, _ in random_positions(N_RANDOM, seed=9):
        s = np.int64(pos.state())
        if kernels.game_over(s) or kernels.classify(s) != rules.NONTERMINAL:
            continue
        for child_keys in (kernels.child_keys, rules.child_keys):
            n = child_keys(s, moves, keys, classes)
            ref_moves = rules.legal_moves(int(s))
            assert list(moves[:n]) == list(ref_moves), pos
            for k in range(n):
                child = kernels.make_move(s, moves[k])
                assert keys[k] == kernels.canonical_key(child), (pos, k)
                assert classes[k] == kernels.classify(child), (pos, move_text(pos, int(moves[k])))
                seen.add(int(classes[k]))
    assert seen == {rules.NONTERMINAL, rules.CATCH, rules.TRY}


def test_make_move_rejects_illegal_move():
    with pytest.raises(ValueError):
        rules.play(Position.start().state(), 0)
