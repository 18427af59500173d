"""Retrograde analysis: WDL and DTM of every non-terminal position (SPEC §1.5).

Values live in one byte per table slot (:mod:`dobutsu_tb.tablebase.values`: 0 undecided, else
DTM + 1, a win when the DTM is odd); the enumeration's tags serve as the counters of unresolved
moves. :func:`seed_values` starts from what enumeration found: a win in 1 for each position
with a successful try, a loss in 2 for each whose every move lets the lion be caught (counter
0), a loss in 0 for a position without moves. Catch-terminal positions are wins in 1 for the
opponent that are never looked at again.

Then ply by ply (:func:`propagate_ply`): every position decided at DTM ``n`` generates its
non-terminal predecessors by unmoves (terminal ones are pruned before they are generated:
:func:`~dobutsu_tb.tablebase.game.unmoves.gen_unmoves`), canonicalises and de-duplicates them
(SPEC §1.4's second trap) and looks them up. A predecessor of a loss in n is a win in n + 1
(set once, by compare-and-swap); a predecessor of a win has its counter decremented atomically
and is a loss in n + 1 when it reaches zero. Ply n only ever decides positions at n + 1, so
processing DTM in order gives the winner the fastest and the loser the slowest line. What is
left undecided is a draw: its byte stays 0, the draw code.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from dobutsu_tb.encoding import config
from dobutsu_tb.encoding.atomics import atomic_cas, atomic_sub, prefetch
from dobutsu_tb.encoding.bits import sort_prefix
from dobutsu_tb.encoding.compact import home_slot, key_hash, table_find, table_key_at
from dobutsu_tb.encoding.jit import njit, prange
from dobutsu_tb.tablebase.enumeration import TAG_NO_MOVES, TAG_WIN1, Enumeration
from dobutsu_tb.tablebase.game.kernels import canonical_key, decode_key, gen_unmoves
from dobutsu_tb.tablebase.game.unmoves import MAX_UNMOVES
from dobutsu_tb.tablebase.values import MAX_STORED_DTM, UNDECIDED

#: Frontier positions handled per kernel call.
_FRONTIER = 1 << 20


@njit(parallel=True)
def _seed(slots, tags, values, n_threads):
    size = slots.shape[0]
    per = (size + n_threads - 1) // n_threads
    for t in prange(n_threads):
        for s in range(t * per, min(size, (t + 1) * per)):
            if slots[s] == 0:
                continue
            tag = tags[s]
            if tag == TAG_WIN1:
                values[s] = 1 + 1
            elif tag == TAG_NO_MOVES:
                values[s] = 0 + 1
            elif tag == 0:
                values[s] = 2 + 1


@njit
def _collect(values, code, start, out):
    """Slots from ``start`` on whose value byte is ``code``, into ``out``; (how many, where it stopped)."""
    n = 0
    s = start
    size = values.shape[0]
    cap = out.shape[0]
    while s < size and n < cap:
        if values[s] == code:
            out[n] = s
            n += 1
        s += 1
    return n, s


@njit
def _propagate_range(slots, layout, values, counters, frontier, lo, hi, ply):
    """:func:`_propagate` for ``frontier[lo:hi]``; returns how many it decided."""
    preds = np.empty(MAX_UNMOVES, np.int64)
    lost = ply % 2 == 0  # the frontier positions are losses: their predecessors win
    code = ply + 2  # value byte of DTM ply + 1
    decided = 0
    for i in range(lo, hi):
        state = decode_key(table_key_at(slots, layout, frontier[i]))
        n = gen_unmoves(state, preds, True)
        for k in range(n):
            preds[k] = canonical_key(preds[k])
        sort_prefix(preds, n)
        m = 0
        prev = np.int64(0)
        for k in range(n):  # distinct canonical predecessors, as hashes, prefetched
            key = preds[k]
            if key != prev:
                h = key_hash(key, layout)
                prefetch(slots, home_slot(h, layout))
                preds[m] = h
                m += 1
                prev = key
        for k in range(m):
            p = table_find(slots, layout, preds[k])
            if p < 0 or values[p] != UNDECIDED:
                continue
            if lost:
                if atomic_cas(values, p, UNDECIDED, code) == UNDECIDED:
                    decided += 1
            elif atomic_sub(counters, p, 1) == 1:
                values[p] = code
                decided += 1
    return decided


@njit(parallel=True)
def _propagate(slots, layout, values, counters, frontier, ply, n_threads):
    """Decide the predecessors of the positions at ``frontier`` (all of DTM ``ply``); returns
    how many were decided (at DTM ``ply + 1``)."""
    decided = 0
    per = (frontier.shape[0] + n_threads - 1) // n_threads
    for t in prange(n_threads):
        decided += _propagate_range(slots, layout, values, counters, frontier, t * per,
                                    min(frontier.shape[0], (t + 1) * per), ply)
    return decided


def seed_values(enum: Enumeration) -> np.ndarray:
    """The value bytes the analysis starts from (module docstring); uint8, shape (capacity,)."""
    values = np.zeros(enum.table.capacity, np.uint8)
    _seed(enum.table.slots, enum.tags, values, config.THREADS)
    return values


def propagate_ply(enum: Enumeration, values: np.ndarray, ply: int) -> tuple[int, int]:
    """Decide the predecessors of every position of DTM ``ply``.

    Parameters
    ----------
    enum : Enumeration
        Its tags serve as counters and are decremented.
    values : numpy.ndarray of uint8, shape (enum.table.capacity,)
        Value bytes, updated in place.
    ply : int
        DTM of the positions whose predecessors are decided.

    Returns
    -------
    (int, int)
        Positions of DTM ``ply`` processed, and positions newly decided at DTM ``ply + 1``.

    Raises
    ------
    OverflowError
        If DTM ``ply + 1`` does not fit the value byte (:data:`MAX_STORED_DTM`).
    """
    table = enum.table
    frontier = np.empty(min(_FRONTIER, table.capacity), np.int64)
    processed = decided = 0
    scan = 0
    while scan < table.capacity:
        n, scan = _collect(values, ply + 1, scan, frontier)
        if n == 0:
            continue
        if ply + 1 > MAX_STORED_DTM:
            raise OverflowError(f"a DTM of {ply + 1} plies does not fit the value byte (at most {MAX_STORED_DTM})")
        decided += int(_propagate(table.slots, table.layout, values, enum.tags, frontier[:n], ply, config.THREADS))
        processed += n
    return processed, decided


def solve(enum: Enumeration, report: Callable[[int, int, int, float], None] | None = None) -> tuple[np.ndarray, float]:
    """Run the retrograde analysis on an enumeration.

    Parameters
    ----------
    enum : Enumeration
        From :func:`~dobutsu_tb.tablebase.enumeration.enumerate_positions`; its tags are used up
        as counters.
    report : callable, optional
        Called once per ply as ``report(ply, processed, decided, seconds)``.

    Returns
    -------
    values : numpy.ndarray of uint8, shape (enum.table.capacity,)
        The value byte of every slot (:mod:`~dobutsu_tb.tablebase.values`; 0 for draws and for
        empty slots).
    seconds : float
        Wall time.
    """
    t0 = time.perf_counter()
    values = seed_values(enum)
    highest = 2
    ply = 0 if enum.no_moves else 1  # DTM 0 is stored only for positions without moves
    while ply <= highest:
        t = time.perf_counter()
        processed, decided = propagate_ply(enum, values, ply)
        if decided:
            highest = max(highest, ply + 1)
        if report is not None:
            report(ply, processed, decided, time.perf_counter() - t)
        ply += 1
    return values, time.perf_counter() - t0
