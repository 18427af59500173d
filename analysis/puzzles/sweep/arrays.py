"""What the Room Sweeper search knows of a problem, computed once: :func:`problem_arrays`.

Cells are numbered in reading order (``row * width + col``). A set of cells is a *wide bit set*:
a row of ``W = ceil(cells / 64)`` int64 words, cell x being bit ``x % 64`` of word ``x // 64``
(up to 4 words for a 16 x 16 board)::

    word 0: cells 63 .. 0     word 1: cells 127 .. 64    ...    word W-1: the last cells

Cleaners are numbered in the problem's order (boys, girls, robots, each in reading order); a
set of cleaners is an int64 with a bit per cleaner (:data:`MAX_CLEANERS` at most).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dobutsu_tb.analysis.puzzles.sweep.problem import (
    APPLE,
    BIN,
    BOTTLE,
    BOX,
    DIRS,
    DIRTY,
    KINDS,
    MAX_CLEANERS,
    OBSTACLE,
    PUDDLE,
    STEPS,
    Problem,
)
from dobutsu_tb.encoding.bits import WORD_SHIFT

#: Distance to a cell that cannot be reached.
INF = 1 << 20
#: ``need`` of a cell: dirty floor (anyone cleans it), nothing to clean; 0, 1, 2 for a puddle,
#: an apple, a bottle (the kind of cleaner that takes it).
ANY, NOTHING = -1, -2
#: Bits of a word of a wide bit set.
WORD = 1 << WORD_SHIFT


class ProblemArrays(NamedTuple):
    """The problem as arrays for the kernels (see the module docstring).

    Cleaners, in the problem's order: ``kind`` (0 boy, 1 girl, 2 robot), ``start`` cell,
    ``budget``, ``colour`` (``(row + col) % 2`` of the start: two cleaners can only ever arrive
    on one cell together if their colours agree, since each step changes a cell's colour and
    nobody waits).

    Cells: ``nbr`` (n, 4) the neighbour in each direction of DIRS (-1: none), ``dist`` (n, n)
    shortest walks (:data:`INF`: none), ``need`` (:data:`ANY`, :data:`NOTHING` or a kind),
    ``extra`` the walk from an apple or a bottle to the nearest cell where it is dumped,
    ``dump_adj`` (3, n) whether a cleaner of a kind dumps on a cell, ``dump_dist`` (3, n) the
    walk from a cell to such a cell (0 for boys), ``item_of`` the number of the apple or bottle
    on a cell (-1: none) and ``item_cell`` the cell of each, ``can`` (n,) a bit per cleaner
    that can clean the cell from its start within its budget (fetching and dumping an item
    included).

    Wide bit sets (rows of ``W`` int64 words): ``remaining`` what must be cleaned at the start,
    ``block_dirt`` (n, W) the dirty floor cells of each cell's 3x3 block, ``ball`` (n, R + 1, W)
    the cells within walking distance r of a cell (r clamped to R, the largest distance),
    ``pair_meet`` (n_cl, n_cl, W) the cells where two cleaners could arrive together from their
    starts (empty for cleaners of different colours).
    """

    kind: np.ndarray
    start: np.ndarray
    budget: np.ndarray
    colour: np.ndarray
    nbr: np.ndarray
    dist: np.ndarray
    need: np.ndarray
    extra: np.ndarray
    dump_adj: np.ndarray
    dump_dist: np.ndarray
    item_of: np.ndarray
    item_cell: np.ndarray
    can: np.ndarray
    remaining: np.ndarray
    block_dirt: np.ndarray
    ball: np.ndarray
    pair_meet: np.ndarray


def words_for(cells: int) -> int:
    """int64 words of a wide bit set over ``cells`` cells.

    Parameters
    ----------
    cells : int

    Returns
    -------
    int
        ``ceil(cells / 64)``, at least 1.
    """
    return max(1, -(-cells // WORD))


def bitset(cells, words: int) -> np.ndarray:
    """The wide bit set of some cells.

    Parameters
    ----------
    cells : iterable of int
        Cell numbers, each below ``64 * words``.
    words : int

    Returns
    -------
    numpy.ndarray of int64, shape (words,)
    """
    out = np.zeros(words, np.uint64)
    for x in cells:
        out[x // WORD] |= np.uint64(1) << np.uint64(x % WORD)
    return out.view(np.int64)


def _pack(member: np.ndarray, words: int) -> np.ndarray:
    """Wide bit sets from a boolean array whose last axis is over the cells: the same shape, the
    last axis replaced by ``words`` int64 words."""
    *lead, n = member.shape
    padded = np.zeros((*lead, words * WORD), np.bool_)
    padded[..., :n] = member
    packed = np.packbits(padded.reshape(*lead, words, WORD), axis=-1, bitorder="little")
    return np.ascontiguousarray(packed).view("<u8").reshape(*lead, words).astype(np.uint64).view(np.int64)


def _distances(n, nbr, enterable):
    dist = np.full((n, n), INF, np.int64)
    for s in range(n):
        if not enterable[s]:
            continue
        dist[s, s] = 0
        frontier = [s]
        while frontier:
            nxt = []
            for x in frontier:
                for y in nbr[x]:
                    if y >= 0 and dist[s, y] == INF:
                        dist[s, y] = dist[s, x] + 1
                        nxt.append(y)
            frontier = nxt
    return dist


def problem_arrays(problem: Problem) -> ProblemArrays:
    """What the search needs to know of a problem, computed once.

    Parameters
    ----------
    problem : Problem
        As :func:`.parse_problem` accepts it (at most 256 cells and :data:`MAX_CLEANERS`
        cleaners).

    Returns
    -------
    ProblemArrays

    Raises
    ------
    ValueError
        If the problem has more than :data:`MAX_CLEANERS` cleaners.
    """
    if len(problem.cleaners) > MAX_CLEANERS:
        raise ValueError(f"at most {MAX_CLEANERS} cleaners, the problem has {len(problem.cleaners)}")
    w, h = problem.width, problem.height
    n = w * h
    W = words_for(n)
    flat = [t for row in problem.tiles for t in row]
    enterable = [t not in (BIN, BOX, OBSTACLE) for t in flat]
    nbr = -np.ones((n, 4), np.int64)
    for x in range(n):
        r, c = divmod(x, w)
        for d, ch in enumerate(DIRS):
            rr, cc = r + STEPS[ch][0], c + STEPS[ch][1]
            if 0 <= rr < h and 0 <= cc < w and enterable[rr * w + cc]:
                nbr[x, d] = rr * w + cc
    dist = _distances(n, nbr, enterable)

    def adjacent_to(code):
        return np.array([enterable[x] and any(
            0 <= x // w + dr < h and 0 <= x % w + dc < w and flat[(x // w + dr) * w + x % w + dc] == code
            for dr, dc in STEPS.values()) for x in range(n)], np.bool_)

    dump_adj = np.array([np.zeros(n, np.bool_), adjacent_to(BIN), adjacent_to(BOX)])
    dump_dist = np.zeros((3, n), np.int64)
    for k in (1, 2):
        targets = np.flatnonzero(dump_adj[k])
        dump_dist[k] = dist[:, targets].min(axis=1) if targets.size else INF
    need = np.full(n, NOTHING, np.int64)
    extra = np.zeros(n, np.int64)
    for x, t in enumerate(flat):
        if t == DIRTY:
            need[x] = ANY
        elif t in (PUDDLE, APPLE, BOTTLE):
            need[x] = (PUDDLE, APPLE, BOTTLE).index(t)
            extra[x] = dump_dist[need[x], x] if need[x] else 0
    items = [x for x in range(n) if flat[x] in (APPLE, BOTTLE)]
    item_of = -np.ones(n, np.int64)
    item_of[items] = np.arange(len(items))

    kind = np.array([KINDS.index(k) for k, _, _, _ in problem.cleaners], np.int64)
    start = np.array([r * w + c for _, r, c, _ in problem.cleaners], np.int64)
    budget = np.array([b for _, _, _, b in problem.cleaners], np.int64)
    colour = np.array([(r + c) % 2 for _, r, c, _ in problem.cleaners], np.int64)
    n_cl = kind.shape[0]
    can = np.zeros(n, np.int64)
    for i in range(n_cl):
        for x in range(n):
            if (need[x] == ANY or need[x] == kind[i]) and dist[start[i], x] + extra[x] <= budget[i]:
                can[x] |= 1 << i
    blocks = [[(x // w + dr) * w + x % w + dc for dr in (-1, 0, 1) for dc in (-1, 0, 1)
               if 0 <= x // w + dr < h and 0 <= x % w + dc < w and enterable[(x // w + dr) * w + x % w + dc]]
              for x in range(n)]
    block_dirt = np.array([bitset([y for y in b if flat[y] == DIRTY], W) for b in blocks]).reshape(n, W)
    finite = dist[dist < INF]
    radius = int(finite.max()) if finite.size else 0
    ball = _pack(dist[:, None, :] <= np.arange(radius + 1)[None, :, None], W)
    pair_meet = np.zeros((n_cl, n_cl, W), np.int64)
    for a in range(n_cl):
        for b in range(n_cl):
            if a != b and colour[a] == colour[b]:
                r = min(budget[a], budget[b], radius)
                pair_meet[a, b] = ball[start[a], r] & ball[start[b], r]
    remaining = bitset([x for x in range(n) if need[x] != NOTHING], W)
    return ProblemArrays(kind, start, budget, colour, nbr, dist, need, extra, dump_adj, dump_dist, item_of,
                  np.array(items + [0], np.int64)[:max(1, len(items))], can, remaining, block_dirt, ball, pair_meet)
