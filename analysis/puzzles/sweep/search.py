"""The Room Sweeper solver: routes that leave the room clean, or a proof that none exist.

Two searches on the shared depth-first driver (:func:`dobutsu_tb.encoding.search.depth_first`),
whose callbacks are the ``_step_*`` and ``_route_*`` functions below:

- without meetings, cleaner by cleaner: meetings only clean more, so without them the cleaners
  interact only through what they clean, and their routes can be chosen one after another, a
  step or the end of the route at each depth;
- with meetings, all cleaners step by step: at each time step every active cleaner picks a
  direction or stops, the combinations enumerated like an odometer.

Both keep the board as int64 bit sets (dirt, puddles, apples, bottles), prune with all-pairs
distances (:func:`_prune`: a dirty cell no cleaner can still reach, with the 3x3 slack of a
meeting, an item its cleaner cannot fetch and dump in time, more dirt than steps left) and try
cleaning moves first; the root's choices are dealt out to the threads.
"""

from __future__ import annotations

from dataclasses import dataclass
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
    OBSTACLE,
    PUDDLE,
    STEPS,
    Problem,
)
from dobutsu_tb.encoding.bits import popcount
from dobutsu_tb.encoding.jit import njit, njit_callback
from dobutsu_tb.encoding.search import depth_first

#: Distance to a cell that cannot be reached.
INF = 1 << 20
#: The option code of stopping (0..3 are the directions of DIRS).
STOP = 4


class _Board(NamedTuple):
    """What the searches know of the problem (:func:`_tables`): per cleaner its kind (0 boy,
    1 girl, 2 robot), start cell and budget; per cell its neighbours (-1: none), tile code, the
    distances to every cell, to the nearest cell next to a bin and to a box, whether it is next
    to a bin or a box, and the cells of its 3x3 block (-1 padded)."""

    kind: np.ndarray
    start: np.ndarray
    budget: np.ndarray
    nbr: np.ndarray
    dist: np.ndarray
    bin_adj: np.ndarray
    box_adj: np.ndarray
    bin_dist: np.ndarray
    box_dist: np.ndarray
    block: np.ndarray
    tiles: np.ndarray


@njit
def _bit(i):
    return np.int64(1) << i


@njit
def _cleans(masks, level, kind, cell):
    """True when a cleaner of ``kind`` stepping onto ``cell`` cleans something there
    (``masks[level]``: dirty floor, puddles, apples, bottles)."""
    b = _bit(cell)
    return (masks[level, 0] & b) != 0 or (masks[level, 1 + kind] & b) != 0


@njit
def _prune(n_cl, kind, t, pos, active, rem, hold, dirty, puddle, apple, bottle, dist, bin_dist, box_dist,
           block, meetings):
    """True when some item can no longer be cleaned in time (lower bounds for every cleaner):
    each step cleans at most one cell of its own (so the puddles, apples, bottles and, without
    meetings, all the dirt must not outnumber the steps left of those who can clean them), and
    each item must be within reach of a cleaner who can clean it."""
    steps0 = steps1 = steps2 = 0  # steps left of the boys, girls, robots
    for i in range(n_cl):
        if active[t, i]:
            if kind[i] == 0:
                steps0 += rem[i]
            elif kind[i] == 1:
                steps1 += rem[i]
            else:
                steps2 += rem[i]
    if popcount(puddle) > steps0 or popcount(apple) > steps1 or popcount(bottle) > steps2:
        return True
    if not meetings and popcount(dirty) + popcount(puddle) + popcount(apple) + popcount(bottle) \
            > steps0 + steps1 + steps2:
        return True
    for i in range(n_cl):
        if hold[t, i] > 0:
            d = bin_dist[pos[t, i]] if kind[i] == 1 else box_dist[pos[t, i]]
            if d > (rem[i] if active[t, i] else 0):
                return True
    for x in range(dist.shape[0]):
        b = _bit(x)
        if dirty & b:
            ok = False
            for i in range(n_cl):
                r = rem[i] if active[t, i] else 0
                if dist[pos[t, i], x] <= r:
                    ok = True
                    break
                if meetings:
                    for k in range(block.shape[1]):
                        y = block[x, k]
                        if y >= 0 and dist[pos[t, i], y] <= r:
                            ok = True
                            break
                    if ok:
                        break
            if not ok:
                return True
        elif (puddle | apple | bottle) & b:
            need = 0 if puddle & b else 1 if apple & b else 2
            ok = False
            for i in range(n_cl):
                if kind[i] != need:
                    continue
                r = rem[i] if active[t, i] else 0
                extra = 0 if need == 0 else bin_dist[x] if need == 1 else box_dist[x]
                if dist[pos[t, i], x] + extra <= r:
                    ok = True
                    break
            if not ok:
                return True
    return False


