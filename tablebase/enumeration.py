"""Enumeration of every position reachable from a start (SPEC §1.4).

Non-terminal positions go into a :class:`~dobutsu_tb.encoding.compact.CompactTable` (4 bytes
a slot) with one *tag* byte per slot; terminal positions (catch- or try-terminal) are reached
but never expanded: a :class:`~dobutsu_tb.encoding.compact.CompactSet` (3 bytes a slot for the
full game) only counts the distinct ones.

The table is walked in sweeps: each sweep scans the tags in slot order and expands every
position tagged :data:`TAG_FRESH` in batches. A batch's children are generated in parallel
(canonical keys, de-duplicated per position) and then inserted with one thread per shard, so no
locks are needed; a new non-terminal child is tagged fresh. Children landing behind the scan
wait for the next sweep, and a sweep that finds nothing fresh ends the enumeration (the order
of expansion does not change the reachable set).

Expanding a position replaces its fresh tag by what the retrograde analysis starts from: the
number of its distinct canonical non-terminal children (the counter of unresolved moves; 0 when
every move lets the opponent capture the lion, a loss in 2), or :data:`TAG_WIN1` when a move
makes a successful try (a win in 1), or :data:`TAG_NO_MOVES` for a position without a legal
move (a loss in 0, as in shogi; SPEC §1.4: none is reachable from the standard start).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from dobutsu_tb.encoding import config
from dobutsu_tb.encoding.atomics import prefetch
from dobutsu_tb.encoding.bits import sort_prefix
from dobutsu_tb.encoding.compact import (
    FULL,
    L_ENTRY,
    CompactSet,
    CompactTable,
    home_slot,
    key_hash,
    set_add,
    shard_of,
    table_insert,
    table_key_at,
)
from dobutsu_tb.encoding.jit import njit, prange
from dobutsu_tb.tablebase.game.kernels import canonical_key, child_keys, classify, decode_key
from dobutsu_tb.tablebase.game.key import KEY_SHIFT, MAX_KEY_BITS
from dobutsu_tb.tablebase.game.rules import CATCH, MAX_MOVES, NONTERMINAL, TRY

#: Tags (one byte per table slot). Below TAG_NO_MOVES a tag is the position's counter.
TAG_FRESH = 255
TAG_WIN1 = 254
TAG_NO_MOVES = 253
#: A terminal child in a batch buffer: its hash shifted up, its class (CATCH or TRY) below.
_CLASS_BITS = 2
_CLASS_MASK = (1 << _CLASS_BITS) - 1
#: Children inserted ahead of the one being inserted are prefetched this far ahead.
_PREFETCH_AHEAD = 8


class StartPositionError(ValueError):
    """Raised when a build is asked to start from a terminal position."""


@dataclass
class Enumeration:
    """The reachable set of a start position.

    Attributes
    ----------
    table : CompactTable
        Canonical keys of the non-terminal positions; a key's slot indexes ``tags``.
    tags : numpy.ndarray of uint8, shape (table.capacity,)
        Per slot: the counter of distinct canonical non-terminal children, or
        :data:`TAG_WIN1` / :data:`TAG_NO_MOVES` (module docstring).
    catch_terminal, try_terminal : int
        Distinct terminal positions reached, by class.
    no_moves : int
        Non-terminal positions without a legal move (losses in 0).
    seconds : float
        Wall time of the enumeration.
    """

    table: CompactTable
    tags: np.ndarray
    catch_terminal: int
    try_terminal: int
    no_moves: int = 0
    seconds: float = 0.0

    @property
    def nonterminal(self) -> int:
        """Non-terminal positions reached."""
        return len(self.table)

    @property
    def reachable(self) -> int:
        """All positions reached, terminal ones included."""
        return self.nonterminal + self.catch_terminal + self.try_terminal


@njit
def _collect(tags, start, out):
    """Slots from ``start`` on whose tag is fresh, into ``out``; returns (how many, where it stopped)."""
    n = 0
    s = start
    size = tags.shape[0]
    cap = out.shape[0]
    while s < size and n < cap:
        if tags[s] == TAG_FRESH:
            out[n] = s
            n += 1
        s += 1
    return n, s


@njit
def _expand_range(slots, layout, batch, lo, hi, tags, nt, nt_n, term, term_n):
    """:func:`_expand` for ``batch[lo:hi]``; returns the positions without moves among them."""
    moves = np.empty(MAX_MOVES, np.int64)
    keys = np.empty(MAX_MOVES, np.int64)
    classes = np.empty(MAX_MOVES, np.int64)
    no_moves = 0
    for b in range(lo, hi):
        s = batch[b]
        n = child_keys(decode_key(table_key_at(slots, layout, s)), moves, keys, classes)
        row, trow = nt[b], term[b]
        a = 0
        c = 0
        win1 = False
        for k in range(n):
            if classes[k] == NONTERMINAL:
                row[a] = keys[k]
                a += 1
            else:
                trow[c] = keys[k] | classes[k]
                c += 1
                win1 |= classes[k] == TRY
        nt_n[b] = _distinct_hashes(row, a, layout, 0)
        term_n[b] = _distinct_hashes(trow, c, layout, _CLASS_BITS)
        if n == 0:
            tags[s] = TAG_NO_MOVES
            no_moves += 1
        elif win1:
            tags[s] = TAG_WIN1
        else:
            tags[s] = nt_n[b]
    return no_moves


@njit
def _distinct_hashes(row, n, layout, class_bits):
    """Sort ``row[:n]`` (keys, with a class in the low ``class_bits`` bits), drop repeats and
    replace each key by its hash, the class kept below it; returns how many are left."""
    sort_prefix(row, n)
    mask = (np.int64(1) << class_bits) - 1
    m = 0
    prev = np.int64(0)
    for k in range(n):
        entry = row[k]
        if entry != prev:
            row[m] = (key_hash(entry & ~mask, layout) << class_bits) | (entry & mask)
            m += 1
            prev = entry
    return m


@njit(parallel=True)
def _expand(slots, layout, batch, tags, n_threads, nt, nt_n, term, term_n):
    """Expand the positions at ``batch``: the hashes of their distinct canonical non-terminal
    children into ``nt[b, :nt_n[b]]``, of their distinct terminal children (with the class)
    into ``term[b, :term_n[b]]``; set each position's tag. Returns positions without moves."""
    no_moves = 0
    per = (batch.shape[0] + n_threads - 1) // n_threads
    for t in prange(n_threads):
        no_moves += _expand_range(slots, layout, batch, t * per, min(batch.shape[0], (t + 1) * per), tags,
                                  nt, nt_n, term, term_n)
    return no_moves


