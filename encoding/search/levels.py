"""Level-by-level enumeration for puzzles whose every move leads to the next level.

A level is expanded in batches (:mod:`.batch`): the successors of a batch are generated in
parallel, folded to their symmetry class's representative when the puzzle gives ``canonical``,
and inserted into the next level's hash table with one thread per shard; each adds its parent's
number of paths to its slot.

Folding symmetries keeps the numbers exact. For a representative ``r`` let ``T(r)`` be the sum,
over the states of its class, of the paths from the start to each. A symmetry maps moves to moves
and classes onto themselves, so every state of ``q``'s class has as many moves into ``r``'s class
as ``q`` itself (``m(q, r)``), and ``T(r) = sum over q of m(q, r) T(q)``: the count pushed along
each move of each representative, which is what the enumeration does. A goal that every symmetry
fixes is a class of its own, so its ``T`` is its number of paths.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dobutsu_tb.encoding.config import ENUM_BATCH, LOAD_FACTOR
from dobutsu_tb.encoding.hashtable import HashTable, insert_key
from dobutsu_tb.encoding.jit import njit, prange
from dobutsu_tb.encoding.search.batch import Batches, identity, make_room


@dataclass
class Level:
    """One level of :func:`enumerate_levels`: distinct states (ascending; representatives when
    symmetries are folded) and the paths to each (class totals when folded)."""

    states: np.ndarray
    paths: np.ndarray


@njit(parallel=True)
def _insert_batch(kids, n_kids, shards, paths, table, shard_cap, n_shards, counts, acc):
    """Insert the successors with one task per shard; each adds its parent's paths (``paths[i]``
    for row i) to its slot of ``acc``."""
    for shard in prange(n_shards):
        added = 0
        for i in range(kids.shape[0]):
            p = paths[i]
            for k in range(n_kids[i]):
                if shards[i, k] != shard:
                    continue
                s = insert_key(table, shard_cap, n_shards, kids[i, k])
                if s >= 0:
                    added += 1
                else:
                    s = -s - 2
                acc[s] += p
        counts[shard] += added


def enumerate_levels(start: int, expand, params: np.ndarray, max_moves: int, threads: int = 2,
                     on_level=None, canonical=None, batch: int = ENUM_BATCH) -> list[int]:
    """Every state reachable from ``start``, level by level, with the number of paths to each.

    Only for puzzles in which every move leads from one level to the next (the levels are
    disjoint), as a jump removes one peg. Path counts are int64 sums, exact modulo 2**64: a count
    below 2**63 is exact even when those of other states wrapped around.

    Parameters
    ----------
    start : int
        The start state (positive).
    expand : numba-jitted function
        As in :mod:`dobutsu_tb.encoding.search`.
    params : numpy.ndarray of int64
        Passed to ``expand`` and ``canonical``.
    max_moves : int
        Most successors of one state.
    threads : int, optional
        Hash table shards, also the threads that expand and insert at once.
    on_level : callable, optional
        Called with each :class:`Level` as it is completed (levels are not kept otherwise).
    canonical : numba-jitted function, optional
        Fold symmetries: states become their class's representative and paths the class totals
        (the module docstring says why that is exact). Default: no folding.
    batch : int, optional
        States expanded at once (buffers of ``batch * max_moves`` int64 and int8).

    Returns
    -------
    list of int
        The number of distinct states (classes when folded) at each level (level 0: the start).

    Raises
    ------
    ValueError
        If a state has more than ``max_moves`` successors.
    """
    canonical = canonical or identity
    level = Level(np.array([canonical(np.int64(start), params)], np.int64), np.ones(1, np.int64))
    sizes = [1]
    if on_level is not None:
        on_level(level)
    buffers = Batches(expand, canonical, params, max_moves, batch)
    while True:
        table = HashTable(2 * level.states.shape[0] + 16, LOAD_FACTOR, threads)
        acc = np.zeros(table.capacity, np.int64)
        for lo in range(0, level.states.shape[0], batch):
            states = level.states[lo: lo + batch]
            n = states.shape[0]
            remap = make_room(table, buffers.expand(states, threads))
            if remap is not None:
                moved = np.zeros(table.capacity, np.int64)
                old = np.flatnonzero(remap >= 0)
                moved[remap[old]] = acc[old]
                acc = moved
            _insert_batch(buffers.kids[:n], buffers.n_kids[:n], buffers.shards[:n], level.paths[lo: lo + batch],
                          table.table, table.shard_capacity, threads, table.counts, acc)
        if len(table) == 0:
            return sizes
        slots = table.occupied()
        slots = slots[np.argsort(table.table[slots])]
        level = Level(table.table[slots], acc[slots])
        del table, acc, slots
        sizes.append(level.states.shape[0])
        if on_level is not None:
            on_level(level)