@njit
def _is_clean(masks, level):
    return masks[level, 0] == 0 and masks[level, 1] == 0 and masks[level, 2] == 0 and masks[level, 3] == 0


@njit
def _step_onto(board, masks, hold, dst, j, to):
    """Cleaner ``j`` steps onto cell ``to``: masks and holds of row ``dst`` (already copies of the
    row before) get what it cleans, picks up and dumps there."""
    kind = board.kind[j]
    b = _bit(to)
    if masks[dst, 0] & b:
        masks[dst, 0] &= ~b
    elif masks[dst, 1] & b and kind == 0:
        masks[dst, 1] &= ~b
    elif masks[dst, 2] & b and kind == 1:
        masks[dst, 2] &= ~b
        hold[dst, j] += 1
    elif masks[dst, 3] & b and kind == 2:
        masks[dst, 3] &= ~b
        hold[dst, j] += 1
    if hold[dst, j] and ((kind == 1 and board.bin_adj[to]) or (kind == 2 and board.box_adj[to])):
        hold[dst, j] = 0


@njit
def _cleaning_first(board, masks, level, j, at, came_from, out, k):
    """Append cleaner ``j``'s directions from ``at`` into ``out[k:]``, not straight back to
    ``came_from``: those onto something it cleans first. Returns the new length."""
    for pass_ in range(2):
        for d in range(4):
            to = board.nbr[at, d]
            if to < 0 or to == came_from:
                continue
            if _cleans(masks, level, board.kind[j], to) == (pass_ == 0):
                out[k] = d
                k += 1
    return k


# --- with meetings: all cleaners step by step ------------------------------------------------


class _StepContext(NamedTuple):
    """One thread's search with meetings; row t holds the state after t time steps."""

    board: _Board
    pos: np.ndarray  # (T + 2, cleaners)
    prev: np.ndarray  # the cell each came from (-1: none yet)
    active: np.ndarray  # still moving
    hold: np.ndarray  # items held
    masks: np.ndarray  # (T + 2, 4): dirt, puddles, apples, bottles
    choice: np.ndarray  # (T + 2, cleaners): the option each takes at step t
    opts: np.ndarray  # (T + 2, cleaners, 5): each cleaner's options at step t, best first
    nopt: np.ndarray
    rem: np.ndarray  # (cleaners,) scratch: steps left
    out_moves: np.ndarray  # (T + 1, cleaners): the solution's direction per step, -1 none
    result: np.ndarray  # [steps of the solution found, or -1]


@njit_callback
def _step_goal(ctx, t):
    if not _is_clean(ctx.masks, t):
        return False
    for i in range(ctx.pos.shape[1]):
        if ctx.hold[t, i]:
            return False
    return True


@njit_callback
def _found(ctx, t):
    ctx.result[0] = t
    return True


@njit_callback
def _step_prune(ctx, t):
    b = ctx.board
    n_cl = b.kind.shape[0]
    any_active = False
    for i in range(n_cl):
        ctx.rem[i] = b.budget[i] - t
        any_active |= ctx.active[t, i]
    m = ctx.masks
    return not any_active or _prune(n_cl, b.kind, t, ctx.pos, ctx.active, ctx.rem, ctx.hold, m[t, 0], m[t, 1],
                                    m[t, 2], m[t, 3], b.dist, b.bin_dist, b.box_dist, b.block, True)


