"""The Room Sweeper solver: routes that leave the room clean, or a proof that none exist.

:func:`solve` answers with one of two exact engines, or by default both in turns: the SAT solver
of :mod:`.sat`, and the search of this module, described below.

In the search, the routes are chosen cleaner after cleaner (the next one picked by
:func:`~.bounds.next_cleaner`, the most constrained), a step or the end of the route at each
depth, on the shared depth-first driver
(:func:`dobutsu_tb.encoding.search.depth_first`), whose callbacks are the ``_route_*`` functions
below. The room is a wide bit set of the cells still to clean (:mod:`.arrays`). Choosing routes
one after another is exact, because the cleaners interact only through what they clean:

- dirty floor and puddles are cleaned by whoever comes, in any order;
- an apple or bottle goes to whoever of its kind steps on it first in time (the lowest number on
  a tie, as the simulator plays it): each item remembers when and by whom it was taken and
  whether that cleaner dumped it afterwards, and a later route that reaches it earlier takes it
  over (and must dump it in turn). A route may end holding items, provided that later routes
  take each of them over; holding fewer items changes no one's dumps;
- a meeting happens when a cleaner steps onto a cell at the time step at which a cleaner whose
  route is already chosen stepped onto it (``traj`` holds the chosen routes): the dirty floor
  of its 3x3 block is cleaned then. Since only dirty floor is cleaned that way, the order of
  cleaning does not matter.

The search runs first without meetings (tight bounds; every solution found is valid, as
meetings only clean more), then, if none is found, with meetings, which is complete. Bounds
(:mod:`.bounds`) prune a node that cannot be finished; a table of dead nodes
(:class:`~dobutsu_tb.encoding.search.FingerprintSet`, keyed on everything the rest of the
search depends on) skips a node met before by another way; the nodes at a shallow depth are dealt
out to the threads one at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from dobutsu_tb.analysis.puzzles.sweep.arrays import INF, ProblemArrays, problem_arrays
from dobutsu_tb.analysis.puzzles.sweep.bounds import (
    NO_MEETINGS,
    UNLIMITED,
    hopeless,
    next_cleaner,
    state_hashes,
    unplaced,
)
from dobutsu_tb.analysis.puzzles.sweep.problem import DIRS, Problem
from dobutsu_tb.analysis.puzzles.sweep.sat import SatRounds, sat_size, solve_sat
from dobutsu_tb.analysis.puzzles.sweep.simulator import simulate
from dobutsu_tb.encoding.bits import lowest_bit_word, wide_copy, wide_empty, wide_has, wide_remove
from dobutsu_tb.encoding.config import THREADS
from dobutsu_tb.encoding.jit import njit_callback
from dobutsu_tb.encoding.search import depth_first, split_depth_for
from dobutsu_tb.encoding.search.fingerprints import FingerprintSet, fingerprint_find, fingerprint_insert

#: Dead nodes a search remembers at most (16 bytes each, over the load factor).
SWEEP_DEAD_STATES = 1 << 24
#: Tasks per thread a search is cut into (the nodes of the shallowest depth that has that many
#: are dealt out one at a time).
SWEEP_TASKS = 32
#: The option code of ending the route (0..3 are the directions of DIRS).
STOP = 4
#: The searches :func:`solve` runs in turn: without meetings, with the bounds allowing for at most
#: 2 and 4 meetings (quick when few meetings are needed), then the complete search.
SWEEP_PHASES = (NO_MEETINGS, 2, 4, UNLIMITED)


class _Context(NamedTuple):
    """One thread's search; row d holds the node at depth d, where the cleaner ``cur[d]`` has
    taken ``step[d]`` steps and the cleaners of ``placed[d]`` (a set) have finished their routes
    (``cur[d]`` is the number of cleaners once everyone has)."""

    arrays: ProblemArrays
    cap: int  # meetings: NO_MEETINGS, a cap on those the bounds allow for, or UNLIMITED
    room: np.ndarray  # (D + 1, W): the cells still to clean
    placed: np.ndarray  # (D + 1,)
    cur: np.ndarray
    step: np.ndarray
    pos: np.ndarray
    prev: np.ndarray  # the cell it came from (-1 at its start)
    hold: np.ndarray  # items it holds, not dumped yet
    met: np.ndarray  # meetings so far that cleaned something
    taken_at: np.ndarray  # (D + 1, items): when each apple or bottle was taken (INF: not yet)
    taken_by: np.ndarray  # (D + 1, items): by whom
    dumped: np.ndarray  # (D + 1, items): whether that cleaner dumped it afterwards
    opts: np.ndarray  # (D + 1, 5): the options, best first
    traj: np.ndarray  # (cleaners, T + 1): the cell of each cleaner after s steps (its chosen route)
    length: np.ndarray  # (cleaners,): the length of each chosen route
    scratch: np.ndarray  # (T + 5, W) bit sets for the hashes (rows 1..T) and the bounds (the last 4)
    counts: np.ndarray  # (cleaners + 6,) scratch for the bounds
    cells: np.ndarray  # (cells,) scratch for the bounds
    dead_keys: np.ndarray  # the table of dead nodes (FingerprintSet's arrays)
    dead_checks: np.ndarray
    dead_count: np.ndarray
    dead_limit: int
    found: np.ndarray  # [cleaner, steps, placed] of the node where a solution was found
    visits: np.ndarray  # (cleaners + 1,): nodes searched per current cleaner (the last: none)
    budget: np.ndarray  # [nodes this thread may search (0: no limit), 1 once the limit was hit]


@njit_callback
def _route_goal(ctx, d):
    """The room is clean and every item taken was dumped (the current cleaner stops, the rest
    stay)."""
    if not wide_empty(ctx.room, d):
        return False
    for q in range(ctx.dumped.shape[1]):
        if ctx.taken_at[d, q] < INF and not ctx.dumped[d, q]:
            return False
    return True


@njit_callback
def _route_found(ctx, d):
    ctx.found[0] = ctx.cur[d]
    ctx.found[1] = ctx.step[d]
    ctx.found[2] = ctx.placed[d]
    return True


@njit_callback
def _route_prune(ctx, d):
    """The bounds; also every node once the thread's node budget is spent (the search then
    answers nothing)."""
    i = ctx.cur[d]
    ctx.visits[i] += 1
    if ctx.budget[0] > 0 and ctx.visits[i] & 1023 == 0:
        if ctx.visits.sum() > ctx.budget[0]:
            ctx.budget[1] = 1
    return ctx.budget[1] != 0 or i == ctx.arrays.kind.shape[0] or hopeless(ctx, d)


@njit_callback
def _route_options(ctx, d):
    """The current cleaner's steps (those onto something it cleans first), then ending its route
    (with items still held only if a later route can take them over: the bounds check)."""
    arrays = ctx.arrays
    i = ctx.cur[d]
    k = 0
    if ctx.step[d] < arrays.budget[i]:
        at = ctx.pos[d]
        for pass_ in range(2):
            for c in range(4):
                to = arrays.nbr[at, c]
                if to < 0 or to == ctx.prev[d]:
                    continue
                q = arrays.need[to]
                cleans = wide_has(ctx.room, d, to) and (q < 0 or q == arrays.kind[i])
                if cleans == (pass_ == 0):
                    ctx.opts[d, k] = c
                    k += 1
    ctx.opts[d, k] = STOP
    return k + 1


@njit_callback
def _route_apply(ctx, d, k):
    arrays = ctx.arrays
    i = ctx.cur[d]
    c = ctx.opts[d, k]
    wide_copy(ctx.room, d, ctx.room, d + 1)
    for q in range(ctx.taken_at.shape[1]):
        ctx.taken_at[d + 1, q] = ctx.taken_at[d, q]
        ctx.taken_by[d + 1, q] = ctx.taken_by[d, q]
        ctx.dumped[d + 1, q] = ctx.dumped[d, q]
    if c == STOP:
        ctx.length[i] = ctx.step[d]
        ctx.placed[d + 1] = ctx.placed[d] | (1 << i)
        ctx.cur[d + 1] = arrays.kind.shape[0]
        ctx.step[d + 1] = 0
        ctx.pos[d + 1] = 0
        rest = unplaced(ctx, d + 1)
        if rest:
            ctx.cur[d + 1] = next_cleaner(ctx, d + 1, rest)
            ctx.pos[d + 1] = arrays.start[ctx.cur[d + 1]]
        ctx.prev[d + 1] = -1
        ctx.hold[d + 1] = 0
        ctx.met[d + 1] = ctx.met[d]
        return True
    to = arrays.nbr[ctx.pos[d], c]
    s = ctx.step[d] + 1  # the time step of this step
    kind = arrays.kind[i]
    ctx.placed[d + 1] = ctx.placed[d]
    ctx.cur[d + 1] = i
    ctx.step[d + 1] = s
    ctx.pos[d + 1] = to
    ctx.prev[d + 1] = ctx.pos[d]
    ctx.hold[d + 1] = ctx.hold[d]
    ctx.met[d + 1] = ctx.met[d]
    ctx.traj[i, s] = to
    q = arrays.need[to]
    item = arrays.item_of[to]
    me = i
    if wide_has(ctx.room, d, to):
        if q < 0 or q == kind:
            wide_remove(ctx.room, d + 1, to)
            if item >= 0:
                ctx.hold[d + 1] += 1
                ctx.taken_at[d + 1, item] = s
                ctx.taken_by[d + 1, item] = me
                ctx.dumped[d + 1, item] = False
    elif q == kind and item >= 0:  # an item of its kind, taken by a cleaner before: taken over if later
        if ctx.taken_at[d, item] > s or (ctx.taken_at[d, item] == s and ctx.taken_by[d, item] > me):
            ctx.hold[d + 1] += 1
            ctx.taken_at[d + 1, item] = s
            ctx.taken_by[d + 1, item] = me
            ctx.dumped[d + 1, item] = False
    if ctx.hold[d + 1] and arrays.dump_adj[kind, to]:
        ctx.hold[d + 1] = 0
        for q in range(ctx.dumped.shape[1]):
            if ctx.taken_by[d + 1, q] == me:
                ctx.dumped[d + 1, q] = True
    if ctx.cap != NO_MEETINGS:
        placed = ctx.placed[d]
        while placed:
            j = lowest_bit_word(placed)
            placed &= placed - 1
            if ctx.length[j] >= s and ctx.traj[j, s] == to:
                cleaned = False
                for w in range(ctx.room.shape[1]):
                    cleaned |= (ctx.room[d + 1, w] & arrays.block_dirt[to, w]) != 0
                    ctx.room[d + 1, w] &= ~arrays.block_dirt[to, w]
                ctx.met[d + 1] += cleaned
                break
    return True


@njit_callback
def _route_is_dead(ctx, d):
    h1, h2 = state_hashes(ctx, d)
    return fingerprint_find(ctx.dead_keys, ctx.dead_checks, h1, h2)


@njit_callback
def _route_mark_dead(ctx, d):
    h1, h2 = state_hashes(ctx, d)
    fingerprint_insert(ctx.dead_keys, ctx.dead_checks, ctx.dead_count, ctx.dead_limit, h1, h2)


# --- the solver ------------------------------------------------------------------------------


@dataclass
class SweepResult:
    """Answer of :func:`solve`.

    Attributes
    ----------
    routes : list of str or None
        One route per cleaner in the problem's order, or None when no routes clean the room.
    with_meetings : bool
        The search: found by a search with meetings (the one without them found nothing). The
        SAT solver: the routes need their meetings (without them, dirt would be left).
    nodes : int
        Nodes searched, all searches together; the SAT solver's decisions.
    dead : int
        Dead nodes remembered in the tables of dead nodes (0 for the SAT solver).
    complete : bool
        False when the search gave up (``max_nodes``): no routes, and no proof either.
    visits : list of int
        Nodes searched per cleaner whose route was being chosen, in the last search.
    engine : str
        ``"search"`` or ``"sat"``: which answered.
    conflicts : int
        The SAT solver's conflicts (0 for the search).
    """

    routes: list | None
    with_meetings: bool
    nodes: int = 0
    dead: int = 0
    complete: bool = True
    visits: list = field(default_factory=list)
    engine: str = "search"
    conflicts: int = 0


#: The engines of :func:`solve`.
ENGINES = ("auto", "sat", "search")
#: ``auto`` runs the SAT solver on formulas of at most this many arrival variables, and the search
#: on larger ones: budgets long for the board, where the search finds routes at once and the
#: formula is slow to solve (``data/sweep/long-16x16.txt``: four cleaners of 300 steps, 146,684
#: arrival variables; the hardest problem we tried that the search does not finish, 16 x 16 with
#: six cleaners of 37 steps, has 19,111). docs/puzzles.md says how each engine fares.
AUTO_SAT_ARRIVALS = 50_000
#: ``auto``'s first round: this many conflicts of the SAT solver, then this many nodes of the
#: search; each round after gives both four times as many. The SAT solver is strong where many
#: meetings are needed (q64), the search at counting and long sweeps (one boy sweeping an empty
#: 10 x 10 room in 99 steps), so neither waits long for the other.
AUTO_FIRST_ROUND = (20_000, 1_000_000)


def _context(arrays: ProblemArrays, cap: int, dead: FingerprintSet, max_nodes: int) -> _Context:
    n_cl = arrays.kind.shape[0]
    rows = 2 + int((arrays.budget + 1).sum())
    horizon = int(arrays.budget.max(initial=0))
    W = arrays.remaining.shape[0]
    n_items = arrays.item_cell.shape[0]
    room = np.zeros((rows, W), np.int64)
    room[0] = arrays.remaining
    traj = np.full((n_cl, horizon + 1), -1, np.int64)
    traj[:, 0] = arrays.start
    int_rows = [np.zeros(rows, np.int64) for _ in range(7)]  # placed, cur, step, pos, prev, hold, met
    ctx = _Context(arrays, cap, room, *int_rows[:4], np.full(rows, -1, np.int64), *int_rows[5:],
                   np.full((rows, n_items), INF, np.int64), np.full((rows, n_items), -1, np.int64),
                   np.ones((rows, n_items), np.bool_), np.zeros((rows, 5), np.int64), traj,
                   np.zeros(n_cl, np.int64), np.zeros((horizon + 5, W), np.int64), np.zeros(n_cl + 6, np.int64),
                   np.zeros(arrays.need.shape[0], np.int64), dead.keys, dead.checks, dead.count, dead.limit,
                   np.full(3, -1, np.int64), np.zeros(n_cl + 1, np.int64), np.array([max_nodes, 0], np.int64))
    ctx.cur[0] = next_cleaner(ctx, 0, (1 << n_cl) - 1)
    ctx.pos[0] = arrays.start[ctx.cur[0]]
    return ctx


def _routes(arrays: ProblemArrays, ctx: _Context) -> list[str]:
    """The routes of a context that found a solution, in the problem's order of cleaners."""
    last, steps = int(ctx.found[0]), int(ctx.found[1])
    routes = []
    for i in range(arrays.kind.shape[0]):
        n = steps if i == last else int(ctx.length[i]) if (int(ctx.found[2]) >> i) & 1 else 0
        cells = ctx.traj[i, : n + 1]
        routes.append("".join(DIRS[list(arrays.nbr[a]).index(b)] for a, b in zip(cells[:-1], cells[1:])))
    return routes


