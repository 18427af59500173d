"""Move generation, unmoves and terminal rules of every shipped variant against the naive reference
(which reads the variant's TOML file itself) and against Fairy-Stockfish."""

import os

import numpy as np
import pytest

import naive
from conftest import DATA, VARIANTS, jitted, plain, random_positions
from dobutsu_tb.tablebase.game.game import game_of
from dobutsu_tb.tablebase.game.layout import CATCH, NONTERMINAL, TRY
from dobutsu_tb.tablebase.game.notation import move_text, uci_move_text
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.game.variant import get_variant

N_RANDOM = 2000


def _game(name):
    return game_of(get_variant(name))


def _perft_cases():
    with open(os.path.join(DATA, "perft.txt")) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                words = line.split()
                text, depth, nodes = words[:3]
                variant = words[3] if len(words) > 3 else "dobutsu"
                yield pytest.param(variant, text, int(depth), int(nodes), id=f"{variant} {text} d{depth}")


@pytest.mark.parametrize("variant,text,depth,nodes", list(_perft_cases()))
def test_perft(variant, text, depth, nodes):
    v = get_variant(variant)
    assert _game(variant).perft(Position.from_text(text, v).state(), depth) == nodes


@pytest.mark.parametrize("variant", VARIANTS)
def test_naive_perft_agrees_on_start(variant):
    game = naive.load_game(variant)
    start = naive.NaivePosition.from_text(game.start, game)
    v = get_variant(variant)
    ours = [_game(variant).perft(Position.start(v).state(), d) for d in range(1, 5)]
    assert [naive.perft(start, d) for d in range(1, 5)] == ours


def test_naive_codes_are_the_rules_codes():
    """The naive reference derives the Huffman codes its own way; for the standard game they must
    be the codes the rules give literally."""
    assert naive.STANDARD.codes == naive.STANDARD_CODES


def _kernel_children(pos):
    """[(move text, canonical child key or None after a royal capture)] from the jitted kernels."""
    g = pos.game
    k = jitted(g)
    board, hand = (np.int64(w) for w in pos.state())
    buf = np.empty(g.layout["MAX_MOVES"], np.int64)
    n = k.gen_moves(board, hand, buf)
    out = []
    for m in buf[:n]:
        child = k.make_move(board, hand, m)
        both = g.has_both_royals((int(child[0]), int(child[1])))
        out.append((move_text(pos, int(m)), int(k.canonical_key(*child)) if both else None))
    return sorted(out)


def _naive_children(npos):
    out = []
    for text, child in naive.moves(npos):
        if naive.royal_square(child, child.turn) is None:  # the royal piece was captured
            out.append((text, None))
        else:
            out.append((text, naive.canonical_key(child)))
    return sorted(out)


@pytest.mark.parametrize("variant", VARIANTS)
def test_moves_match_naive_reference(variant):
    checked = 0
    for pos, npos in random_positions(N_RANDOM, seed=1, variant=variant):
        g = pos.game
        assert g.game_over(pos.state()) == naive.game_over(npos), pos
        if naive.game_over(npos):
            assert len(g.legal_moves(pos.state())) == 0
            continue
        assert _kernel_children(pos) == _naive_children(npos), pos
        checked += 1
    assert checked > N_RANDOM // 2


@pytest.mark.parametrize("variant", VARIANTS)
def test_keys_match_naive_reference(variant):
    for pos, npos in random_positions(N_RANDOM, seed=2, variant=variant):
        assert pos.key() == naive.canonical_key(npos), pos


@pytest.mark.parametrize("variant", VARIANTS)
def test_classify_matches_naive_reference(variant):
    seen = set()
    names = {NONTERMINAL: None, CATCH: "catch", TRY: "try"}
    for pos, npos in random_positions(N_RANDOM, seed=3, variant=variant):
        got = names[pos.game.classify(pos.state())]
        assert got == naive.classify(npos), pos
        seen.add(got)
    assert seen == {None, "catch", "try"}


