"""The search drivers against their plain-Python twins (tests/naive_search.py) on small toy
puzzles, and the same answers with one thread and with two."""

from typing import NamedTuple

import numpy as np
import pytest

import naive_search
from dobutsu_tb.encoding.jit import njit, njit_callback
from dobutsu_tb.encoding.search import (
    bfs_shortest,
    bfs_wide_levels,
    chain_levels,
    depth_first,
    dfs_solve,
    enumerate_levels,
    run_threads,
    split_depth_for,
)
from dobutsu_tb.encoding.search.fingerprints import (
    FINGERPRINT_SEED1,
    FINGERPRINT_SEED2,
    FingerprintSet,
    fingerprint_add,
    fingerprint_find,
    fingerprint_insert,
)

# --- a toy puzzle over int64 states: add allowed items to a set, one per move ---------------------
# params: [number of items, goal state, salt]; item i may join set s when a hash of (s, i, salt)
# is 0 or 1 mod 5, so many sets are dead ends and the levels (set sizes) are disjoint.

ITEMS = 10


@njit
def _allowed(s, i, salt):
    return ((s * 2654435761 + (i + 1) * 40503 + salt * 977) >> 5) % 5 < 2


@njit
def _grow(state, out, params):
    n = 0
    for i in range(params[0]):
        if not (state >> i) & 1 and _allowed(state, i, params[2]):
            out[n] = state | (np.int64(1) << i)
            n += 1
    return n


@njit
def _at_goal(state, params):
    return state == params[1]


@njit
def _same(state, params):
    return state


# Start at 1 (keys are positive): item 0 is in from the start.
SALTS = [0, 1, 4, 5, 7, 10]


def params_for(salt, goal=(1 << ITEMS) - 1):
    return np.array([ITEMS, goal, salt], np.int64)


@pytest.mark.parametrize("salt", SALTS)
def test_dfs_solve_matches_twin(salt):
    params = params_for(salt)
    want = naive_search.dfs_solve(1, _grow, _at_goal, params, ITEMS, ITEMS)
    assert dfs_solve(1, _grow, _at_goal, _same, params, max_depth=ITEMS, max_moves=ITEMS) == want
    # A goal that is out of reach: both say so.
    params = params_for(salt, goal=1 << 3)  # item 0 can never leave
    assert dfs_solve(1, _grow, _at_goal, _same, params, max_depth=ITEMS, max_moves=ITEMS) is None
    assert naive_search.dfs_solve(1, _grow, _at_goal, params, ITEMS, ITEMS) is None


def test_twins_see_solvable_and_unsolvable_toys():
    """The toys are not trivial: some salts reach the full set, some do not."""
    found = [naive_search.dfs_solve(1, _grow, _at_goal, params_for(s), ITEMS, ITEMS) is not None for s in SALTS]
    assert any(found) and not all(found)


# A graph on 1..97 with repeated states at different depths, for breadth-first search.
@njit
def _hop(state, out, params):
    m = params[0]
    out[0] = (state * 3 + 1) % m + 1
    out[1] = (state * 5 + 2) % m + 1
    out[2] = (state + 7) % m + 1
    return 3


@pytest.mark.parametrize("goal", [2, 13, 50, 96])
def test_bfs_shortest_matches_twin(goal):
    params = np.array([97, goal], np.int64)
    result = bfs_shortest(1, _hop, _at_goal, params, max_moves=3)
    moves, count, sizes = naive_search.bfs_shortest(1, _hop, _at_goal, params, 3)
    assert (result.moves, result.count, result.level_sizes) == (moves, count, sizes)
    path = result.path
    assert path[0] == 1 and path[-1] == goal
    assert all(b in naive_search.successors(_hop, a, params, 3) for a, b in zip(path, path[1:]))


def test_bfs_shortest_unreachable():
    params = params_for(0, goal=1 << 3)
    result = bfs_shortest(1, _grow, _at_goal, params, max_moves=ITEMS)
    assert (result.path, result.count) == (None, 0)
    assert result.level_sizes == naive_search.bfs_shortest(1, _grow, _at_goal, params, ITEMS)[2]


