"""Enumeration of every position reachable from a start (SPEC §1.4).

Non-terminal positions go into a :class:`~dobutsu_tb.encoding.compact.CompactTable` (4 bytes
a slot) with one *tag* byte per slot; terminal positions (catch- or try-terminal) are reached
but never expanded: a :class:`~dobutsu_tb.encoding.compact_set.CompactSet` (3 bytes a slot for the
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

import sys
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from dobutsu_tb.encoding import config, interrupt
from dobutsu_tb.encoding.atomics import prefetch
from dobutsu_tb.encoding.binding import kernel_options
from dobutsu_tb.encoding.bits import find_bytes
from dobutsu_tb.encoding.compact import FULL, CompactTable, table_insert, table_key_at
from dobutsu_tb.encoding.compact_layout import L_ENTRY, home_slot, key_hash, shard_of
from dobutsu_tb.encoding.compact_set import CompactSet, set_add
from dobutsu_tb.encoding.jit import njit, prange
from dobutsu_tb.tablebase.game.game import Game
from dobutsu_tb.tablebase.game.key import decode_key
from dobutsu_tb.tablebase.game.layout import CATCH, MAX_MOVES, NONTERMINAL, TRY
from dobutsu_tb.tablebase.game.rules import child_keys

#: Tags (one byte per table slot). Below TAG_NO_MOVES a tag is the position's counter.
TAG_FRESH = 255
TAG_WIN1 = 254
TAG_NO_MOVES = 253
#: A terminal child in a batch buffer: its hash shifted up, its class (CATCH or TRY) below.
_CLASS_BITS = 2
_CLASS_MASK = (1 << _CLASS_BITS) - 1
#: How many keys ahead of the one being inserted a slot is prefetched.
_PREFETCH_AHEAD = 16

#: The kernels bound to each variant's tables (Game.jitted).
__kernels__ = ("_expand_range", "_expand")


class StartPositionError(ValueError):
    """Raised when a build is asked to start from a terminal position."""


@dataclass
class Enumeration:
    """The reachable set of a start position.

    Attributes
    ----------
    game : Game
        The variant's rules.
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

    game: Game
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


def _expand_range(slots, layout, batch, lo, hi, tags, nt, term, counts):
    """:func:`_expand` for ``batch[lo:hi]``: the children go to the dense lists ``nt[shard]``
    and ``term[shard]`` (this thread's), their lengths to ``counts[shard]``; returns the positions
    without moves among them. The slots and tags of positions a few ahead are prefetched."""
    moves = np.empty(MAX_MOVES, np.int64)
    keys = np.empty(MAX_MOVES, np.int64)
    classes = np.empty(MAX_MOVES, np.int64)
    no_moves = 0
    for b in range(lo, hi):
        if b + _PREFETCH_AHEAD < hi:
            prefetch(slots, batch[b + _PREFETCH_AHEAD])
            prefetch(tags, batch[b + _PREFETCH_AHEAD])
        s = batch[b]
        board, hand = decode_key(table_key_at(slots, layout, s))
        n = child_keys(board, hand, moves, keys, classes)
        win1 = False
        distinct = 0
        for k in range(n):  # drop repeated children (symmetric moves), deal out the others
            key = keys[k]
            repeat = False
            for e in range(k):
                if keys[e] == key:
                    repeat = True
                    break
            if repeat:
                continue
            cls = classes[k]
            h = key_hash(key, layout)
            shard = shard_of(h, layout)
            if cls == NONTERMINAL:
                nt[shard, counts[shard, 0]] = h
                counts[shard, 0] += 1
                distinct += 1
            else:
                term[shard, counts[shard, 1]] = (h << _CLASS_BITS) | cls
                counts[shard, 1] += 1
                win1 |= cls == TRY
        if n == 0:
            tags[s] = TAG_NO_MOVES
            no_moves += 1
        elif win1:
            tags[s] = TAG_WIN1
        else:
            tags[s] = distinct
    return no_moves