@njit_callback
def _step_options(ctx, t):
    """Each cleaner's options, best first: steps onto something it can clean, other steps,
    stopping; a cleaner that has stopped only stays. The node's choices are the combinations
    but the one in which nobody moves (the last), in odometer order (the last cleaner's option
    changes fastest)."""
    n_cl = ctx.pos.shape[1]
    combinations = 1
    for i in range(n_cl):
        k = 0
        if ctx.active[t, i]:
            k = _cleaning_first(ctx.board, ctx.masks, t, i, ctx.pos[t, i], ctx.prev[t, i], ctx.opts[t, i], 0)
        ctx.opts[t, i, k] = STOP
        ctx.nopt[t, i] = k + 1
        combinations = min(combinations * (k + 1), 1 << 62)
    return combinations - 1


@njit_callback
def _step_apply(ctx, t, k):
    """Combination ``k`` at step t: every cleaner's option, the level t + 1 they make, and the
    meetings (two movers arriving on one cell clean its 3x3 block's dirty floor)."""
    b = ctx.board
    n_cl = ctx.pos.shape[1]
    for j in range(n_cl - 1, -1, -1):
        ctx.choice[t, j] = k % ctx.nopt[t, j]
        k //= ctx.nopt[t, j]
    for q in range(4):
        ctx.masks[t + 1, q] = ctx.masks[t, q]
    for j in range(n_cl):
        c = ctx.opts[t, j, ctx.choice[t, j]]
        ctx.hold[t + 1, j] = ctx.hold[t, j]
        if c == STOP:
            ctx.pos[t + 1, j] = ctx.pos[t, j]
            ctx.prev[t + 1, j] = ctx.prev[t, j]
            ctx.active[t + 1, j] = False
            ctx.out_moves[t, j] = -1
            continue
        to = b.nbr[ctx.pos[t, j], c]
        ctx.pos[t + 1, j] = to
        ctx.prev[t + 1, j] = ctx.pos[t, j]
        ctx.active[t + 1, j] = t + 1 < b.budget[j]
        ctx.out_moves[t, j] = c
        _step_onto(b, ctx.masks, ctx.hold, t + 1, j, to)
    for j in range(n_cl):  # meetings: two movers arriving on one cell
        if ctx.out_moves[t, j] < 0:
            continue
        for i in range(j + 1, n_cl):
            if ctx.out_moves[t, i] >= 0 and ctx.pos[t + 1, i] == ctx.pos[t + 1, j]:
                for q in range(b.block.shape[1]):
                    y = b.block[ctx.pos[t + 1, j], q]
                    if y >= 0:
                        ctx.masks[t + 1, 0] &= ~_bit(y)
    return True


# --- without meetings: cleaner by cleaner ----------------------------------------------------


class _RouteContext(NamedTuple):
    """One thread's search without meetings; row d holds the state at depth d, where cleaner
    ``cur[d]`` has taken ``step[d]`` steps and the cleaners before it have finished."""

    board: _Board
    pos: np.ndarray  # (D + 1, cleaners)
    active: np.ndarray
    hold: np.ndarray
    masks: np.ndarray  # (D + 1, 4)
    cur: np.ndarray  # (D + 1,): the cleaner whose route is being chosen
    step: np.ndarray  # its steps so far
    prev: np.ndarray  # the cell it came from (-1 at its start)
    opts: np.ndarray  # (D + 1, 5): its options, best first
    choice: np.ndarray  # (D + 1,): the option taken
    rem: np.ndarray  # (cleaners,) scratch: steps left
    out_moves: np.ndarray  # (T + 1, cleaners): out_moves[k, i], the k-th step of cleaner i, -1 past its end
    result: np.ndarray  # [rows of out_moves filled, or -1]


@njit_callback
def _route_goal(ctx, d):
    return ctx.cur[d] >= ctx.pos.shape[1] and _is_clean(ctx.masks, d)


@njit_callback
def _route_found(ctx, d):
    """Replay the choices into routes."""
    out = ctx.out_moves
    for a in range(out.shape[0]):
        for b in range(out.shape[1]):
            out[a, b] = -1
    longest = 0
    for e in range(d):
        c = ctx.opts[e, ctx.choice[e]]
        if c < STOP:
            out[ctx.step[e], ctx.cur[e]] = c
            longest = max(longest, ctx.step[e] + 1)
    ctx.result[0] = longest
    return True


