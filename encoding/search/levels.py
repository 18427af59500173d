"""Level-by-level enumeration for puzzles whose every move leads to the next level."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dobutsu_tb.encoding.config import LOAD_FACTOR
from dobutsu_tb.encoding.hashtable import HashTable, insert_key, shard_of
from dobutsu_tb.encoding.jit import njit_driver, prange


@dataclass
class Level:
    """One level of :func:`enumerate_levels`: distinct states (ascending) and paths to each."""

    states: np.ndarray
    paths: np.ndarray


@njit_driver(parallel=True)
def _expand_level(states, paths, expand, params, table, shard_cap, n_shards, counts, limit, acc,
                  max_moves):
    """Insert every successor of the level into ``table`` (one task per shard) and add the
    number of paths to each into ``acc`` (slot-indexed). Returns False if a shard reached
    ``limit`` keys (the caller retries with a larger table)."""
    failed = 0  # a sum reduction: numba makes plain assignments inside prange thread-private
    for shard in prange(n_shards):
        buf = np.empty(max_moves, np.int64)
        added = 0
        full = 0
        for i in range(states.shape[0]):
            if counts[shard] + added >= limit:
                full = 1
                break
            n = expand(states[i], buf, params)
            for k in range(n):
                child = buf[k]
                if shard_of(child, n_shards) != shard:
                    continue
                s = insert_key(table, shard_cap, n_shards, child)
                if s >= 0:
                    added += 1
                else:
                    s = -s - 2
                acc[s] += paths[i]
        counts[shard] += added
        failed += full
    return failed == 0


def enumerate_levels(start: int, expand, params: np.ndarray, max_moves: int, threads: int = 2,
                     on_level=None):
    """Every state reachable from ``start``, level by level, with the number of paths to each.

    Only for puzzles in which every move leads from one level to the next (the levels are
    disjoint), as a jump removes one peg. Path counts are int64 (exact up to 9.2e18).

    Parameters
    ----------
    start : int
        The start state (positive).
    expand : numba-jitted function
    params : numpy.ndarray of int64
        Passed to it.
    max_moves : int
        Most successors of one state (each may hold up to ``max_moves - 1`` more keys than
        the load limit, so keep the limit check ahead of the table's capacity).
    threads : int, optional
        Hash table shards, also the threads that insert at once.
    on_level : callable, optional
        Called with each :class:`Level` as it is completed (levels are not kept otherwise).

    Returns
    -------
    list of int
        The number of distinct states at each level (level 0: the start).
    """
    level = Level(np.array([start], np.int64), np.ones(1, np.int64))
    sizes = [1]
    if on_level is not None:
        on_level(level)
    guess = 16
    while True:
        guess = max(guess, 2 * level.states.shape[0] + 16)
        while True:
            table = HashTable(guess, LOAD_FACTOR, threads)
            acc = np.zeros(table.capacity, np.int64)
            # Stop a shard max_moves keys short of its limit: one state adds at most that many.
            if _expand_level(level.states, level.paths, expand, params, table.table, table.shard_capacity,
                             threads, table.counts, table.limit - max_moves, acc, max_moves):
                break
            guess *= 2
        if len(table) == 0:
            return sizes
        slots = table.occupied()
        slots = slots[np.argsort(table.table[slots])]
        level = Level(table.table[slots], acc[slots])
        guess = len(table)
        del table, acc, slots
        sizes.append(level.states.shape[0])
        if on_level is not None:
            on_level(level)


