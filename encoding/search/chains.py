"""Fewest moves, level by level, when a move is a chain of steps by one piece (peg solitaire).

For puzzles whose every step leads to the next level (a jump removes a peg) and in which a *move*
is one or more consecutive steps of the same piece. Each step is tagged with the moving piece's
place before it (``src``) and after it (``dst``), tags 0..63. A state carries the fewest moves
that reach it (``moves``) and the bit set ``last`` of the places t such that some way of reaching
it in that many moves ends with a step to t. A step from the state costs nothing when its ``src``
is in ``last`` (the move goes on) and one move otherwise. That is all that needs keeping: a way of
reaching the state in more moves, whatever its last place, is never better than starting a new
move from the state. The levels are relaxed in turn like :func:`enumerate_levels`'s: each step
of a batch is generated in parallel, then applied with one thread per hash table shard (the
least moves win; on a tie the ``last`` sets are united).

Folding symmetries keeps the answer exact. ``canonical(state, tag, params)`` returns the
representative and the tag's image under a symmetry taking the state to it. A symmetry maps ways
of reaching a state to ways of reaching its image, so a representative's ``last`` needs one place
of each orbit (under the symmetries that fix it) of the true set, and that is what it gets: a
step from a representative that the true set would make free but the kept one does not has a
twin, by a symmetry fixing the representative, whose ``src`` is kept and whose result is in the
same class, with its ``dst`` in the same orbit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from dobutsu_tb.encoding.config import ENUM_BATCH, LOAD_FACTOR, THREADS
from dobutsu_tb.encoding.hashtable import HashTable, insert_key, shard_of
from dobutsu_tb.encoding.jit import njit, njit_driver, prange
from dobutsu_tb.encoding.search.batch import make_room

#: Most moves a state may carry (``moves`` is int16).
MAX_LIMIT = (1 << 15) - 1


@dataclass
class ChainLevel:
    """One level of :func:`chain_levels`.

    Attributes
    ----------
    states : numpy.ndarray of int64
        Distinct states, ascending (representatives when symmetries are folded).
    moves : numpy.ndarray of int16
        The fewest moves that reach each.
    last : numpy.ndarray of int64
        Bit t set when a way of reaching the state in ``moves`` moves ends with a step to tag t
        (one tag per orbit at least, when folded).
    """

    states: np.ndarray
    moves: np.ndarray
    last: np.ndarray


@njit_driver(parallel=True)
def _expand_batch(states, moves, last, expand, canonical, params, n_shards, kids, src, dst, cost, n_kids, shards):
    bad = 0  # a sum reduction (see batch._expand_batch)
    for i in prange(states.shape[0]):
        n = expand(states[i], kids[i], src[i], dst[i], params)
        if n < 0 or n > kids.shape[1]:
            bad += 1
            n = 0
        for k in range(n):
            goes_on = (last[i] >> np.int64(src[i, k])) & 1
            cost[i, k] = moves[i] + 1 - goes_on
            c, t = canonical(kids[i, k], np.int64(dst[i, k]), params)
            kids[i, k] = c
            dst[i, k] = t
            shards[i, k] = shard_of(c, n_shards)
        n_kids[i] = n
    return bad == 0


@njit(parallel=True)
def _relax_batch(kids, n_kids, shards, dst, cost, limit, table, shard_cap, n_shards, counts, best, last):
    """Apply the steps with one task per shard: the fewest moves win, ties unite ``last``."""
    for shard in prange(n_shards):
        added = 0
        for i in range(kids.shape[0]):
            for k in range(n_kids[i]):
                c = cost[i, k]
                if shards[i, k] != shard or c > limit:
                    continue
                bit = np.int64(1) << np.int64(dst[i, k])
                s = insert_key(table, shard_cap, n_shards, kids[i, k])
                if s >= 0:
                    added += 1
                    best[s] = c
                    last[s] = bit
                else:
                    s = -s - 2
                    if c < best[s]:
                        best[s] = c
                        last[s] = bit
                    elif c == best[s]:
                        last[s] |= bit
        counts[shard] += added


def chain_levels(start: int, expand, canonical, params: np.ndarray, max_moves: int, threads: int | None = None,
                 on_level=None, keep=None, limit: int = MAX_LIMIT, batch: int = ENUM_BATCH) -> list[int]:
    """The fewest moves to every state reachable from ``start``, level by level.

    Parameters
    ----------
    start : int
        The start state (positive); it is reached in 0 moves, with no last place.
    expand : numba-jitted function
        ``expand(state, out, src, dst, params) -> n``: the states one step away in ``out``, the
        moving piece's tags before and after each step in ``src`` and ``dst`` (int8 arrays,
        tags 0..63).
    canonical : numba-jitted function
        ``canonical(state, tag, params) -> (representative, tag's image)``; ``(state, tag)``
        when symmetries are not folded.
    params : numpy.ndarray of int64
        Passed to them.
    max_moves : int
        Most steps from one state.
    threads : int, optional
        Hash table shards, also the threads that expand and relax at once; default
        :data:`~dobutsu_tb.encoding.config.THREADS`.
    on_level : callable, optional
        Called with each :class:`ChainLevel` as it is completed (levels are not kept otherwise).
    keep : callable, optional
        ``keep(level) -> bool array``: the states of a completed level worth going on from (for
        a puzzle that knows which states cannot lead to a goal); the others are dropped before
        ``on_level`` sees the level. Default: all.
    limit : int, optional
        States reached only in more moves are dropped (at most :data:`MAX_LIMIT`).
    batch : int, optional
        States expanded at once.

    Returns
    -------
    list of int
        The number of distinct states (classes when folded) kept at each level (level 0: the
        start).

    Raises
    ------
    ValueError
        For a start that is not positive, ``max_moves`` or ``limit`` out of range, or a state
        with more than ``max_moves`` steps.
    """
    if start <= 0:
        raise ValueError(f"states must be positive, got {start}")
    if max_moves < 1 or not 0 <= limit <= MAX_LIMIT:
        raise ValueError(f"max_moves must be >= 1 and limit in 0..{MAX_LIMIT}, got {max_moves} and {limit}")
    threads = threads or THREADS
    root = canonical(np.int64(start), np.int64(0), params)[0]
    level = ChainLevel(np.array([root], np.int64), np.zeros(1, np.int16), np.zeros(1, np.int64))
    buffers = _Buffers.make(batch, max_moves)
    sizes = []
    while level.states.shape[0]:
        sizes.append(level.states.shape[0])
        if on_level is not None:
            on_level(level)
        level = _next_level(level, expand, canonical, params, threads, limit, buffers)
        if keep is not None and level.states.shape[0]:
            kept = np.asarray(keep(level), np.bool_)
            level = ChainLevel(level.states[kept], level.moves[kept], level.last[kept])
    return sizes


class _Buffers(NamedTuple):
    """Per batch of states: their steps' states, tags before and after, costs, counts and shards."""

    kids: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    cost: np.ndarray
    n_kids: np.ndarray
    shards: np.ndarray

    @classmethod
    def make(cls, batch: int, max_moves: int) -> "_Buffers":
        return cls(np.empty((batch, max_moves), np.int64), np.empty((batch, max_moves), np.int8),
                   np.empty((batch, max_moves), np.int8), np.empty((batch, max_moves), np.int16),
                   np.empty(batch, np.int64), np.empty((batch, max_moves), np.int8))


def _next_level(level: ChainLevel, expand, canonical, params, threads: int, limit: int,
                buffers: _Buffers) -> ChainLevel:
    """The states one step from ``level`` with their fewest moves and last places, relaxed batch
    by batch in a hash table (module docstring)."""
    table = HashTable(2 * level.states.shape[0] + 16, LOAD_FACTOR, threads)
    best, last = np.zeros(table.capacity, np.int16), np.zeros(table.capacity, np.int64)
    batch, max_moves = buffers.kids.shape
    for lo in range(0, level.states.shape[0], batch):
        hi = min(lo + batch, level.states.shape[0])
        b = _Buffers(*(x[: hi - lo] for x in buffers))
        if not _expand_batch(level.states[lo:hi], level.moves[lo:hi], level.last[lo:hi], expand, canonical, params,
                             threads, *b):
            raise ValueError(f"a state has more than max_moves = {max_moves} steps")
        remap = make_room(table, int(b.n_kids.sum()))
        if remap is not None:  # the table grew: its slots moved
            old = np.flatnonzero(remap >= 0)
            moved_best, moved_last = np.zeros(table.capacity, np.int16), np.zeros(table.capacity, np.int64)
            moved_best[remap[old]], moved_last[remap[old]] = best[old], last[old]
            best, last = moved_best, moved_last
        _relax_batch(b.kids, b.n_kids, b.shards, b.dst, b.cost, limit, table.table, table.shard_capacity, threads,
                     table.counts, best, last)
    slots = table.occupied()
    slots = slots[np.argsort(table.table[slots])]
    return ChainLevel(table.table[slots], best[slots], last[slots])
