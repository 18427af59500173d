"""Plain-Python twins of the search drivers of ``dobutsu_tb.encoding.search``: slow, obviously
right, and written without their tables, threads or batches, to compare the drivers with on small
instances (stumpy's ``naive.py`` habit). Each calls the puzzle's callbacks as plain functions.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np


def successors(expand, state, params, max_moves):
    """The successor states of ``state`` as a list (``expand`` writes them into a buffer)."""
    buf = np.empty(max_moves, np.int64)
    n = expand(np.int64(state), buf, params)
    return [int(s) for s in buf[:n]]


def dfs_solve(start, expand, is_goal, params, max_depth, max_moves):
    """The first path to a goal in depth-first order (children in ``expand``'s order), or None.

    The driver's table of dead states only skips states from which no goal is reachable, so it
    finds this very path."""

    def visit(state, depth):
        if is_goal(np.int64(state), params):
            return [state]
        if depth == max_depth:
            return None
        for child in successors(expand, state, params, max_moves):
            path = visit(child, depth + 1)
            if path is not None:
                return [state] + path
        return None

    return visit(start, 0)


def bfs_shortest(start, expand, is_goal, params, max_moves, max_depth=1000):
    """(fewest moves or None, number of shortest paths, distinct new states per level)."""
    seen = {start}
    level = {start: 1}  # state -> paths to it
    sizes = [1]
    if is_goal(np.int64(start), params):
        return 0, 1, sizes
    for depth in range(1, max_depth + 1):
        nxt = defaultdict(int)
        for state, paths in level.items():
            for child in successors(expand, state, params, max_moves):
                if child not in seen:
                    nxt[child] += paths
        if not nxt:
            return None, 0, sizes
        seen.update(nxt)
        sizes.append(len(nxt))
        goals = [s for s in nxt if is_goal(np.int64(s), params)]
        if goals:
            return depth, sum(nxt[s] for s in goals), sizes
        level = nxt
    return None, 0, sizes


def enumerate_levels(start, expand, params, max_moves):
    """Every level as a dict {state: number of paths from the start}, level 0 first."""
    levels = [{start: 1}]
    while True:
        nxt = defaultdict(int)
        for state, paths in levels[-1].items():
            for child in successors(expand, state, params, max_moves):
                nxt[child] += paths
        if not nxt:
            return levels
        levels.append(dict(nxt))


def bfs_wide_levels(start, children, is_goal, max_depth):
    """(depth of the first level with a goal or None, number of move sequences to a goal there,
    distinct states per level); ``children(state)`` lists (child tuple, label) pairs."""
    level = {tuple(start): 1}
    sizes = [1]
    for depth in range(1, max_depth + 1):
        nxt = defaultdict(int)
        for state, paths in level.items():
            for child, _ in children(state):
                nxt[child] += paths
        if not nxt:
            break
        sizes.append(len(nxt))
        goals = [s for s in nxt if is_goal(s)]
        if goals:
            return depth, sum(nxt[s] for s in goals), sizes
        level = nxt
    return None, 0, sizes


def depth_first(ctx, is_goal, on_goal, prune, options, apply, max_depth):
    """The generic driver, recursively and on one thread: (stopped, nodes visited). The
    callbacks see the same context and depths as under the driver."""
    nodes = 0

    def visit(d):
        nonlocal nodes
        nodes += 1
        if is_goal(ctx, d):
            return bool(on_goal(ctx, d))
        if d >= max_depth or prune(ctx, d):
            return False
        for k in range(options(ctx, d)):
            if apply(ctx, d, k) and visit(d + 1):
                return True
        return False

    return visit(0), nodes


def chain_levels(start, expand, params, max_moves):
    """Every level as a dict {state: (fewest moves, set of last tags)}, level 0 first, from the
    fewest moves of every (state, last tag) pair; ``expand(state, out, src, dst, params)``."""
    buf, src, dst = np.empty(max_moves, np.int64), np.empty(max_moves, np.int8), np.empty(max_moves, np.int8)
    pairs = {(start, None): 0}  # (state, tag of the last step) -> fewest moves
    levels = [{start: (0, set())}]
    while True:
        nxt = {}
        fewest = {s: m for s, (m, _) in levels[-1].items()}
        for (state, tag), moves in pairs.items():
            n = expand(np.int64(state), buf, src, dst, params)
            for k in range(n):
                key = (int(buf[k]), int(dst[k]))
                cost = moves if tag == int(src[k]) else fewest[state] + 1
                nxt[key] = min(nxt.get(key, cost), cost)
        if not nxt:
            return levels
        level = {}
        for (state, tag), moves in nxt.items():
            best = min(m for (s, _), m in nxt.items() if s == state)
            if moves == best:
                level.setdefault(state, (best, set()))[1].add(tag)
        levels.append(level)
        pairs = nxt