@kernel_options(parallel=True)
def _expand(slots, layout, batch, tags, nt, term, counts):
    """Expand the positions at ``batch``, one thread t per ``nt[t]``: the hashes of each
    position's distinct canonical non-terminal children go to ``nt[t, shard]``, of its distinct
    terminal children (with the class below) to ``term[t, shard]``, their numbers to
    ``counts[t, shard]``; each position's tag is set. Returns the positions without moves."""
    n_threads = nt.shape[0]
    no_moves = 0
    per = (batch.shape[0] + n_threads - 1) // n_threads
    for t in prange(n_threads):
        counts[t, :, :] = 0
        no_moves += _expand_range(slots, layout, batch, t * per, min(batch.shape[0], (t + 1) * per), tags,
                                  nt[t], term[t], counts[t])
    return no_moves


@njit
def _insert_shard(shard, slots, layout, table_counts, tags, nt, term, counts, setbuf, set_layout, set_counts,
                  new_by_class):
    """:func:`_insert` for one shard; returns (table failures, set failures). Keys are inserted
    with each one's slot prefetched a few keys ahead, so the cache misses of consecutive
    insertions overlap; new slots are tagged fresh afterwards, prefetched likewise."""
    added = 0
    bad = 0
    fresh = np.empty(counts[:, shard, 0].sum(), np.int64)
    for t in range(nt.shape[0]):
        row = nt[t, shard]
        m = counts[t, shard, 0]
        for i in range(m):
            if i + _PREFETCH_AHEAD < m:
                prefetch(slots, home_slot(row[i + _PREFETCH_AHEAD], layout))
            s = table_insert(slots, layout, row[i])
            if s >= 0:
                fresh[added] = s
                added += 1
            elif s == FULL:
                bad += 1
    for i in range(added):
        if i + _PREFETCH_AHEAD < added:
            prefetch(tags, fresh[i + _PREFETCH_AHEAD])
        tags[fresh[i]] = TAG_FRESH
    table_counts[shard] += added
    entry = set_layout[L_ENTRY]
    bad_set = 0
    for t in range(term.shape[0]):
        row = term[t, shard]
        m = counts[t, shard, 1]
        for i in range(m):
            if i + _PREFETCH_AHEAD < m:
                prefetch(setbuf, home_slot(row[i + _PREFETCH_AHEAD] >> _CLASS_BITS, set_layout) * entry)
            a = set_add(setbuf, set_layout, row[i] >> _CLASS_BITS)
            if a == 1:
                set_counts[shard] += 1
                new_by_class[shard, row[i] & _CLASS_MASK] += 1
            elif a < 0:
                bad_set += 1
    return bad, bad_set


@njit(parallel=True)
def _insert(slots, layout, table_counts, tags, nt, term, counts, setbuf, set_layout, set_counts, new_by_class):
    """Insert a batch's children, one task per shard: new non-terminal children are tagged
    fresh; terminal ones are added to the set and counted by class in ``new_by_class[shard]``.
    Returns the insertions that found no room in the table and in the set (the caller grows
    the one that overflowed and inserts the batch again, which is idempotent)."""
    failed_table = 0
    failed_set = 0
    for shard in prange(nt.shape[1]):
        bad, bad_set = _insert_shard(shard, slots, layout, table_counts, tags, nt, term, counts, setbuf, set_layout,
                                     set_counts, new_by_class)
        failed_table += bad
        failed_set += bad_set
    return failed_table, failed_set


