"""Retrograde analysis: WDL and DTM of every non-terminal position (SPEC §1.5).

The analysis starts from what enumeration recorded (:mod:`tablebase.generate`): a win in 1 for
each position with a move onto a try-terminal position, and each position's number of distinct
canonical non-terminal children. Catch-terminal children are wins in 1 for the opponent that are
never looked at again, so a position whose children are all catch-terminal is a loss in 2
(:func:`mark_immediate_losses`).

Then ply by ply (:func:`propagate_ply`): every position decided at DTM ``n`` (a win if n is odd,
a loss if even) generates its predecessors by unmoves; they are canonicalised and de-duplicated
per position (SPEC §1.4's second trap), then looked up. A predecessor of a loss in n is a win in
n + 1; a predecessor of a win has its counter decremented and is a loss in n + 1 when the
counter reaches zero. Ply n only ever decides positions at n + 1, so processing DTM in order
gives the winner the fastest and the loser the slowest line. What is left is a draw
(:func:`mark_draws`).
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from dobutsu_tb.encoding import config
from dobutsu_tb.encoding.bits import sort_prefix
from dobutsu_tb.encoding.hashtable import find_slot
from dobutsu_tb.encoding.jit import njit, prange
from dobutsu_tb.tablebase.enumeration import Enumeration
from dobutsu_tb.tablebase.game.kernels import canonical_key, decode_key, gen_unmoves
from dobutsu_tb.tablebase.game.unmoves import MAX_UNMOVES
from dobutsu_tb.tablebase.values import DRAW, LOSS, UNKNOWN, WIN


@njit(parallel=True)
def _mark_immediate_losses(table, counter, wdl, dtm):
    n = 0
    for s in prange(table.shape[0]):
        if table[s] != 0 and wdl[s] == UNKNOWN and counter[s] == 0:
            wdl[s] = LOSS
            dtm[s] = 2
            n += 1
    return n


@njit
def _collect(dtm, wdl, ply, lo, hi, out):
    n = 0
    for s in range(lo, hi):
        if dtm[s] == ply and wdl[s] != UNKNOWN:
            out[n] = s
            n += 1
    return n


@njit(parallel=True)
def _predecessor_slots(table, shard_cap, n_shards, frontier, preds, n_preds):
    """``preds[b, :n_preds[b]]`` = the slots of the distinct canonical predecessors of the
    position at ``frontier[b]`` that are in the table; ``n_preds[b] = -1`` on overflow."""
    for b in prange(frontier.shape[0]):
        row = preds[b]
        n = gen_unmoves(decode_key(table[frontier[b]]), row)
        if n < 0:
            n_preds[b] = -1
            continue
        for k in range(n):
            row[k] = canonical_key(row[k])
        sort_prefix(row, n)
        m = 0
        prev = np.int64(0)
        for k in range(n):
            key = row[k]
            if key == prev:
                continue
            prev = key
            s = find_slot(table, shard_cap, n_shards, key)
            if s >= 0:
                row[m] = s
                m += 1
        n_preds[b] = m


@njit(parallel=True)
def _apply(preds, n_preds, counter, wdl, dtm, ply, n_parts):
    """Decide the predecessors of a batch of positions of DTM ``ply``; one task per slot class
    ``slot % n_parts``, so no two tasks touch one slot. Returns how many were decided."""
    decided = 0
    child_lost = ply % 2 == 0
    for part in prange(n_parts):
        mine = 0
        for b in range(preds.shape[0]):
            for k in range(n_preds[b]):
                s = preds[b, k]
                if s % n_parts != part or wdl[s] != UNKNOWN:
                    continue
                if child_lost:
                    wdl[s] = WIN
                    dtm[s] = ply + 1
                    mine += 1
                else:
                    c = counter[s] - 1
                    counter[s] = c
                    if c == 0:
                        wdl[s] = LOSS
                        dtm[s] = ply + 1
                        mine += 1
        decided += mine
    return decided


@njit(parallel=True)
def _mark_draws(table, wdl):
    n = 0
    for s in prange(table.shape[0]):
        if table[s] != 0 and wdl[s] == UNKNOWN:
            wdl[s] = DRAW
            n += 1
    return n


def mark_immediate_losses(enum: Enumeration) -> int:
    """Positions all of whose moves let the opponent capture the lion: loss in 2. Returns the count."""
    return int(_mark_immediate_losses(enum.table.table, enum.counter, enum.wdl, enum.dtm))


def propagate_ply(enum: Enumeration, ply: int) -> tuple[int, int]:
    """Decide the predecessors of every position of DTM ``ply``.

    Parameters
    ----------
    enum : Enumeration
        Its ``wdl``, ``dtm`` and ``counter`` arrays are updated in place.
    ply : int
        DTM of the positions whose predecessors are decided.

    Returns
    -------
    (int, int)
        Positions of DTM ``ply`` processed, and positions newly decided at DTM ``ply + 1``.
    """
    table = enum.table
    frontier = np.empty(config.RETRO_BLOCK, np.int64)
    batch = config.RETRO_BATCH
    preds = np.empty((batch, MAX_UNMOVES), np.int64)
    n_preds = np.empty(batch, np.int64)
    processed = decided = 0
    for lo in range(0, table.capacity, config.RETRO_BLOCK):
        hi = min(table.capacity, lo + config.RETRO_BLOCK)
        nf = _collect(enum.dtm, enum.wdl, ply, lo, hi, frontier)
        for b0 in range(0, nf, batch):
            part = frontier[b0:min(nf, b0 + batch)]
            nb = part.shape[0]
            _predecessor_slots(table.table, table.shard_capacity, table.n_shards, part,
                               preds[:nb], n_preds[:nb])
            if n_preds[:nb].min() < 0:
                raise RuntimeError("MAX_UNMOVES is too small")
            decided += _apply(preds[:nb], n_preds[:nb], enum.counter, enum.wdl, enum.dtm, ply,
                              config.THREADS)
        processed += nf
    return processed, int(decided)


def mark_draws(enum: Enumeration) -> int:
    """Every position still undecided is a draw. Returns the count."""
    return int(_mark_draws(enum.table.table, enum.wdl))


def solve(enum: Enumeration, report: Callable[[int, int, int, float], None] | None = None) -> float:
    """Run the retrograde analysis on an enumeration, in place.

    Parameters
    ----------
    enum : Enumeration
        From :func:`tablebase.generate.enumerate_positions`; its ``wdl`` and ``dtm`` end final.
    report : callable, optional
        Called once per ply as ``report(ply, processed, decided, seconds)``.

    Returns
    -------
    float
        Wall time in seconds.
    """
    t0 = time.perf_counter()
    mark_immediate_losses(enum)
    highest = 2
    ply = 0 if enum.no_moves else 1  # DTM 0 is stored only for positions without moves
    while ply <= highest:
        t = time.perf_counter()
        processed, decided = propagate_ply(enum, ply)
        if decided:
            highest = max(highest, ply + 1)
        if report is not None:
            report(ply, processed, decided, time.perf_counter() - t)
        ply += 1
    mark_draws(enum)
    return time.perf_counter() - t0