@njit_callback
def _route_prune(ctx, d):
    """Every route chosen but the room not clean; or the bounds of :func:`_prune`, which see the
    current cleaner's steps left and the later cleaners' whole budgets."""
    b = ctx.board
    n_cl = b.kind.shape[0]
    i = ctx.cur[d]
    if i >= n_cl:
        return True
    for j in range(n_cl):
        ctx.rem[j] = b.budget[j] if j > i else (b.budget[j] - ctx.step[d] if j == i else 0)
    m = ctx.masks
    return _prune(n_cl, b.kind, d, ctx.pos, ctx.active, ctx.rem, ctx.hold, m[d, 0], m[d, 1], m[d, 2], m[d, 3],
                  b.dist, b.bin_dist, b.box_dist, b.block, False)


@njit_callback
def _route_options(ctx, d):
    """The current cleaner's steps (cleaning ones first), then ending its route, allowed once
    its items are dumped."""
    i = ctx.cur[d]
    k = 0
    if ctx.step[d] < ctx.board.budget[i]:
        k = _cleaning_first(ctx.board, ctx.masks, d, i, ctx.pos[d, i], ctx.prev[d], ctx.opts[d], 0)
    if ctx.hold[d, i] == 0:
        ctx.opts[d, k] = STOP
        k += 1
    return k


@njit_callback
def _route_apply(ctx, d, k):
    i = ctx.cur[d]
    ctx.choice[d] = k
    c = ctx.opts[d, k]
    for j in range(ctx.pos.shape[1]):
        ctx.pos[d + 1, j] = ctx.pos[d, j]
        ctx.active[d + 1, j] = ctx.active[d, j]
        ctx.hold[d + 1, j] = ctx.hold[d, j]
    for q in range(4):
        ctx.masks[d + 1, q] = ctx.masks[d, q]
    if c == STOP:
        ctx.active[d + 1, i] = False
        ctx.cur[d + 1] = i + 1
        ctx.step[d + 1] = 0
        ctx.prev[d + 1] = -1
    else:
        to = ctx.board.nbr[ctx.pos[d, i], c]
        ctx.pos[d + 1, i] = to
        ctx.cur[d + 1] = i
        ctx.step[d + 1] = ctx.step[d] + 1
        ctx.prev[d + 1] = ctx.pos[d, i]
        _step_onto(ctx.board, ctx.masks, ctx.hold, d + 1, i, to)
    return True


# --- the solver ------------------------------------------------------------------------------


@dataclass
class SweepResult:
    """Answer of :func:`solve`: routes (or None when none exist) and whether meetings were needed
    by the search that found them."""

    routes: list | None
    with_meetings: bool


def _tables(problem: Problem) -> _Board:
    w, h = problem.width, problem.height
    n = w * h
    flat = [t for row in problem.tiles for t in row]
    enterable = [t not in (BIN, BOX, OBSTACLE) for t in flat]
    nbr = -np.ones((n, 4), np.int64)
    for x in range(n):
        r, c = divmod(x, w)
        for d, ch in enumerate(DIRS):
            dr, dc = STEPS[ch]
            rr, cc = r + dr, c + dc
            if 0 <= rr < h and 0 <= cc < w and enterable[rr * w + cc]:
                nbr[x, d] = rr * w + cc
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

    def adjacent_to(code):
        adj = np.zeros(n, np.bool_)
        for x in range(n):
            r, c = divmod(x, w)
            adj[x] = enterable[x] and any(0 <= r + dr < h and 0 <= c + dc < w and flat[(r + dr) * w + c + dc] == code
                                          for dr, dc in STEPS.values())
        return adj

    bin_adj, box_adj = adjacent_to(BIN), adjacent_to(BOX)
    bin_dist = np.array([min([dist[x, y] for y in range(n) if bin_adj[y]] or [INF]) for x in range(n)], np.int64)
    box_dist = np.array([min([dist[x, y] for y in range(n) if box_adj[y]] or [INF]) for x in range(n)], np.int64)
    block = -np.ones((n, 9), np.int64)
    for x in range(n):
        r, c = divmod(x, w)
        k = 0
        for rr in range(r - 1, r + 2):
            for cc in range(c - 1, c + 2):
                if 0 <= rr < h and 0 <= cc < w and enterable[rr * w + cc]:
                    block[x, k] = rr * w + cc
                    k += 1
    kinds = np.array([KINDS.index(k) for k, _, _, _ in problem.cleaners], np.int64)
    start = np.array([r * problem.width + c for _, r, c, _ in problem.cleaners], np.int64)
    budget = np.array([b for _, _, _, b in problem.cleaners], np.int64)
    return _Board(kinds, start, budget, nbr, dist, bin_adj, box_adj, bin_dist, box_dist, block,
                  np.array(flat, np.int64))