def _regrow_tags(tags: np.ndarray, remap: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros(size, np.uint8)
    used = remap >= 0
    out[remap[used]] = tags[used]
    return out


def enumerate_positions(game: Game, start_state, expected: tuple[int, int] | None = None,
                        progress: Callable[[int, int], None] | None = None,
                        before_growth: Callable[[int, int], None] | None = None) -> Enumeration:
    """Enumerate every position reachable from a start (SPEC §1.4).

    Parameters
    ----------
    game : Game
        The variant's rules.
    start_state : (int, int)
        Packed normalised start state; it must be non-terminal.
    expected : (int, int), optional
        Expected numbers of non-terminal and terminal positions, to size the table and the set
        (they grow when exceeded). Default: :data:`~dobutsu_tb.encoding.config.DEFAULT_EXPECTED` each.
    progress : callable, optional
        Called as ``progress(expanded, found)`` after each batch (positions expanded, and
        non-terminal positions found so far).
    before_growth : callable, optional
        Called as ``before_growth(nonterminal, terminal)`` before the table or the set grows,
        with the numbers of positions they are about to be sized for; it may raise to stop
        (a memory check).

    Returns
    -------
    Enumeration

    Raises
    ------
    StartPositionError
        If the start position is terminal.
    dobutsu_tb.encoding.compact.CompactTableFullError
        If the table or the set cannot grow any further.
    dobutsu_tb.encoding.interrupt.Interrupted
        After SIGINT or SIGTERM inside :func:`~dobutsu_tb.encoding.interrupt.stop_on_signals`
        (checked between batches).
    """
    t0 = time.perf_counter()
    cls = game.classify(start_state)
    royal = game.variant.royal.name
    if cls != NONTERMINAL:
        raise StartPositionError("the start position is terminal: the side to move "
                                 + (f"can capture the enemy {royal}" if cls == CATCH
                                    else f"faces an enemy {royal} that has reached its home rank"))
    kernels = game.jitted(sys.modules[__name__])
    n_nt, n_t = expected or (config.DEFAULT_EXPECTED, config.DEFAULT_EXPECTED)
    threads = config.THREADS
    bits, shift = game.layout["MAX_KEY_BITS"], game.layout["KEY_SHIFT"]
    table = CompactTable(n_nt, bits, shift, config.LOAD_FACTOR, threads)
    terminal = CompactSet(n_t, bits, shift, config.SET_LOAD_FACTOR, threads)
    tags = np.zeros(table.capacity, np.uint8)
    slots, _ = table.insert([game.key_of(start_state)])
    tags[slots[0]] = TAG_FRESH
    batch_size = config.ENUM_BATCH
    batch = np.empty(batch_size, np.int64)
    per_thread = -(-batch_size // threads) * game.layout["MAX_MOVES"]  # room for every child of a thread's share
    shards = table.n_shards  # the table and the set have the same shards: a child's hash picks both
    nt = np.empty((threads, shards, per_thread), np.int64)  # pages never written cost no memory
    term = np.empty((threads, shards, per_thread), np.int64)
    counts = np.zeros((threads, shards, 2), np.int64)
    by_class = np.zeros((table.n_shards, _CLASS_MASK + 1), np.int64)
    expanded = no_moves = 0
    scan = 0
    swept_fresh = False
    while True:
        interrupt.check()
        n, scan = find_bytes(tags, TAG_FRESH, scan, batch)
        if n == 0:
            if not swept_fresh:
                break  # a whole sweep found nothing to expand
            scan, swept_fresh = 0, False
            continue
        swept_fresh = True
        no_moves += kernels._expand(table.slots, table.layout, batch[:n], tags, nt, term, counts)
        expanded += n
        n_nt, n_term = int(counts[:, :, 0].sum()), int(counts[:, :, 1].sum())
        while True:
            if table.room() < n_nt:
                grown = len(table) + max(n_nt, len(table))
                if before_growth is not None:
                    before_growth(grown, len(terminal))
                tags = _regrow_tags(tags, table.grow(grown), table.capacity)
                scan = 0  # slots moved: rescan (expanded positions are no longer fresh)
            if terminal.room() < n_term:
                grown = len(terminal) + max(n_term, len(terminal))
                if before_growth is not None:
                    before_growth(len(table), grown)
                terminal.grow(grown)
            failed_table, failed_set = _insert(table.slots, table.layout, table.counts, tags, nt, term, counts,
                                               terminal.buf, terminal.layout, terminal.counts, by_class)
            if failed_table == 0 and failed_set == 0:
                break
            # A displacement did not fit: grow what overflowed, then insert the batch again.
            if before_growth is not None:
                before_growth(2 * len(table) if failed_table else len(table),
                              2 * len(terminal) if failed_set else len(terminal))
            if failed_table:
                tags = _regrow_tags(tags, table.grow(2 * len(table)), table.capacity)
                scan = 0
            if failed_set:
                terminal.grow(2 * len(terminal))
        if progress is not None:
            progress(expanded, len(table))
    totals = by_class.sum(axis=0)
    return Enumeration(game, table, tags, int(totals[CATCH]), int(totals[TRY]), no_moves, time.perf_counter() - t0)
