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
    paths = np.ones(1, np.int64)
    history = []  # (states, parent of each, label of each) per level
    sizes = [1]
    for depth in range(1, max_depth + 1):
        counts = np.empty(level.shape[0], np.int64)
        count_children(level, counts)
        if not counts.any():
            break
        if count_goal_children is not None:
            goals = np.empty(level.shape[0], np.int64)
            count_goal_children(level, goals)
            if goals.any():
                _goal_level(level, counts, goals, fill_children, goal_mask, history)
                return WideResult(depth, *_trace(history, 0), int((goals * paths).sum()), sizes)
        out, parent = _children(level, counts, fill_children)
        states, first, inverse = _unique_rows(out[:, :-1])
        new_paths = np.zeros(states.shape[0], np.int64)
        np.add.at(new_paths, inverse, paths[parent])
        history.append((states, parent[first], out[first, -1]))
        sizes.append(states.shape[0])
        hits = np.flatnonzero(goal_mask(states))
        if hits.size:
            return WideResult(depth, *_trace(history, int(hits[0])), int(new_paths[hits].sum()), sizes)
        level, paths = states, new_paths
    return WideResult(None, [], [], 0, sizes)


def _children(level: np.ndarray, counts: np.ndarray, fill_children) -> tuple[np.ndarray, np.ndarray]:
    """The children of the rows of ``level`` (``counts`` of each): rows of state words and a
    move label, and the row of ``level`` each comes from."""
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    out = np.empty((int(offsets[-1]), level.shape[1] + 1), np.int64)
    parent = np.empty(out.shape[0], np.int64)
    fill_children(level, offsets[:-1].copy(), out, parent)
    return out, parent


def _goal_level(level, counts, goals, fill_children, goal_mask, history) -> None:
    """Append to ``history`` the goals of the next level, made from the rows of ``level`` that
    have a goal child only (their number is known from ``goals``; the rest is never built)."""
    rows = np.flatnonzero(goals)
    out, parent = _children(level[rows], counts[rows], fill_children)
    parent = rows[parent]
    keep = goal_mask(out[:, :-1])
    out, parent = out[keep], parent[keep]
    states, first, _ = _unique_rows(out[:, :-1])
    history.append((states, parent[first], out[first, -1]))


def _trace(history: list, j: int) -> tuple[list, list]:
    """The states and move labels from the level after the start to row ``j`` of the last level
    of ``history``, following the parents back."""
    rows, labels = [], []
    for states, parent, label in reversed(history):
        rows.append(states[j])
        labels.append(int(label[j]))
        j = int(parent[j])
    return rows[::-1], labels[::-1]