@pytest.mark.parametrize("salt", SALTS)
@pytest.mark.parametrize("threads", [1, 2])
def test_enumerate_levels_matches_twin(salt, threads):
    params = params_for(salt)
    got = []
    sizes = enumerate_levels(1, _grow, params, ITEMS, threads=threads,
                             on_level=lambda lv: got.append(dict(zip(lv.states.tolist(), lv.paths.tolist()))))
    want = naive_search.enumerate_levels(1, _grow, params, ITEMS)
    assert got == want
    assert sizes == [len(level) for level in want]


# --- the same toy with chained moves: adding item i is a step from i - 1 (i - 2 for odd salts) to i


@njit
def _grow_steps(state, out, src, dst, params):
    n = 0
    for i in range(params[0]):
        if not (state >> i) & 1 and _allowed(state, i, params[2]):
            out[n] = state | (np.int64(1) << i)
            src[n] = (i + params[0] - 1 - params[2] % 2) % params[0]
            dst[n] = i
            n += 1
    return n


@njit
def _same_tag(state, tag, params):
    return state, tag


@pytest.mark.parametrize("salt", SALTS)
@pytest.mark.parametrize("threads", [1, 2])
def test_chain_levels_matches_twin(salt, threads):
    params = params_for(salt)
    got = []
    sizes = chain_levels(1, _grow_steps, _same_tag, params, ITEMS, threads=threads, on_level=lambda lv: got.append(
        {s: (m, {t for t in range(ITEMS) if (b >> t) & 1}) for s, m, b in zip(lv.states.tolist(), lv.moves.tolist(),
                                                                               lv.last.tolist())}))
    want = naive_search.chain_levels(1, _grow_steps, params, ITEMS)
    assert got == want and sizes == [len(level) for level in want]
    assert any(m < bin(s).count("1") - 1 for level in want for s, (m, _) in level.items())  # some moves chain steps


def test_chain_levels_keep_and_limit():
    params = params_for(1)
    full = []
    chain_levels(1, _grow_steps, _same_tag, params, ITEMS, on_level=full.append)
    got = []
    chain_levels(1, _grow_steps, _same_tag, params, ITEMS, on_level=got.append, limit=2,
                 keep=lambda lv: lv.states % 3 != 0)
    assert all((lv.moves <= 2).all() and (lv.states % 3 != 0).all() for lv in got[1:])
    assert len(got) <= len(full)
    with pytest.raises(ValueError):
        chain_levels(0, _grow_steps, _same_tag, params, ITEMS)


# --- a toy over two-word states: the set and a running checksum, each move adds an item ----------


@njit
def _wide_moves(a, salt):
    m = 0
    for i in range(6):
        if not (a >> i) & 1 and _allowed(a, i, salt):
            m |= np.int64(1) << i
    return m


def make_wide(salt):
    @njit
    def count_children(level, counts):
        for i in range(level.shape[0]):
            m = _wide_moves(level[i, 0], salt)
            n = 0
            while m:
                m &= m - 1
                n += 1
            counts[i] = n

    @njit
    def fill_children(level, offsets, out, parent):
        for i in range(level.shape[0]):
            k = offsets[i]
            for j in range(6):
                if (_wide_moves(level[i, 0], salt) >> j) & 1:
                    out[k, 0] = level[i, 0] | (np.int64(1) << j)
                    out[k, 1] = (level[i, 1] * 31 + j) % 7
                    out[k, 2] = j
                    parent[k] = i
                    k += 1

    def children(state):
        a, b = state
        return [((a | (1 << j), (b * 31 + j) % 7), j) for j in range(6) if (int(_wide_moves(a, salt)) >> j) & 1]

    return count_children, fill_children, children


@pytest.mark.parametrize("salt", [0, 1, 2, 4])
def test_bfs_wide_levels_matches_twin(salt):
    count_children, fill_children, children = make_wide(salt)

    def goal(state):
        return state[0] == 63 and state[1] == 3

    result = bfs_wide_levels([0, 0], count_children, fill_children,
                             lambda states: (states[:, 0] == 63) & (states[:, 1] == 3), max_depth=6)
    depth, count, sizes = naive_search.bfs_wide_levels((0, 0), children, goal, 6)
    assert (result.depth, result.count, result.level_sizes) == (depth, count, sizes)
    if depth is not None:
        rows = [(0, 0)] + [tuple(int(v) for v in row) for row in result.path]
        assert goal(rows[-1]) and len(rows) == depth + 1
        assert all((b, label) in children(a) for a, b, label in zip(rows, rows[1:], result.labels))


