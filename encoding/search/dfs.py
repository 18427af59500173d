"""Depth-first search drivers.

- :func:`dfs_solve`: one path to a goal over int64 states (``expand``, ``is_goal``,
  ``canonical`` as in :mod:`dobutsu_tb.encoding.search`), with a transposition table of dead
  states (from which no goal can be reached) in the shared hash table.
- :func:`depth_first`: the generic driver for puzzles whose state is more than one int64 (a
  digit grid, cleaners and bit-set boards). The puzzle keeps its search stack in a *context*, a
  tuple (or named tuple) of numpy arrays with one row per depth, and supplies five jitted
  callbacks; the driver walks the tree, deals the root's choices out to threads and stops every
  thread once one asks to stop.

The callbacks of :func:`depth_first` (``d`` is the depth of a node, 0 at the root):

- ``is_goal(ctx, d) -> bool``: the node is a solution;
- ``on_goal(ctx, d) -> bool``: record the solution; True stops the whole search (one solution
  wanted), False goes on (every solution wanted);
- ``prune(ctx, d) -> bool``: no solution lies below this node (a bound); it is not expanded;
- ``options(ctx, d) -> n``: prepare the node's choices, best first, and return their number;
- ``apply(ctx, d, k) -> bool``: write the node at depth ``d + 1`` reached by choice ``k`` of the
  node at depth ``d``; False when that choice turns out illegal (the driver tries the next);
- optionally ``is_dead(ctx, d) -> bool`` and ``mark_dead(ctx, d)``: a table of nodes proved
  dead (no goal below them), asked before a node is expanded and told when one is exhausted.

The node at depth ``d + 1`` is written over whatever an earlier sibling left there, so a context
holds one row per depth and nothing needs undoing.
"""

from __future__ import annotations

import numpy as np

from dobutsu_tb.encoding.atomics import atomic_sub
from dobutsu_tb.encoding.config import DEAD_STATES, LOAD_FACTOR
from dobutsu_tb.encoding.hashtable import HashTable, find_slot, insert_key
from dobutsu_tb.encoding.jit import njit_callback, njit_driver
from dobutsu_tb.encoding.search.pool import run_threads


@njit_driver
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
    n = _dfs(np.int64(start), expand, is_goal, canonical, params, table.table, table.shard_capacity, 1, table.limit,
             max_depth, max_moves, path)
    return None if n < 0 else [int(s) for s in path[: n + 1]]




@njit_callback
def never_dead(ctx, d):
    """The default ``is_dead`` of :func:`depth_first`: no table of dead nodes."""
    return False


@njit_callback
def forget_dead(ctx, d):
    """The default ``mark_dead`` of :func:`depth_first`: nothing is remembered."""
    return


@njit_driver
def _depth_first(ctx, is_goal, on_goal, prune, options, apply, is_dead, mark_dead, max_depth, split, first, stride,
                 ticket, stop):
    """Iterative depth-first walk (see the module docstring). With ``split`` 0 the root's choices
    ``first, first + stride, ...`` are this call's share; with ``split`` > 0 every thread walks
    the levels above ``split`` alike and takes the nodes at depth ``split`` whose numbers it draws
    from ``ticket``. Returns the number of nodes visited."""
    n_options = np.zeros(max_depth + 1, np.int64)
    following = np.zeros(max_depth + 1, np.int64)  # the next choice to try at each depth
    goal_below = np.zeros(max_depth + 1, np.bool_)  # a goal was found under the node (it is not dead)
    owned = max(split, 1)  # nodes this deep are searched whole by one thread
    mine = atomic_sub(ticket, 0, -1) if split > 0 else 0  # the next task this thread takes
    tasks = 0  # tasks passed so far
    nodes = 0
    d = 0
    fresh = True
    while d >= 0:
        if stop[0]:
            break
        if fresh:
            fresh = False
            nodes += 1
            goal_below[d] = False
            if is_goal(ctx, d):
                for e in range(d):
                    goal_below[e] = True
                if on_goal(ctx, d):
                    stop[0] = 1
                    break
                d -= 1
                continue
            if d >= max_depth or prune(ctx, d) or (d > split and is_dead(ctx, d)):
                d -= 1
                continue
            if split > 0 and d == split:
                tasks += 1
                if tasks - 1 != mine:
                    d -= 1
                    continue
                mine = atomic_sub(ticket, 0, -1)
            n_options[d] = options(ctx, d)
            following[d] = first if split == 0 and d == 0 else 0
        k = following[d]
        if k >= n_options[d]:
            if d >= owned and not goal_below[d]:
                mark_dead(ctx, d)
            d -= 1
            continue
        following[d] = k + (stride if split == 0 and d == 0 else 1)
        if apply(ctx, d, k):
            d += 1
            fresh = True
    return nodes


