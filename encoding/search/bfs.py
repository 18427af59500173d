"""Breadth-first search with parent links for a shortest path and the number of shortest paths."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dobutsu_tb.encoding.config import LOAD_FACTOR
from dobutsu_tb.encoding.hashtable import HashTable, insert_key
from dobutsu_tb.encoding.jit import njit_driver


@dataclass
class ShortestResult:
    """What :func:`bfs_shortest` found.

    Attributes
    ----------
    path : list of int or None
        States from the start to a goal along a shortest path; None if no goal is reachable.
    count : int
        Number of distinct shortest paths (move sequences) to any goal state (0 if none).
    level_sizes : list of int
        Distinct new states at each depth (depth 0: the start).
    """

    path: list | None
    count: int
    level_sizes: list = field(default_factory=list)

    @property
    def moves(self) -> int | None:
        """Length of the shortest paths in moves, or None."""
        return None if self.path is None else len(self.path) - 1


@njit_driver
def _bfs_level(frontier, first, expand, params, table, shard_cap, room, max_moves, nxt, m, parent):
    """Expand ``frontier[first:]``: states not seen before are appended to ``nxt`` (from index
    ``m``) with one parent index each. Stops early, before a state whose successors might not
    fit in the table's ``room`` or in ``nxt``. Returns (states expanded up to, new count)."""
    buf = np.empty(max_moves, np.int64)
    added = 0
    for i in range(first, frontier.shape[0]):
        if added + max_moves > room or m + max_moves > nxt.shape[0]:
            return i, m
        n = expand(frontier[i], buf, params)
        if n < 0:
            return -1, m
        for k in range(n):
            if insert_key(table, shard_cap, 1, buf[k]) >= 0:
                nxt[m] = buf[k]
                parent[m] = i
                m += 1
                added += 1
    return frontier.shape[0], m


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


def bfs_shortest(start: int, expand, is_goal, params: np.ndarray, max_moves: int,
                 max_depth: int = 1000, count: bool = True, expected: int = 1 << 16) -> ShortestResult:
    """Breadth-first search from ``start`` for a shortest path to a goal.

    States are not folded by symmetry here (``canonical`` is not used), so path counts are
    exact. The search stops at the first level holding a goal.

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
        Count the shortest paths (a second pass over each level).
    expected : int, optional
        Expected number of states, to size the seen table (it grows as needed).

    Returns
    -------
    ShortestResult
    """
    table = HashTable(expected, LOAD_FACTOR, 1)
    table.insert([start])
    frontier = np.array([start], np.int64)
    counts = np.ones(1, np.int64)
    levels: list[tuple[np.ndarray, np.ndarray]] = [(frontier, np.full(1, -1, np.int64))]
    sizes = [1]
    if is_goal(np.int64(start), params):
        return ShortestResult([start], 1, sizes)
    for _ in range(max_depth):
        size = max(4 * max_moves, 2 * frontier.shape[0])
        nxt = np.empty(size, np.int64)
        parent = np.empty(size, np.int64)
        done, m = 0, 0
        while done < frontier.shape[0]:
            if table.room() < 2 * max_moves:
                table.grow(2 * len(table) + 2 * max_moves)
            if nxt.shape[0] - m < 2 * max_moves:
                nxt = np.concatenate([nxt, np.empty(nxt.shape[0], np.int64)])
                parent = np.concatenate([parent, np.empty(parent.shape[0], np.int64)])
            before = m
            done, m = _bfs_level(frontier, done, expand, params, table.table, table.shard_capacity, table.room(),
                                 max_moves, nxt, m, parent)
            if done < 0:
                raise RuntimeError("a state has more successors than max_moves")
            table.counts[0] += m - before
        if m == 0:
            return ShortestResult(None, 0, sizes)
        nxt, parent = nxt[:m], parent[:m]
        order = np.argsort(nxt)
        nxt, parent = nxt[order], parent[order]
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
            total = int(new_counts[goals].sum()) if count else 0
            return ShortestResult(path[::-1], total, sizes)
        frontier, counts = nxt, new_counts if count else np.ones(m, np.int64)
    return ShortestResult(None, 0, sizes)