# --- the generic depth-first driver: n queens ----------------------------------------------------


class Queens(NamedTuple):
    col: np.ndarray  # col[r]: the column of the queen of row r
    stop_at_first: bool
    found: np.ndarray  # [solutions]
    first: np.ndarray  # the first solution's columns


@njit_callback
def _q_goal(ctx, d):
    return d == ctx.col.shape[0]


@njit_callback
def _q_found(ctx, d):
    if ctx.found[0] == 0:
        for r in range(ctx.col.shape[0]):
            ctx.first[r] = ctx.col[r]
    ctx.found[0] += 1
    return ctx.stop_at_first


@njit_callback
def _q_prune(ctx, d):
    return False


@njit_callback
def _q_options(ctx, d):
    return ctx.col.shape[0]


@njit_callback
def _q_place(ctx, d, k):
    for r in range(d):
        c = ctx.col[r]
        if c == k or abs(c - k) == d - r:
            return False
    ctx.col[d] = k
    return True


def queens(n, stop_at_first):
    return Queens(np.zeros(n, np.int64), stop_at_first, np.zeros(1, np.int64), np.full(n, -1, np.int64))


CALLBACKS = (_q_goal, _q_found, _q_prune, _q_options, _q_place)


@pytest.mark.parametrize("n,solutions", [(4, 2), (5, 10), (6, 4), (7, 40), (8, 92)])
def test_depth_first_counts_match_twin_with_one_and_two_threads(n, solutions):
    twin = queens(n, False)
    stopped, nodes = naive_search.depth_first(twin, *CALLBACKS, max_depth=n)
    assert not stopped and twin.found[0] == solutions
    one = [queens(n, False)]
    assert depth_first(one, *CALLBACKS, max_depth=n) == (False, nodes)
    assert one[0].first.tolist() == twin.first.tolist()
    two = [queens(n, False), queens(n, False)]
    stopped, nodes2 = depth_first(two, *CALLBACKS, max_depth=n)
    assert not stopped and sum(int(c.found[0]) for c in two) == solutions
    assert nodes2 == nodes + 1  # each thread visits the root
    # Thread k took the first queen's columns k, k + 2, ...: its first solution starts there.
    assert all(c.first[0] % 2 == k for k, c in enumerate(two) if c.found[0])


@pytest.mark.parametrize("n", [4, 6, 8])
def test_depth_first_stops_at_the_first_solution(n):
    twin = queens(n, True)
    assert naive_search.depth_first(twin, *CALLBACKS, max_depth=n)[0]
    one = [queens(n, True)]
    stopped, nodes = depth_first(one, *CALLBACKS, max_depth=n)
    assert stopped and one[0].found[0] == 1 and one[0].first.tolist() == twin.first.tolist()
    two = [queens(n, True), queens(n, True)]
    assert depth_first(two, *CALLBACKS, max_depth=n)[0]
    assert 1 <= sum(int(c.found[0]) for c in two) <= 2  # the other thread stops at once


def test_depth_first_max_depth_cuts_the_tree():
    ctx = [queens(6, False)]
    stopped, nodes = depth_first(ctx, *CALLBACKS, max_depth=3)
    twin = queens(6, False)
    assert (stopped, nodes) == naive_search.depth_first(twin, *CALLBACKS, max_depth=3)
    assert ctx[0].found[0] == 0


def test_depth_first_and_pool_errors():
    with pytest.raises(ValueError, match="one context per thread"):
        depth_first([], *CALLBACKS, max_depth=3)
    with pytest.raises(ValueError, match="max_depth"):
        depth_first([queens(4, False)], *CALLBACKS, max_depth=-1)
    with pytest.raises(ValueError, match=">= 1"):
        run_threads(lambda k: k, 0)
    assert run_threads(lambda k: k * k, 3) == [0, 1, 4]

    def fail(k):
        if k == 1:
            raise KeyError("share 1")
        return k

    with pytest.raises(KeyError, match="share 1"):
        run_threads(fail, 2)


# --- depth_first with tasks at a split depth and a table of dead nodes ---------------------------


class QueensDead(NamedTuple):
    col: np.ndarray
    stop_at_first: bool
    found: np.ndarray
    first: np.ndarray
    keys: np.ndarray  # a FingerprintSet's arrays: the nodes with no solution below
    checks: np.ndarray
    count: np.ndarray
    limit: int
    asked: np.ndarray  # [nodes found dead in the table]