def _root_masks(board: _Board, rows: int) -> np.ndarray:
    """(rows, 4) int64 bit sets, row 0 holding the problem's dirt, puddles, apples, bottles."""
    masks = np.zeros((rows, 4), np.int64)
    for q, code in enumerate((DIRTY, PUDDLE, APPLE, BOTTLE)):
        for x in np.flatnonzero(board.tiles == code):
            masks[0, q] |= np.int64(1) << np.int64(x)
    return masks


def _step_context(board: _Board) -> _StepContext:
    n_cl, rows = board.kind.shape[0], int(board.budget.max()) + 2
    pos = np.empty((rows, n_cl), np.int64)
    pos[0] = board.start
    prev = np.full((rows, n_cl), -1, np.int64)
    active = np.zeros((rows, n_cl), np.bool_)
    active[0] = board.budget > 0
    return _StepContext(board, pos, prev, active, np.zeros((rows, n_cl), np.int64), _root_masks(board, rows),
                        np.zeros((rows, n_cl), np.int64), np.zeros((rows, n_cl, 5), np.int64),
                        np.zeros((rows, n_cl), np.int64), np.zeros(n_cl, np.int64),
                        np.full((rows - 1, n_cl), -1, np.int64), np.full(1, -1, np.int64))


def _route_context(board: _Board) -> _RouteContext:
    n_cl = board.kind.shape[0]
    rows = 2 + int((board.budget + 1).sum())
    pos = np.empty((rows, n_cl), np.int64)
    pos[0] = board.start
    active = np.zeros((rows, n_cl), np.bool_)
    active[0] = True
    return _RouteContext(board, pos, active, np.zeros((rows, n_cl), np.int64), _root_masks(board, rows),
                         np.zeros(rows, np.int64), np.zeros(rows, np.int64), np.full(rows, -1, np.int64),
                         np.zeros((rows, 5), np.int64), np.zeros(rows, np.int64), np.zeros(n_cl, np.int64),
                         np.full((int(board.budget.max()) + 1, n_cl), -1, np.int64), np.full(1, -1, np.int64))


def solve(problem: Problem, threads: int = 2) -> SweepResult:
    """Routes that clean the room, or a proof that none exist (``routes`` None).

    First searched without meetings, cleaner by cleaner (tight bounds; any solution found is
    valid, since meetings only clean more), then with meetings, all cleaners step by step. Each
    search deals the root's choices out to ``threads`` threads.
    """
    board = _tables(problem)
    searches = ((False, _route_context, (_route_goal, _route_found, _route_prune, _route_options, _route_apply)),
                (True, _step_context, (_step_goal, _found, _step_prune, _step_options, _step_apply)))
    for meetings, make, callbacks in searches:
        contexts = [make(board) for _ in range(threads)]
        depth_first(contexts, *callbacks, max_depth=contexts[0].pos.shape[0] - 1)
        for ctx in contexts:
            steps = int(ctx.result[0])
            if steps >= 0:
                routes = ["".join(DIRS[ctx.out_moves[t, i]] for t in range(steps) if ctx.out_moves[t, i] >= 0)
                          for i in range(len(board.kind))]
                return SweepResult(routes, meetings)
    return SweepResult(None, True)