@njit_driver
def _count_at_depth(ctx, is_goal, prune, options, apply, depth, limit):
    """The nodes at ``depth`` that are neither goals nor pruned, counted up to ``limit``."""
    n_options = np.zeros(depth + 1, np.int64)
    following = np.zeros(depth + 1, np.int64)
    count = 0
    d = 0
    fresh = True
    while d >= 0:
        if fresh:
            fresh = False
            if is_goal(ctx, d) or prune(ctx, d):
                d -= 1
                continue
            if d == depth:
                count += 1
                if count >= limit:
                    break
                d -= 1
                continue
            n_options[d] = options(ctx, d)
            following[d] = 0
        k = following[d]
        if k >= n_options[d]:
            d -= 1
            continue
        following[d] = k + 1
        if apply(ctx, d, k):
            d += 1
            fresh = True
    return count


def split_depth_for(ctx, is_goal, prune, options, apply, max_depth: int, tasks: int, deepest: int = 64) -> int:
    """The shallowest depth with at least ``tasks`` nodes (not goals, not pruned), for
    :func:`depth_first`'s ``split``; 0 when no depth up to ``deepest`` (or ``max_depth``) has that many.

    The walk uses ``contexts[0]``-style scratch rows of ``ctx`` and leaves the root as it was.
    """
    for depth in range(1, min(deepest, max_depth) + 1):
        if _count_at_depth(ctx, is_goal, prune, options, apply, depth, tasks) >= tasks:
            return depth
    return 0


def depth_first(contexts: list, is_goal, on_goal, prune, options, apply, max_depth: int, is_dead=None,
                mark_dead=None, split: int = 0) -> tuple[bool, int]:
    """Depth-first search over a puzzle's own states, split between threads.

    With ``split`` 0, thread k walks the tree in ``contexts[k]`` and takes the root's choices k,
    k + n, k + 2n, ... (n = ``len(contexts)``); below the root it takes every choice, best
    first. With ``split`` > 0 the nodes at that depth are the tasks: every thread walks the
    levels above alike (so ``prune`` must not depend on what other threads did) and takes the
    next task not yet taken whenever it finishes one, which balances uneven subtrees. A shared
    flag stops every thread as soon as one ``on_goal`` returns True.

    A table of dead nodes (below which no goal lies) can cut repeated subtrees: ``is_dead(ctx,
    d) -> bool`` is asked of each node deeper than ``split`` (after ``prune``), and
    ``mark_dead(ctx, d)`` is called for each node at depth >= max(split, 1) whose choices were
    all tried without reaching a goal (nodes cut by ``prune`` or ``is_dead`` are not marked).

    Parameters
    ----------
    contexts : list of tuple
        One context per thread (tuples of numpy arrays, each with the root written at depth 0);
        their number is the number of threads. The puzzle reads its answers back from them.
    is_goal, on_goal, prune, options, apply : numba-jitted functions
        As in the module docstring.
    max_depth : int
        Deepest node: a node at this depth is checked for a goal but not expanded, so the
        contexts need ``max_depth + 1`` rows.
    is_dead, mark_dead : numba-jitted functions, optional
        The table of dead nodes (default: none).
    split : int, optional
        0 (the default) to deal out the root's choices, or the depth whose nodes are dealt out
        one at a time (see :func:`split_depth_for`).

    Returns
    -------
    stopped : bool
        True if an ``on_goal`` asked to stop (some thread may have been cut short then).
    nodes : int
        Nodes visited by all threads together (with ``split`` > 0, each thread counts the levels
        above it).

    Raises
    ------
    ValueError
        If ``contexts`` is empty, ``max_depth`` is negative or ``split`` outside 0..max_depth.
    """
    if not contexts:
        raise ValueError("depth_first needs one context per thread, got none")
    if max_depth < 0:
        raise ValueError(f"max_depth must be >= 0, got {max_depth}")
    if not 0 <= split <= max_depth:
        raise ValueError(f"split must be in 0..{max_depth}, got {split}")
    is_dead = is_dead or never_dead
    mark_dead = mark_dead or forget_dead
    stop = np.zeros(1, np.int64)
    ticket = np.zeros(1, np.int64)
    n = len(contexts)
    nodes = run_threads(lambda k: _depth_first(contexts[k], is_goal, on_goal, prune, options, apply, is_dead,
                                               mark_dead, max_depth, split, k, n, ticket, stop), n,
                        stop=lambda: stop.__setitem__(0, 1))
    return bool(stop[0]), int(sum(nodes))