@njit
def _insert_shard(shard, slots, layout, counts, tags, nt, nt_n, setbuf, set_layout, set_counts, term, term_n,
                  new_by_class):
    """:func:`_insert` for one shard; returns (table failures, set failures). Each key's slot is
    prefetched a few keys ahead, so the cache misses overlap."""
    added = 0
    bad = 0
    for b in range(nt_n.shape[0]):
        row = nt[b]
        n = nt_n[b]
        for k in range(n):
            ahead = row[k + _PREFETCH_AHEAD] if k + _PREFETCH_AHEAD < n else -1
            if ahead >= 0 and shard_of(ahead, layout) == shard:
                prefetch(slots, home_slot(ahead, layout))
            h = row[k]
            if shard_of(h, layout) != shard:
                continue
            s = table_insert(slots, layout, h)
            if s >= 0:
                tags[s] = TAG_FRESH
                added += 1
            elif s == FULL:
                bad += 1
    counts[shard] += added
    bad_set = 0
    entry = set_layout[L_ENTRY]
    for b in range(term_n.shape[0]):
        trow = term[b]
        n = term_n[b]
        for k in range(n):
            ahead = trow[k + _PREFETCH_AHEAD] >> _CLASS_BITS if k + _PREFETCH_AHEAD < n else -1
            if ahead >= 0 and shard_of(ahead, set_layout) == shard:
                prefetch(setbuf, home_slot(ahead, set_layout) * entry)
            h = trow[k] >> _CLASS_BITS
            if shard_of(h, set_layout) != shard:
                continue
            a = set_add(setbuf, set_layout, h)
            if a == 1:
                set_counts[shard] += 1
                new_by_class[shard, trow[k] & _CLASS_MASK] += 1
            elif a < 0:
                bad_set += 1
    return bad, bad_set


@njit(parallel=True)
def _insert(slots, layout, counts, tags, nt, nt_n, setbuf, set_layout, set_counts, term, term_n,
            n_shards, new_by_class):
    """Insert a batch's children, one task per shard: new non-terminal children are tagged
    fresh; terminal ones are added to the set and counted by class in ``new_by_class[shard]``.
    Returns the insertions that found no room in the table and in the set (the caller grows
    the one that overflowed and inserts the batch again, which is idempotent)."""
    failed_table = 0
    failed_set = 0
    for shard in prange(n_shards):
        bad, bad_set = _insert_shard(shard, slots, layout, counts, tags, nt, nt_n, setbuf, set_layout, set_counts,
                                     term, term_n, new_by_class)
        failed_table += bad
        failed_set += bad_set
    return failed_table, failed_set


