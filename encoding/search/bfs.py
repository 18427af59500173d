"""Breadth-first search with parent links for a shortest path and the number of shortest paths.

Each level is expanded in batches (:mod:`.batch`): successors in parallel, folded to their
symmetry class's representative when the puzzle gives ``canonical``, then inserted into the table
of states seen with one thread per shard; a state not seen before joins the next level with the
index of its first parent (in the order of the level), whatever the number of threads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dobutsu_tb.encoding.config import ENUM_BATCH, LOAD_FACTOR, THREADS
from dobutsu_tb.encoding.hashtable import HashTable, insert_key
from dobutsu_tb.encoding.jit import njit, njit_driver, prange
from dobutsu_tb.encoding.search.batch import Batches, identity, make_room

#: Successors buffered per batch at most (int64 each), which bounds the batch for wide rows.
BUFFER = 1 << 22


@dataclass
class ShortestResult:
    """What :func:`bfs_shortest` found.

    Attributes
    ----------
    path : list of int or None
        States from the start to a goal along a shortest path; None if no goal is reachable.
    count : int
        Number of distinct shortest paths (move sequences) to any goal state (0 if none, and
        0 when not counted).
    level_sizes : list of int
        Distinct new states (classes when folded) at each depth (depth 0: the start).
    """

    path: list | None
    count: int
    level_sizes: list = field(default_factory=list)

    @property
    def moves(self) -> int | None:
        """Length of the shortest paths in moves, or None."""
        return None if self.path is None else len(self.path) - 1


@njit(parallel=True)
def _insert_new(kids, n_kids, shards, first, table, shard_cap, n_shards, counts, new, parent, n_new):
    """Insert the successors with one task per shard; those not seen before go to ``new[shard]``
    with their parent's index (``first`` + row) in ``parent[shard]``."""
    for shard in prange(n_shards):
        m = 0
        for i in range(kids.shape[0]):
            for k in range(n_kids[i]):
                if shards[i, k] == shard and insert_key(table, shard_cap, n_shards, kids[i, k]) >= 0:
                    new[shard, m] = kids[i, k]
                    parent[shard, m] = first + i
                    m += 1
        counts[shard] += m
        n_new[shard] = m


@njit_driver
def _add_paths(frontier, counts, expand, params, nxt, nxt_counts, max_moves):
    """``nxt_counts[j]`` += the paths of every parent of ``nxt[j]`` (``nxt`` ascending)."""
    buf = np.empty(max_moves, np.int64)
    for i in range(frontier.shape[0]):
        n = expand(frontier[i], buf, params)
        for k in range(n):
            j = np.searchsorted(nxt, buf[k])
            if j < nxt.shape[0] and nxt[j] == buf[k]:
                nxt_counts[j] += counts[i]


@njit_driver
def _goals(states, is_goal, params):
    out = np.zeros(states.shape[0], np.bool_)
    for i in range(states.shape[0]):
        out[i] = is_goal(states[i], params)
    return out


def _next_level(frontier, buffers, table, threads, batch):
    """The states first seen one move after ``frontier``, ascending, and their parents' indices."""
    states, parents = [], []
    for lo in range(0, frontier.shape[0], batch):
        part = frontier[lo: lo + batch]
        n = part.shape[0]
        need = buffers.expand(part, threads)
        make_room(table, need)  # parents are kept by index, so slots may move
        new = np.empty((threads, need), np.int64)
        parent = np.empty((threads, need), np.int64)
        n_new = np.zeros(threads, np.int64)
        _insert_new(buffers.kids[:n], buffers.n_kids[:n], buffers.shards[:n], lo, table.table, table.shard_capacity,
                    threads, table.counts, new, parent, n_new)
        for s in range(threads):
            states.append(new[s, : n_new[s]])
            parents.append(parent[s, : n_new[s]])
    nxt, parent = np.concatenate(states), np.concatenate(parents)
    order = np.argsort(nxt)
    return nxt[order], parent[order]


def _unfold(path, start, expand, canonical, params, max_moves):
    """The states along a path of representatives: from ``start``, each time the successor whose
    representative is the next one."""
    buf = np.empty(max_moves, np.int64)
    states = [int(start)]
    for rep in path[1:]:
        n = expand(np.int64(states[-1]), buf, params)
        states.append(next(int(c) for c in buf[:n] if canonical(c, params) == rep))
    return states


def bfs_shortest(start: int, expand, is_goal, params: np.ndarray, max_moves: int, max_depth: int = 1000,
                 count: bool = True, expected: int = 1 << 16, canonical=None,
                 threads: int | None = None) -> ShortestResult:
    """Breadth-first search from ``start`` for a shortest path to a goal.

    The search stops at the first level holding a goal.

    Parameters
    ----------
    start : int
        The start state (positive).
    expand, is_goal : numba-jitted functions
    params : numpy.ndarray of int64
        Passed to them.
    max_moves : int
        Most successors of one state.
    max_depth : int, optional
        Deepest level searched.
    count : bool, optional
        Count the shortest paths (a second pass over each level); not with ``canonical``.
    expected : int, optional
        Expected number of states, to size the seen table (it grows as needed).
    canonical : numba-jitted function, optional
        Fold symmetries: only one state of each class is searched. ``is_goal`` must hold for
        all of a class or none of it; the path returned is of states, not representatives.
    threads : int, optional
        Threads (and shards of the seen table); default
        :data:`~dobutsu_tb.encoding.config.THREADS`.

    Returns
    -------
    ShortestResult

    Raises
    ------
    ValueError
        If a state has more than ``max_moves`` successors, or for ``count`` with ``canonical``.
    """
    if count and canonical is not None:
        raise ValueError("shortest paths are not counted when symmetries are folded")
    threads = threads or THREADS
    fold = canonical or identity
    root = int(fold(np.int64(start), params))
    table = HashTable(expected, LOAD_FACTOR, threads)
    table.insert([root])
    frontier = np.array([root], np.int64)
    counts = np.ones(1, np.int64)
    levels: list[tuple[np.ndarray, np.ndarray]] = [(frontier, np.full(1, -1, np.int64))]
    sizes = [1]
    if is_goal(np.int64(root), params):
        return ShortestResult([start], 1, sizes)
    batch = max(1, min(ENUM_BATCH, BUFFER // max_moves))
    buffers = Batches(expand, fold, params, max_moves, batch)
    for _ in range(max_depth):
        nxt, parent = _next_level(frontier, buffers, table, threads, batch)
        m = nxt.shape[0]
        if m == 0:
            return ShortestResult(None, 0, sizes)
        new_counts = np.zeros(m, np.int64)
        if count:
            _add_paths(frontier, counts, expand, params, nxt, new_counts, max_moves)
        levels.append((nxt, parent))
        sizes.append(m)
        goals = np.flatnonzero(_goals(nxt, is_goal, params))
        if len(goals):
            path = [int(nxt[goals[0]])]
            j = int(parent[goals[0]])
            for states, parents in reversed(levels[:-1]):
                path.append(int(states[j]))
                j = int(parents[j])
            path = path[::-1]
            if canonical is not None:
                path = _unfold(path, start, expand, canonical, params, max_moves)
            total = int(new_counts[goals].sum()) if count else 0
            return ShortestResult(path, total, sizes)
        frontier, counts = nxt, new_counts if count else np.ones(m, np.int64)
    return ShortestResult(None, 0, sizes)
