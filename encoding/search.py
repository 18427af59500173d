"""Search drivers shared by the puzzle solvers, over bit-packed int64 states.

A puzzle supplies small jitted functions and the drivers do the rest. Each takes ``params``, an
int64 array the puzzle fills (goal, tables, ...), so one compiled function serves every instance:

- ``expand(state, out, params) -> n``: write the successor states into ``out``, return n;
- ``is_goal(state, params) -> bool``;
- ``canonical(state, params) -> int64``: the representative of the state's symmetry class (the
  state itself when symmetries are not folded). Every key a driver stores must be positive.

Drivers:

- :func:`dfs_solve`: depth-first search for one path to a goal, with a transposition table of
  dead states (from which no goal can be reached) in the shared hash table;
- :func:`bfs_shortest`: breadth-first search with parent links for a shortest path, the number
  of shortest paths, and the size of each level; states seen at any earlier level are skipped;
- :func:`enumerate_levels`: level-by-level enumeration for puzzles whose every move leads to the
  next level (a jump removes a peg): distinct states and the number of paths to each, level by
  level, in hash tables with one thread per shard;
- :func:`bfs_wide_levels`: breadth-first search by levels for states wider than one int64 (an
  Othello position) whose levels are disjoint, each level de-duplicated exactly by sorting rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dobutsu_tb.encoding.config import DEAD_STATES, LOAD_FACTOR
from dobutsu_tb.encoding.hashtable import HashTable, find_slot, insert_key, shard_of
from dobutsu_tb.encoding.jit import njit, prange


@njit
def _dfs(start, expand, is_goal, canonical, params, dead, shard_cap, n_shards, dead_limit, max_depth,
         max_moves, path):
    """Iterative DFS; returns the path length (number of moves), or -1 when no goal is reachable.
    ``path[0..len]`` holds the states. Dead states are added to ``dead`` while it has room."""
    kids = np.empty((max_depth + 1, max_moves), np.int64)
    count = np.zeros(max_depth + 1, np.int64)
    index = np.zeros(max_depth + 1, np.int64)
    stored = 0
    depth = 0
    path[0] = start
    count[0] = expand(start, kids[0], params)
    while depth >= 0:
        state = path[depth]
        if is_goal(state, params):
            return depth
        if index[depth] < count[depth] and depth < max_depth:
            child = kids[depth, index[depth]]
            index[depth] += 1
            if find_slot(dead, shard_cap, n_shards, canonical(child, params)) >= 0:
                continue
            depth += 1
            path[depth] = child
            count[depth] = expand(child, kids[depth], params)
            index[depth] = 0
        else:
            if stored < dead_limit:
                if insert_key(dead, shard_cap, n_shards, canonical(state, params)) >= 0:
                    stored += 1
            depth -= 1
    return -1


def dfs_solve(start: int, expand, is_goal, canonical, params: np.ndarray, max_depth: int,
              max_moves: int, dead_capacity: int = DEAD_STATES) -> list[int] | None:
    """One path from ``start`` to a goal, by depth-first search with a table of dead states.

    Parameters
    ----------
    start : int
        The start state.
    expand, is_goal, canonical : numba-jitted functions
        As in the module docstring.
    params : numpy.ndarray of int64
        Passed to them.
    max_depth : int
        Longest path considered (moves).
    max_moves : int
        Most successors of one state.
    dead_capacity : int, optional
        Dead states remembered at most (8 bytes each, over the load factor); beyond it the
        search goes on without remembering more.

    Returns
    -------
    list of int or None
        The states from ``start`` to the goal, or None when no goal is reachable.
    """
    table = HashTable(dead_capacity, LOAD_FACTOR, 1)
    path = np.empty(max_depth + 1, np.int64)
    n = _dfs(np.int64(start), expand, is_goal, canonical, params, table.table, table.shard_capacity,
             1, table.limit, max_depth, max_moves, path)
    return None if n < 0 else [int(s) for s in path[: n + 1]]


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


@njit
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


@njit
def _add_paths(frontier, counts, expand, params, nxt, nxt_counts, max_moves):
    """``nxt_counts[j]`` += the paths of every parent of ``nxt[j]`` (``nxt`` ascending)."""
    buf = np.empty(max_moves, np.int64)
    for i in range(frontier.shape[0]):
        n = expand(frontier[i], buf, params)
        for k in range(n):
            j = np.searchsorted(nxt, buf[k])
            if j < nxt.shape[0] and nxt[j] == buf[k]:
                nxt_counts[j] += counts[i]


@njit
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
            done, m = _bfs_level(frontier, done, expand, params, table.table, table.shard_capacity,
                                 table.room(), max_moves, nxt, m, parent)
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


@dataclass
class Level:
    """One level of :func:`enumerate_levels`: distinct states (ascending) and paths to each."""

    states: np.ndarray
    paths: np.ndarray


@njit(parallel=True)
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


@dataclass
class WideResult:
    """What :func:`bfs_wide_levels` found.

    Attributes
    ----------
    depth : int or None
        The first level holding a goal, or None.
    path : list of numpy.ndarray
        The states (rows) from the level after the start down to the goal.
    labels : list of int
        The move label of each step (as written by ``fill_children``).
    count : int
        Number of move sequences from the start to a goal state at ``depth``.
    level_sizes : list of int
        Distinct states per level (level 0: the start).
    """

    depth: int | None
    path: list
    labels: list
    count: int
    level_sizes: list


def bfs_wide_levels(start, count_children, fill_children, goal_mask, max_depth: int) -> WideResult:
    """Breadth-first search over multi-word states whose every move leads to the next level.

    For states too wide for one int64 key (an Othello position is two 64-bit boards and a side
    to move) when levels are disjoint (a placement adds a disc), so that only each level needs
    de-duplicating; that is done exactly, by sorting rows.

    Parameters
    ----------
    start : array_like of int64, shape (w,)
        The start state.
    count_children : callable
        ``count_children(level, counts)``: the number of children of each row of ``level``
        (an (n, w) int64 array) into ``counts`` (n,).
    fill_children : callable
        ``fill_children(level, offsets, out, parent)``: the children of row i into
        ``out[offsets[i]:]`` as w state words and one move label, and ``i`` into ``parent``.
    goal_mask : callable
        ``goal_mask(states) -> bool array``: which rows of a level are goals.
    max_depth : int
        Deepest level searched.

    Returns
    -------
    WideResult
    """
    level = np.array([start], np.int64)
    width = level.shape[1]
    paths = np.ones(1, np.int64)
    history = []  # (states, parent of each, label of each) per level
    sizes = [1]
    for depth in range(1, max_depth + 1):
        counts = np.empty(level.shape[0], np.int64)
        count_children(level, counts)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        total = int(offsets[-1])
        if total == 0:
            break
        out = np.empty((total, width + 1), np.int64)
        parent = np.empty(total, np.int64)
        fill_children(level, offsets[:-1].copy(), out, parent)
        states, first, inverse = np.unique(out[:, :width], axis=0, return_index=True, return_inverse=True)
        new_paths = np.zeros(states.shape[0], np.int64)
        np.add.at(new_paths, inverse.ravel(), paths[parent])
        history.append((states, parent[first], out[first, width]))
        sizes.append(states.shape[0])
        hits = np.flatnonzero(goal_mask(states))
        if hits.size:
            j = int(hits[0])
            rows, labels = [], []
            for states_d, parent_d, label_d in reversed(history):
                rows.append(states_d[j])
                labels.append(int(label_d[j]))
                j = int(parent_d[j])
            return WideResult(depth, rows[::-1], labels[::-1], int(new_paths[hits].sum()), sizes)
        level, paths = states, new_paths
    return WideResult(None, [], [], 0, sizes)