def _regrow_tags(tags: np.ndarray, remap: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros(size, np.uint8)
    used = remap >= 0
    out[remap[used]] = tags[used]
    return out


def enumerate_positions(start_state: int, expected: tuple[int, int] | None = None,
                        progress: Callable[[int, int], None] | None = None) -> Enumeration:
    """Enumerate every position reachable from a start (SPEC §1.4).

    Parameters
    ----------
    start_state : int
        Packed normalised start state; it must be non-terminal.
    expected : (int, int), optional
        Expected numbers of non-terminal and terminal positions, to size the table and the set
        (they grow when exceeded). Default: :data:`~dobutsu_tb.encoding.config.DEFAULT_EXPECTED` each.
    progress : callable, optional
        Called as ``progress(expanded, found)`` after each batch (positions expanded, and
        non-terminal positions found so far).

    Returns
    -------
    Enumeration

    Raises
    ------
    StartPositionError
        If the start position is terminal.
    dobutsu_tb.encoding.compact.CompactTableFullError
        If the table or the set cannot grow any further.
    """
    t0 = time.perf_counter()
    start_state = np.int64(start_state)
    cls = int(classify(start_state))
    if cls != NONTERMINAL:
        raise StartPositionError("the start position is terminal: the side to move "
                                 + ("can capture the enemy lion" if cls == CATCH
                                    else "faces an enemy lion that has reached its home rank"))
    n_nt, n_t = expected or (config.DEFAULT_EXPECTED, config.DEFAULT_EXPECTED)
    threads = config.THREADS
    table = CompactTable(n_nt, MAX_KEY_BITS, KEY_SHIFT, config.LOAD_FACTOR, threads)
    terminal = CompactSet(n_t, MAX_KEY_BITS, KEY_SHIFT, config.SET_LOAD_FACTOR, threads)
    tags = np.zeros(table.capacity, np.uint8)
    slots, _ = table.insert([canonical_key(start_state)])
    tags[slots[0]] = TAG_FRESH
    batch_size = config.ENUM_BATCH
    batch = np.empty(batch_size, np.int64)
    nt = np.empty((batch_size, MAX_MOVES), np.int64)
    term = np.empty((batch_size, MAX_MOVES), np.int64)
    nt_n = np.zeros(batch_size, np.int64)
    term_n = np.zeros(batch_size, np.int64)
    by_class = np.zeros((table.n_shards, _CLASS_MASK + 1), np.int64)
    expanded = no_moves = 0
    scan = 0
    swept_fresh = False
    while True:
        n, scan = _collect(tags, scan, batch)
        if n == 0:
            if not swept_fresh:
                break  # a whole sweep found nothing to expand
            scan, swept_fresh = 0, False
            continue
        swept_fresh = True
        no_moves += _expand(table.slots, table.layout, batch[:n], tags, threads, nt[:n], nt_n[:n],
                            term[:n], term_n[:n])
        expanded += n
        while True:
            if table.room() < int(nt_n[:n].sum()):
                tags = _regrow_tags(tags, table.grow(len(table) + max(int(nt_n[:n].sum()), len(table))),
                                    table.capacity)
                scan = 0  # slots moved: rescan (expanded positions are no longer fresh)
            if terminal.room() < int(term_n[:n].sum()):
                terminal.grow(len(terminal) + max(int(term_n[:n].sum()), len(terminal)))
            failed_table, failed_set = _insert(
                table.slots, table.layout, table.counts, tags, nt[:n], nt_n[:n], terminal.buf, terminal.layout,
                terminal.counts, term[:n], term_n[:n], table.n_shards, by_class)
            if failed_table == 0 and failed_set == 0:
                break
            # A displacement did not fit: grow what overflowed, then insert the batch again.
            if failed_table:
                tags = _regrow_tags(tags, table.grow(2 * len(table)), table.capacity)
                scan = 0
            if failed_set:
                terminal.grow(2 * len(terminal))
        if progress is not None:
            progress(expanded, len(table))
    totals = by_class.sum(axis=0)
    return Enumeration(table, tags, int(totals[CATCH]), int(totals[TRY]), no_moves, time.perf_counter() - t0)
