"""Breadth-first search by levels for states wider than one int64, each level de-duplicated exactly."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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
        Distinct states per level (level 0: the start); with ``count_goal_children``, the goal
        level is not built, so the last size is of the level before it.
    """

    depth: int | None
    path: list
    labels: list
    count: int
    level_sizes: list


def _unique_rows(rows: np.ndarray):
    """Distinct rows in lexicographic order (signed), the index of each one's first occurrence,
    and each row's index among them: ``numpy.unique(rows, axis=0, return_index=True,
    return_inverse=True)``, by one stable lexsort."""
    order = np.lexsort(rows.T[::-1])
    ranked = rows[order]
    fresh = np.ones(rows.shape[0], np.bool_)
    fresh[1:] = np.any(ranked[1:] != ranked[:-1], axis=1)
    inverse = np.empty(rows.shape[0], np.int64)
    inverse[order] = np.cumsum(fresh) - 1
    return ranked[fresh], order[fresh], inverse


def bfs_wide_levels(start, count_children, fill_children, goal_mask, max_depth: int,
                    count_goal_children=None) -> WideResult:
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
    count_goal_children : callable, optional
        ``count_goal_children(level, counts)``: the number of children of each row that are
        goals. With it the level holding the first goals is never built: its goals are counted
        from the level before, and only the children of rows with a goal child are made.

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
        if count_goal_children is not None:
            goals = np.empty(level.shape[0], np.int64)
            count_goal_children(level, goals)
            if goals.any():  # build only the children of rows with a goal child
                rows = np.flatnonzero(goals)
                counts = counts[rows]
                offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
                total = int(offsets[-1])
                out = np.empty((total, width + 1), np.int64)
                parent = np.empty(total, np.int64)
                fill_children(level[rows], offsets[:-1].copy(), out, parent)
                parent = rows[parent]
                keep = goal_mask(out[:, :width])
                out, parent = out[keep], parent[keep]
                states, first, inverse = _unique_rows(out[:, :width])
                history.append((states, parent[first], out[first, width]))
                j = 0  # the smallest goal row, as when the whole level is built
                rows_, labels = [], []
                for states_d, parent_d, label_d in reversed(history):
                    rows_.append(states_d[j])
                    labels.append(int(label_d[j]))
                    j = int(parent_d[j])
                return WideResult(depth, rows_[::-1], labels[::-1], int((goals * paths).sum()), sizes)
        out = np.empty((total, width + 1), np.int64)
        parent = np.empty(total, np.int64)
        fill_children(level, offsets[:-1].copy(), out, parent)
        states, first, inverse = _unique_rows(out[:, :width])
        new_paths = np.zeros(states.shape[0], np.int64)
        np.add.at(new_paths, inverse, paths[parent])
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