@pytest.mark.parametrize("variant", VARIANTS)
def test_move_count_bounds(variant):
    worst_moves = worst_unmoves = 0
    g = _game(variant)
    for pos, _ in random_positions(N_RANDOM, seed=4, variant=variant):
        worst_moves = max(worst_moves, len(g.legal_moves(pos.state())))
        worst_unmoves = max(worst_unmoves, len(g.predecessors(pos.state())))
    assert 0 < worst_moves <= g.layout["MAX_MOVES"]
    assert 0 < worst_unmoves <= g.layout["MAX_UNMOVES"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_unmoves_invert_moves(variant):
    """Every child's predecessors include the parent, and every predecessor has the child."""
    for pos, npos in random_positions(500, seed=5, variant=variant):
        g = pos.game
        state = pos.state()
        if g.game_over(state):
            continue
        parent = pos.key()
        for m in g.legal_moves(state):
            child = g.play(state, int(m))
            if not g.has_both_royals(child):
                continue
            preds = {g.key_of(p) for p in g.predecessors(child)}
            assert parent in preds, (pos, move_text(pos, int(m)))
        # The other way round: each predecessor of this position has it as a child.
        me = pos.key()
        for pred in g.predecessors(state):
            if g.game_over(pred):
                continue
            ppos = Position.from_state(pred, 1 - pos.turn, pos.variant)
            parent_pos = naive.NaivePosition.from_text(ppos.text(), npos.game)
            kids = {naive.canonical_key(c) for _, c in naive.moves(parent_pos)
                    if naive.royal_square(c, c.turn) is not None}
            assert me in kids, (pos, ppos)


@pytest.mark.parametrize("variant", VARIANTS)
def test_nonterminal_unmoves_are_the_nonterminal_predecessors(variant):
    """Pruned unmove generation equals generating every unmove and dropping the terminal ones."""
    g = _game(variant)
    k = jitted(g)
    size = g.layout["MAX_UNMOVES"]
    full, full_h, pruned, pruned_h = (np.empty(size, np.int64) for _ in range(4))
    kept = dropped = 0
    for pos, _ in random_positions(N_RANDOM, seed=8, variant=variant):
        b, h = (np.int64(w) for w in pos.state())
        if k.game_over(b, h) or k.classify(b, h) != NONTERMINAL:
            continue
        n = k.gen_unmoves(b, h, full, full_h, False)
        want = [(full[i], full_h[i]) for i in range(n)
                if g.has_both_royals((int(full[i]), int(full_h[i]))) and k.classify(full[i], full_h[i]) == NONTERMINAL]
        m = k.gen_unmoves(b, h, pruned, pruned_h, True)
        assert list(zip(pruned[:m], pruned_h[:m])) == want, pos
        kept, dropped = kept + m, dropped + n - m
    assert kept > 500 and dropped > 500


@pytest.mark.parametrize("variant", VARIANTS)
def test_parent_keys_are_the_canonical_nonterminal_predecessors(variant):
    """parent_keys joins keys from rank tables: it must equal canonicalising each non-terminal
    predecessor, in order; run jitted and as plain Python."""
    g = _game(variant)
    k = jitted(g)
    size = g.layout["MAX_UNMOVES"]
    boards, hands, keys = (np.empty(size, np.int64) for _ in range(3))
    total = 0
    for pos, _ in random_positions(N_RANDOM, seed=10, variant=variant):
        b, h = (np.int64(w) for w in pos.state())
        if k.game_over(b, h) or k.classify(b, h) != NONTERMINAL:
            continue
        n = k.gen_unmoves(b, h, boards, hands, True)
        want = [int(k.canonical_key(boards[i], hands[i])) for i in range(n)]
        assert [int(x) for x in keys[: k.parent_keys(b, h, keys)]] == want, pos
        if total < 400:
            assert [int(x) for x in keys[: plain(g).parent_keys(int(b), int(h), keys)]] == want, pos
        total += n
    assert total > 500


def _fsf_variant(name):
    import pyffish

    names = {"dobutsu": "dobutsu", "dobutsu-5x3": "dobutsu5x3", "dobutsu-nodrops": "dobutsunodrops",
             "dobutsu-no-far-drop": "dobutsunofardrop", "dobutsu-3x3": "dobutsu3x3", "dobutsu-6x3": "dobutsu6x3",
             "dobutsu-4x4": "dobutsu4x4"}
    if names[name] not in pyffish.variants():
        with open(os.path.join(DATA, "fairy-variants.ini")) as f:
            pyffish.load_variant_config(f.read())
    return names[name]


@pytest.mark.parametrize("variant", VARIANTS)
def test_perft_matches_fairy_stockfish(variant):
    """Perft from each shipped variant's start to depth 4 is Fairy-Stockfish's (variants.ini in
    tests/data), counted live with pyffish: within 4 plies no lion reaches a far rank, where the
    two rule sets differ."""
    pyffish = pytest.importorskip("pyffish")
    fsf = _fsf_variant(variant)

    def perft(fen, depth):
        moves = pyffish.legal_moves(fsf, fen, [])
        if depth == 1:
            return len(moves)
        return sum(perft(pyffish.get_fen(fsf, fen, [m]), depth - 1) for m in moves)

    start = Position.start(get_variant(variant))
    assert [perft(start.fen(), d) for d in range(1, 5)] == [_game(variant).perft(start.state(), d) for d in range(1, 5)]


@pytest.mark.parametrize("variant", VARIANTS)
def test_moves_match_fairy_stockfish(variant):
    """Our legal moves are Fairy-Stockfish's (variants.ini in tests/data) wherever the rule sets
    agree: neither lion on a far rank (Fairy-Stockfish ends the game at once when one gets there;
    our try waits a ply), and the game not over."""
    pyffish = pytest.importorskip("pyffish")
    fsf = _fsf_variant(variant)
    compared = 0
    g = _game(variant)
    for pos, npos in random_positions(6 * N_RANDOM, seed=6, variant=variant):
        if naive.game_over(npos) or naive.classify(npos) is not None:
            continue
        if any(letter == npos.game.royal and sq[1] in (1, npos.game.ranks) for sq, (_, letter) in npos.board.items()):
            continue
        ours = {uci_move_text(pos, int(m)) for m in g.legal_moves(pos.state())}
        assert ours == set(pyffish.legal_moves(fsf, pos.fen(), [])), pos
        compared += 1
    assert compared > 150


@pytest.mark.parametrize("variant", VARIANTS)
def test_plain_kernels_match_jitted(variant):
    """The game's kernels run as plain Python (probing) and jitted (building): the same answers."""
    g = _game(variant)
    plain_k, jit = plain(g), jitted(g)
    size = g.layout["MAX_UNMOVES"]
    pb, jb, jh = [0] * size, np.empty(size, np.int64), np.empty(size, np.int64)
    for pos, _ in random_positions(300, seed=7, variant=variant):
        b, h = pos.state()
        nb, nh = np.int64(b), np.int64(h)
        for name in ("encode_state", "canonical_key"):
            assert int(getattr(plain_k, name)(b, h)) == int(getattr(jit, name)(nb, nh)), (pos, name)
        for name in ("mirror_state", "flip_state"):
            assert tuple(map(int, getattr(plain_k, name)(b, h))) == tuple(map(int, getattr(jit, name)(nb, nh)))
        k = int(plain_k.encode_state(b, h))
        assert tuple(map(int, plain_k.decode_key(k))) == tuple(map(int, jit.decode_key(np.int64(k)))) == (b, h)
        assert bool(plain_k.game_over(b, h)) == bool(jit.game_over(nb, nh))
        if plain_k.game_over(b, h):
            continue
        assert plain_k.classify(b, h) == jit.classify(nb, nh)
        n = plain_k.gen_moves(b, h, pb)
        assert n == jit.gen_moves(nb, nh, jb)
        assert pb[:n] == list(jb[:n])
        for m in pb[:n]:
            assert tuple(map(int, plain_k.make_move(b, h, m))) == tuple(map(int, jit.make_move(nb, nh, m)))
        for pruned in (False, True):
            out_b, out_h = np.empty(size, np.int64), np.empty(size, np.int64)
            n = plain_k.gen_unmoves(b, h, out_b, out_h, pruned)
            assert n == jit.gen_unmoves(nb, nh, jb, jh, pruned)
            assert list(out_b[:n]) == list(jb[:n]) and list(out_h[:n]) == list(jh[:n])


@pytest.mark.parametrize("variant", VARIANTS)
def test_child_keys_match_the_moves_and_classes_of_the_children(variant):
    """child_keys classifies children from the parent's attack map: it must agree with making each
    move and classifying the child; run jitted and as plain Python."""
    g = _game(variant)
    jit = jitted(g)
    moves, keys, classes = (np.empty(g.layout["MAX_MOVES"], np.int64) for _ in range(3))
    seen = set()
    for pos, _ in random_positions(N_RANDOM, seed=9, variant=variant):
        b, h = (np.int64(w) for w in pos.state())
        if jit.game_over(b, h) or jit.classify(b, h) != NONTERMINAL:
            continue
        for child_keys in (jit.child_keys, plain(g).child_keys):
            n = child_keys(b, h, moves, keys, classes)
            assert list(moves[:n]) == list(g.legal_moves((int(b), int(h)))), pos
            for k in range(n):
                cb, ch = jit.make_move(b, h, moves[k])
                assert keys[k] == jit.canonical_key(cb, ch), (pos, k)
                assert classes[k] == jit.classify(cb, ch), (pos, move_text(pos, int(moves[k])))
                seen.add(int(classes[k]))
            if len(seen) < 3:
                continue
    assert seen == {NONTERMINAL, CATCH, TRY}


def test_make_move_rejects_illegal_move():
    with pytest.raises(ValueError):
        _game("dobutsu").play(Position.start().state(), 0)


@pytest.mark.parametrize("line,why", [
    (["Cb3-c2"], "Cb3-c2: a C on b3 cannot move to c2"),  # no promotion hint for a chick's wrong step
    (["Lb4-a3", "Cb2-a2"], "Cb2-a2: a C on b2 cannot move to a2"),
    (["Cb3xb2+"], "Cb3xb2+: only a piece reaching its promotion zone promotes; write Cb3xb2"),
    (["Cb3-b2+"], "Cb3-b2+: only a piece reaching its promotion zone promotes; write Cb3xb2"),
    (["Lb4-a3+"], "Lb4-a3+: a lion never promotes; write Lb4-a3"),
    (["Cb3xb2", "Lb1-a2", "Cb2-b1"], "Cb2-b1: a chick that reaches its promotion zone promotes; write Cb2-b1+"),
])
def test_an_illegal_move_says_why_truly(line, why):
    """The hostile round: every illegal chick step was told to write '+', and so was a capture
    that had it already; a lion's move with '+' was 'cannot move'."""
    from dobutsu_tb.tablebase.game.notation import IllegalMoveError, parse_move, play_move

    position = Position.start()
    for move in line[:-1]:
        position = play_move(position, parse_move(position, move))
    with pytest.raises(IllegalMoveError) as caught:
        parse_move(position, line[-1])
    assert str(caught.value) == why