def solve(problem: Problem, threads: int | None = None, dead_states: int = SWEEP_DEAD_STATES,
          phases: tuple = SWEEP_PHASES, max_nodes: int = 0, engine: str = "auto") -> SweepResult:
    """Routes that clean the room, or a proof that none exist (``routes`` None).

    Two exact engines: the SAT solver (:mod:`.sat`: every cleaner's steps at once; it finds the
    routes of problems that need many meetings, such as SweepOptimizer's q64, which the search
    does not), and the search of this module (searched first without meetings, then with
    meetings: see the module docstring).

    Parameters
    ----------
    problem : Problem
    threads : int, optional
        Threads sharing each search (default :data:`~dobutsu_tb.encoding.config.THREADS`); the
        SAT solver runs on one.
    dead_states : int, optional
        Dead nodes remembered at most per search (16 bytes each, over the load factor).
    phases : tuple of int, optional
        The searches to run, in turn: :data:`NO_MEETINGS`, a number of meetings the bounds allow
        for, or :data:`UNLIMITED` (the complete search).
    max_nodes : int, optional
        Give up after about this many nodes per search, or conflicts of the SAT solver (0, the
        default: never); the answer then has ``complete`` False and no routes.
    engine : {"auto", "sat", "search"}, optional
        ``"auto"`` (the default): the SAT solver and the search in turns, with budgets growing
        four times a round (:data:`AUTO_FIRST_ROUND`), until one answers; the search alone when
        the formula would have more than :data:`AUTO_SAT_ARRIVALS` arrival variables (long
        budgets on a large board). ``max_nodes`` then caps the rounds' budgets.

    Returns
    -------
    SweepResult

    Raises
    ------
    ValueError
        If ``engine`` is none of :data:`ENGINES`.
    FormulaTooLargeError
        If ``engine`` is ``"sat"`` and the formula too large (:data:`~.sat.MAX_ARRIVALS`).
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    arrays = problem_arrays(problem)
    if engine == "sat":
        return _from_sat(problem, solve_sat(problem, max_conflicts=max_nodes, arrays=arrays))
    if engine == "search" or sat_size(arrays) > AUTO_SAT_ARRIVALS:
        return _search(arrays, threads, dead_states, phases, max_nodes)
    conflicts, nodes = AUTO_FIRST_ROUND
    with SatRounds(problem, arrays) as rounds:
        while True:
            answer = rounds.run(min(conflicts, max_nodes) if max_nodes else conflicts)
            if answer.complete:
                return _from_sat(problem, answer)
            result = _search(arrays, threads, dead_states, phases, min(nodes, max_nodes) if max_nodes else nodes)
            result.conflicts = answer.conflicts
            if result.complete or (max_nodes and nodes >= max_nodes and conflicts >= max_nodes):
                return result
            conflicts, nodes = 4 * conflicts, 4 * nodes


def _from_sat(problem, answer) -> SweepResult:
    """The :class:`SweepResult` of a :class:`~.sat.SatResult`."""
    needs = answer.routes is not None and bool(simulate(problem, answer.routes, meetings=False)[0])
    return SweepResult(answer.routes, needs, answer.decisions, 0, answer.complete, [], "sat", answer.conflicts)


def _search(arrays, threads, dead_states, phases, max_nodes) -> SweepResult:
    """:func:`solve` by the search of this module."""
    threads = threads or THREADS
    callbacks = (_route_goal, _route_found, _route_prune, _route_options, _route_apply)
    nodes = dead_total = 0
    for cap in phases:
        dead = FingerprintSet(dead_states)
        contexts = [_context(arrays, cap, dead, max_nodes // threads) for _ in range(threads)]
        max_depth = contexts[0].pos.shape[0] - 1
        split = split_depth_for(contexts[0], _route_goal, _route_prune, _route_options, _route_apply, max_depth,
                                SWEEP_TASKS * threads) if threads > 1 else 0
        _, searched = depth_first(contexts, *callbacks, max_depth=max_depth, is_dead=_route_is_dead,
                                  mark_dead=_route_mark_dead, split=split)
        nodes += searched
        dead_total += len(dead)
        visits = [int(sum(ctx.visits[i] for ctx in contexts)) for i in range(len(arrays.kind))]
        for ctx in contexts:
            if ctx.found[0] >= 0:
                return SweepResult(_routes(arrays, ctx), cap != NO_MEETINGS, nodes, dead_total, True, visits)
        if any(ctx.budget[1] for ctx in contexts):
            return SweepResult(None, cap != NO_MEETINGS, nodes, dead_total, False, visits)
    return SweepResult(None, True, nodes, dead_total, True, visits)