@njit_callback
def _q_hashes(ctx, d):
    """The hashes of what the rest of the search depends on: the depth, the columns taken and
    both families of diagonals taken."""
    n = ctx.col.shape[0]
    cols = up = down = 0
    for r in range(d):
        c = ctx.col[r]
        cols |= 1 << c
        up |= 1 << (c - r + n)
        down |= 1 << (c + r)
    h1, h2 = fingerprint_add(FINGERPRINT_SEED1, FINGERPRINT_SEED2, d)
    for word in (cols, up, down):
        h1, h2 = fingerprint_add(h1, h2, word)
    return h1, h2


@njit_callback
def _q_is_dead(ctx, d):
    h1, h2 = _q_hashes(ctx, d)
    dead = fingerprint_find(ctx.keys, ctx.checks, h1, h2)
    ctx.asked[0] += dead
    return dead


@njit_callback
def _q_mark_dead(ctx, d):
    h1, h2 = _q_hashes(ctx, d)
    fingerprint_insert(ctx.keys, ctx.checks, ctx.count, ctx.limit, h1, h2)


def queens_dead(n, stop_at_first, table):
    return QueensDead(np.zeros(n, np.int64), stop_at_first, np.zeros(1, np.int64), np.full(n, -1, np.int64),
                      table.keys, table.checks, table.count, table.limit, np.zeros(1, np.int64))


@pytest.mark.parametrize("n,solutions", [(6, 4), (8, 92), (9, 352)])
@pytest.mark.parametrize("threads", [1, 2])
def test_depth_first_with_tasks_and_dead_nodes_counts_every_solution(n, solutions, threads):
    """Nodes with no solution below are remembered and skipped when met again (the counts are
    unchanged, and some nodes are skipped), the nodes of the split depth are dealt out as tasks."""
    table = FingerprintSet(1 << 16)
    contexts = [queens_dead(n, False, table) for _ in range(threads)]
    split = split_depth_for(contexts[0], _q_goal, _q_prune, _q_options, _q_place, n, 8 * threads)
    assert 1 <= split < n
    stopped, nodes = depth_first(contexts, *CALLBACKS, max_depth=n, is_dead=_q_is_dead, mark_dead=_q_mark_dead,
                                 split=split)
    assert not stopped and sum(int(c.found[0]) for c in contexts) == solutions
    assert len(table) > 0 and sum(int(c.asked[0]) for c in contexts) > 0
    first = [queens_dead(n, True, FingerprintSet(1 << 16)) for _ in range(threads)]
    assert depth_first(first, *CALLBACKS, max_depth=n, is_dead=_q_is_dead, mark_dead=_q_mark_dead, split=split)[0]
    with pytest.raises(ValueError, match="split"):
        depth_first(contexts, *CALLBACKS, max_depth=n, split=n + 1)


@njit
def _fp_run(keys, checks, count, limit, words, insert):
    out = np.zeros(words.shape[0], np.bool_)
    for k in range(words.shape[0]):
        h1, h2 = fingerprint_add(FINGERPRINT_SEED1, FINGERPRINT_SEED2, words[k, 0])
        h1, h2 = fingerprint_add(h1, h2, words[k, 1])
        out[k] = (fingerprint_insert(keys, checks, count, limit, h1, h2) if insert
                  else fingerprint_find(keys, checks, h1, h2))
    return out


def test_fingerprint_set_matches_a_python_set():
    """Insert and find agree with a Python set of the states; inserts stop at the capacity."""
    rng = np.random.default_rng(3)
    words = rng.integers(-(1 << 63), 1 << 63, size=(3000, 2), dtype=np.int64)
    words[1500:, 0] = words[:1500, 0]  # states sharing their first word
    fs = FingerprintSet(2000)
    added = _fp_run(fs.keys, fs.checks, fs.count, fs.limit, words[:2000], True)
    assert added.all() and len(fs) == 2000 and fs.nbytes == 2 * fs.keys.nbytes
    assert not _fp_run(fs.keys, fs.checks, fs.count, fs.limit, words[2000:], True).any()  # full
    found = _fp_run(fs.keys, fs.checks, fs.count, fs.limit, words, False)
    assert found[:2000].all() and not found[2000:].any()
    with pytest.raises(ValueError):
        FingerprintSet(0)
