"""Enumeration of every position reachable from a start (docs/rules.md §6).

Non-terminal positions go into a :class:`~dobutsu_tb.encoding.compact.CompactTable` (4 bytes
a slot) with one *tag* byte per slot; terminal positions (catch- or try-terminal) are reached
but never expanded: a :class:`~dobutsu_tb.encoding.compact_set.CompactSet` (21 entries of 3 bytes in a cache line
for the full game) only counts the distinct ones.

The table is walked in sweeps: each sweep scans the tags in slot order and expands every
position tagged :data:`TAG_FRESH` in batches. A batch's children are generated in parallel
(canonical keys, de-duplicated per position) and then inserted with one thread per shard, so no
locks are needed; a new non-terminal child is tagged fresh. Children landing behind the scan
wait for the next sweep, and a sweep that finds nothing fresh ends the enumeration (the order
of expansion does not change the reachable set).

Insertions grouped by region: into a table or set of 2 GiB or more (the 5x3 game's: 8 and 6 GiB),
a batch's children go grouped by region (:func:`~dobutsu_tb.encoding.routing.grouped_by_region`:
stretches of about 32 MiB of slots or buckets, where a random access costs less than a third),
and batches are bigger (:data:`_BIG_BATCH` positions while the table's and the set's room allow
it), so that each stretch gets thousands of insertions at a time.

Terminal positions in partitions: when the set of terminal positions does not fit the memory
budget, it holds only the first partition of them (``hash & (parts - 1)`` zero) and the others are
counted afterwards (:func:`count_terminal_partitions`). Given a folder (``spill_dir``), the
enumeration appends the other partitions' terminal children to a file each as it meets them, and
the count reads them back; without one, or when a file cannot be written, the count expands every
position again (one pass over the table per partition).

Expanding a position replaces its fresh tag by what the retrograde analysis starts from: the
number of its distinct canonical non-terminal children (the counter of unresolved moves; 0 when
every move lets the opponent capture the lion, a loss in 2), or :data:`TAG_WIN1` when a move
makes a successful try (a win in 1), or :data:`TAG_NO_MOVES` for a position without a legal
move (a loss in 0, as in shogi; docs/rules.md §6: none is reachable from the standard start).
"""

from __future__ import annotations

import errno
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from dobutsu_tb.encoding import config, interrupt
from dobutsu_tb.encoding.atomics import prefetch
from dobutsu_tb.encoding.binding import kernel_options
from dobutsu_tb.encoding.bits import find_bytes
from dobutsu_tb.encoding.compact import (
    FULL,
    CompactTable,
    dense_table_slots,
    remap_dtype,
    table_home,
    table_insert,
    table_key_at,
)
from dobutsu_tb.encoding.compact_layout import (
    L_BITS,
    L_BUCKET_ENTRIES,
    L_ENTRY,
    CompactTableFullError,
    hash_key,
    key_hash,
    shard_of,
)
from dobutsu_tb.encoding.compact_set import (
    ENTRY_3,
    CompactSet,
    set_add,
    set_add_sized,
    set_allocated,
    set_entries,
    set_hash_at,
    set_line,
)
from dobutsu_tb.encoding.jit import njit, prange
from dobutsu_tb.encoding.routing import grouped_by_region, region_bits, route
from dobutsu_tb.encoding.sorting import even_starts, sort_runs
from dobutsu_tb.tablebase.game.game import Game
from dobutsu_tb.tablebase.game.key import decode_key
from dobutsu_tb.tablebase.game.layout import CATCH, MAX_MOVES, NONTERMINAL, TRY
from dobutsu_tb.tablebase.game.rules import child_keys, classify
from dobutsu_tb.tablebase.memory import (
    DENSE_FILL_LIMIT,
    MAX_TERMINAL_PARTS,
    InsufficientMemoryError,
    gib_apart,
    raise_by,
)

#: Tags (one byte per table slot). Below TAG_NO_MOVES a tag is the position's counter.
TAG_FRESH = 255
TAG_WIN1 = 254
TAG_NO_MOVES = 253
#: A terminal child in a batch buffer: its hash shifted up, its class (CATCH or TRY) below.
CLASS_BITS = 2
CLASS_MASK = (1 << CLASS_BITS) - 1
#: The counters of one thread and list group (:func:`thread_counters`) take a cache line of int64s.
COUNTER_WORDS = 8
#: How many keys ahead of the one being inserted a slot is prefetched.
_PREFETCH_AHEAD = 16
#: Fresh positions found at a time and expanded in the order of their keys, batch by batch: in
#: key order, neighbouring positions take the same branches in the move generator, which then
#: costs a fifth less than in the table's hash order (``scripts/bench_moves.py --window``).
_WINDOW = 1 << 21
#: Positions a batch expands when its table or set is grouped by region (what
#: :data:`config.ENUM_BATCH` is to the others; module docstring): grouping pays once a region gets
#: thousands of insertions a batch.
_BIG_BATCH = 1 << 18

#: The kernels bound to each variant's tables (Game.jitted).
__kernels__ = ("_expand_range", "_expand", "_terminal_range", "_terminals", "_keep_partition_zero")


def batch_size(grouped: bool, rooms: tuple, max_moves: int) -> int:
    """Positions the next batch expands: :data:`_BIG_BATCH` when a structure is grouped by region
    and every room in ``rooms`` (keys that surely fit) holds all the children such a batch may
    have, else :data:`config.ENUM_BATCH` (a table or set sized to its count gets small batches
    near its end)."""
    if grouped and all(room >= _BIG_BATCH * max_moves for room in rooms):
        return _BIG_BATCH
    return config.ENUM_BATCH


def child_lists(threads: int, shards: int, batch: int, max_moves: int) -> np.ndarray:
    """A list of children by thread and shard, with room for every child of a thread's share of a
    batch: int64, shape (threads, shards, ceil(batch / threads) * max_moves); pages never written
    cost no memory."""
    return np.empty((threads, shards, -(-batch // threads) * max_moves), np.int64)


#: Terminal children read back from disk at a time (:func:`count_terminal_partitions`): 16 MiB,
#: thousands of insertions a region of a big set (:data:`_BIG_BATCH`), added in parts that fit
#: the set's room (:func:`within_room`).
_SPILL_READ = 1 << 21
#: A table or set grows when its room (keys it may still take) falls below this many and more keys
#: come; until then the keys go in parts that fit its room (:func:`within_room`).
_LEAST_ROOM = 1 << 16


def within_room(values: np.ndarray, keys, grow):
    """``values`` in parts that ``keys`` (a compact table or set) surely has room for: a part at
    most its room, which only the keys new to it use up; it is grown (``grow(expected)``) only when
    the room falls below :data:`_LEAST_ROOM` and more values come. (Values hold many keys already
    there, a cluster round's or a file of terminal children's: growing for all of them would
    double a table or set that is nearly full but big enough.)"""
    at = 0
    while at < values.shape[0]:
        left = values.shape[0] - at
        room = keys.room()
        if room < min(left, _LEAST_ROOM):
            grow(len(keys) + max(left, len(keys)))
            continue
        yield values[at: at + room]
        at += min(room, left)


class TerminalSpill:
    """Files of terminal children (hash above, class below: int64 items) set aside on disk during an
    enumeration, one a partition from 1 to ``parts - 1``, for :func:`count_terminal_partitions`.
    A child reached many times is written as often: the count removes the repeats.

    Parameters
    ----------
    folder : path-like
        An existing folder of the build's own (``--work-dir``); the files are removed by
        :meth:`discard`, by :func:`count_terminal_partitions` as it reads them, and with the folder.
    parts : int
        The terminal partitions (2 or more).

    Attributes
    ----------
    paths : list of Path
        The files, partition 1's first.
    items : numpy.ndarray of int64, shape (parts,)
        The items written to each partition's file (``items[0]`` is 0).
    failed : str or None
        Why the files were given up (a write failed, or the partitions doubled), or None.
    """

    def __init__(self, folder, parts: int):
        self.paths = [Path(folder) / f"terminal-{p}-of-{parts}.bin" for p in range(1, parts)]
        self.items = np.zeros(parts, np.int64)
        self.failed = None
        self._files = []
        try:
            for path in self.paths:
                self._files.append(open(path, "wb"))
        except OSError as exc:
            self.discard(f"cannot make {path} ({exc.strerror or exc})")

    @property
    def nbytes(self) -> int:
        """Bytes written so far."""
        return int(self.items.sum()) * 8

    def write(self, out: np.ndarray, starts: np.ndarray) -> None:
        """Append ``out[starts[p]:starts[p + 1]]`` to partition p's file, for p from 1 (as
        :func:`_split_terminals` leaves them). A write that fails gives every file up
        (:attr:`failed`)."""
        if self.failed is not None:
            return
        try:
            for p, f in enumerate(self._files, 1):
                if starts[p + 1] > starts[p]:
                    f.write(memoryview(out[starts[p]:starts[p + 1]]))
                    self.items[p] += starts[p + 1] - starts[p]
        except OSError as exc:
            self.discard(f"cannot write {f.name} ({exc.strerror or exc})")

    def finish(self) -> None:
        """Close the files (flushed), or give them up when that fails."""
        try:
            for f in self._files:
                f.close()
        except OSError as exc:
            self.discard(f"cannot write {f.name} ({exc.strerror or exc})")

    def check(self) -> None:
        """Give the files up (:attr:`failed`) when one is missing or not the size written: changed
        on disk since, a count from it would be wrong."""
        for p, path in enumerate(self.paths, 1):
            if self.failed is not None:
                return
            try:
                size = os.path.getsize(path)
            except OSError as exc:
                self.discard(f"cannot read {path} ({exc.strerror or exc})")
                return
            if size != self.items[p] * 8:
                self.discard(f"{path} has {size:,} bytes, not the {self.items[p] * 8:,} written")

    def discard(self, why: str) -> None:
        """Give the files up: close and remove them, and say why (:attr:`failed`)."""
        self.failed = why
        for f in self._files:
            try:
                f.close()
            except OSError:
                pass
        for path in self.paths:
            try:
                os.unlink(path)
            except OSError:
                pass
        self._files = []


@njit
def _split_terminals(term, counts, part_mask, out, starts):
    """Move the terminal children of partitions other than 0 (``(item >> CLASS_BITS) & part_mask``
    not zero) out of every list ``term[t, d, :counts[t, d, 1]]`` into ``out``, partition p's to
    ``out[starts[p]:starts[p + 1]]`` (``starts``: int64, shape (parts + 1,)); the lists keep
    partition 0's, in order, and their counts shrink to them."""
    starts[:] = 0
    for t in range(term.shape[0]):
        for d in range(term.shape[1]):
            for i in range(counts[t, d, 1]):
                p = (term[t, d, i] >> CLASS_BITS) & part_mask
                if p != 0:
                    starts[p + 1] += 1
    for p in range(1, starts.shape[0] - 1):
        starts[p + 1] += starts[p]
    at = starts.copy()
    for t in range(term.shape[0]):
        for d in range(term.shape[1]):
            kept = 0
            for i in range(counts[t, d, 1]):
                e = term[t, d, i]
                p = (e >> CLASS_BITS) & part_mask
                if p == 0:
                    term[t, d, kept] = e
                    kept += 1
                else:
                    out[at[p]] = e
                    at[p] += 1
            counts[t, d, 1] = kept


@njit
def _deal_by_shard(items, n, layout, term, counts):
    """Deal ``items[:n]`` (hash above, class below) to the list ``term[0, shard]`` of each one's
    shard, their lengths to ``counts[0, shard, 1]``."""
    counts[0, :, 1] = 0
    for i in range(n):
        d = shard_of(items[i] >> CLASS_BITS, layout)
        term[0, d, counts[0, d, 1]] = items[i]
        counts[0, d, 1] += 1


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
        Distinct terminal positions reached, by class (of the first terminal partition only,
        until :func:`count_terminal_partitions` has counted the others).
    no_moves : int
        Non-terminal positions without a legal move (losses in 0).
    seconds : float
        Wall time of the enumeration.
    terminal_parts : int
        The terminal partitions (:mod:`~dobutsu_tb.tablebase.memory`).
    spilled : TerminalSpill or None
        The terminal children of partitions 1 to ``terminal_parts - 1`` set aside on disk, for
        :func:`count_terminal_partitions` (None: it expands the table again).
    profile : dict of str to float
        Wall seconds of the enumeration's parts (``expand``: generating children; ``insert``:
        inserting them; ``terminal``: the passes of :func:`count_terminal_partitions`), for
        benchmarks (``scripts/bench_build.py``).
    """

    game: Game
    table: CompactTable
    tags: np.ndarray
    catch_terminal: int
    try_terminal: int
    no_moves: int = 0
    seconds: float = 0.0
    terminal_parts: int = 1
    profile: dict = field(default_factory=dict)
    spilled: "TerminalSpill | None" = None

    @property
    def nonterminal(self) -> int:
        """Non-terminal positions reached."""
        return len(self.table)

    @property
    def reachable(self) -> int:
        """All positions reached, terminal ones included."""
        return self.nonterminal + self.catch_terminal + self.try_terminal


def _expand_range(rules, slots, layout, batch, lo, hi, tags, n_owners, nt, term, counts, part_mask):
    """:func:`_expand` for ``batch[lo:hi]``: the children go to the dense lists ``nt[d]`` and
    ``term[d]`` of their destination d (this thread's; terminal children of partition 0 only:
    ``hash & part_mask`` zero, the low bits, so that a partition spreads over every shard), their
    lengths to ``counts[d]``; returns the positions without moves among them. A destination is
    the child's shard of this table, or with ``n_owners`` its owner among the workers of a build
    on a cluster (:func:`~dobutsu_tb.encoding.routing.route`). The slots and tags of positions a
    few ahead are prefetched."""
    moves = np.empty(rules[MAX_MOVES], np.int64)
    keys = np.empty(rules[MAX_MOVES], np.int64)
    classes = np.empty(rules[MAX_MOVES], np.int64)
    no_moves = 0
    for b in range(lo, hi):
        if b + _PREFETCH_AHEAD < hi:
            prefetch(slots, batch[b + _PREFETCH_AHEAD])
            prefetch(tags, batch[b + _PREFETCH_AHEAD])
        s = batch[b]
        board, hand = decode_key(rules, table_key_at(slots, layout, s))
        n = child_keys(rules, board, hand, moves, keys, classes)
        win1 = False
        distinct = 0
        for k in range(n):  # drop repeated children (symmetric moves), deal out the others
            if repeated(keys, k):
                continue
            key = keys[k]
            cls = classes[k]
            h = key_hash(key, layout)
            d = route(h, layout, n_owners)
            if cls == NONTERMINAL:
                nt[d, counts[d, 0]] = h
                counts[d, 0] += 1
                distinct += 1
            else:
                win1 |= cls == TRY
                if h & part_mask == 0:
                    term[d, counts[d, 1]] = (h << CLASS_BITS) | cls
                    counts[d, 1] += 1
        if n == 0:
            tags[s] = TAG_NO_MOVES
            no_moves += 1
        elif win1:
            tags[s] = TAG_WIN1
        else:
            tags[s] = distinct
    return no_moves


@kernel_options(parallel=True)
def _expand(rules, slots, layout, batch, tags, n_owners, nt, term, counts, part_mask):
    """Expand the positions at ``batch``, one thread t per ``nt[t]``: the hashes of each
    position's distinct canonical non-terminal children go to ``nt[t, d]``, of its distinct
    terminal children (with the class below) to ``term[t, d]``, their numbers to ``counts[t, d]``,
    where d is the child's shard, or its owner when ``n_owners`` is not 0 (:func:`_expand_range`);
    each position's tag is set. Returns the positions without moves."""
    n_threads = nt.shape[0]
    no_moves = 0
    per = (batch.shape[0] + n_threads - 1) // n_threads
    for t in prange(n_threads):
        counts[t, :, :] = 0
        no_moves += _expand_range(rules, slots, layout, batch, t * per, min(batch.shape[0], (t + 1) * per), tags,
                                  n_owners, nt[t], term[t], counts[t], part_mask)
    return no_moves


@njit
def insert_run(slots, layout, hashes, lo, hi, fresh, added):
    """Insert the keys of ``hashes[lo:hi]`` (all of one shard: only its owner may) with each one's
    slot prefetched a few keys ahead, so the cache misses of consecutive insertions overlap; the
    slots of the new keys go to ``fresh[added:]``. Returns (new keys, insertions that found no
    room)."""
    new = 0
    bad = 0
    for i in range(lo, hi):
        if i + _PREFETCH_AHEAD < hi:
            prefetch(slots, table_home(slots, layout, hashes[i + _PREFETCH_AHEAD]))
        s = table_insert(slots, layout, hashes[i])
        if s >= 0:
            fresh[added + new] = s
            new += 1
        elif s == FULL:
            bad += 1
    return new, bad


@njit
def tag_fresh(tags, fresh, lo, hi):
    """Tag the slots ``fresh[lo:hi]`` fresh, each prefetched a few ahead."""
    for i in range(lo, hi):
        if i + _PREFETCH_AHEAD < hi:
            prefetch(tags, fresh[i + _PREFETCH_AHEAD])
        tags[fresh[i]] = TAG_FRESH


@njit
def _insert_shard(shard, slots, layout, table_counts, tags, nt, term, counts, setbuf, set_layout, set_counts,
                  new_by_class, part_mask, table_group, set_group):
    """:func:`_insert` for one shard, every thread's list for it (:func:`insert_run`); returns
    (table failures, set failures). New slots are tagged fresh afterwards. With ``table_group``
    (``set_group``) region bits, the shard's keys go grouped by region
    (:func:`~dobutsu_tb.encoding.routing.grouped_by_region`), else thread by thread as they came."""
    added = 0
    bad = 0
    fresh = np.empty(counts[:, shard, 0].sum(), np.int64)
    if table_group:
        run = np.empty(fresh.shape[0], np.int64)
        n = grouped_by_region(nt, shard, counts, 0, layout[L_BITS] - table_group, run)
        added, bad = insert_run(slots, layout, run, 0, n, fresh, 0)
    else:
        for t in range(nt.shape[0]):
            new, failed = insert_run(slots, layout, nt[t, shard], 0, counts[t, shard, 0], fresh, added)
            added += new
            bad += failed
    tag_fresh(tags, fresh, 0, added)
    table_counts[shard] += added
    bad_set = 0
    # (one call of add_terminals, which is inlined with a loop for each entry width: two calls
    # compiled four loops, 3 s more of compiling for the largest kernel)
    run = np.empty(counts[:, shard, 1].sum() if set_group else 0, np.int64)
    n = grouped_by_region(term, shard, counts, 1, set_layout[L_BITS] - set_group + CLASS_BITS, run) if set_group else 0
    for t in range(1 if set_group else term.shape[0]):
        items = run if set_group else term[t, shard]
        hi = n if set_group else counts[t, shard, 1]
        bad_set += add_terminals(setbuf, set_layout, items, 0, hi, part_mask, set_counts, new_by_class, shard)
    return bad, bad_set


@njit(parallel=True)
def insert_grouped(slots, layout, table_counts, tags, hashes, starts, fresh, fresh_n):
    """Insert hashes grouped by shard (:func:`~dobutsu_tb.encoding.routing.group_by_shard`: what a
    worker of a build on a cluster received), one thread per shard (:func:`insert_run`); the new
    keys' slots are tagged fresh and written to ``fresh[starts[s]:starts[s] + fresh_n[s]]``.
    Returns the insertions that found no room (grow the table, insert again: idempotent)."""
    n_shards = starts.shape[0] - 1
    failed = 0
    for shard in prange(n_shards):
        lo, hi = starts[shard], starts[shard + 1]
        new, bad = insert_run(slots, layout, hashes, lo, hi, fresh, lo)
        tag_fresh(tags, fresh, lo, lo + new)
        table_counts[shard] += new
        fresh_n[shard] = new
        failed += bad
    return failed


@njit(parallel=True)
def add_terminals_grouped(buf, layout, set_counts, items, starts, by_class):
    """Add terminal children (hash above, class below; grouped by shard) to a set, one thread per
    shard (:func:`add_terminals`); the new ones are counted by class in ``by_class[shard]``.
    Returns the additions that found no room (grow the set, add again: idempotent)."""
    n_shards = starts.shape[0] - 1
    failed = 0
    for shard in prange(n_shards):
        failed += add_terminals(buf, layout, items, starts[shard], starts[shard + 1], 0, set_counts, by_class, shard)
    return failed


@njit(inline="always")
def _add_terminal_run(setbuf, set_layout, items, lo, hi, part_mask, set_counts, by_class, shard, nbytes, n_entries):
    """:func:`add_terminals` for entries of ``nbytes`` bytes, ``n_entries`` a bucket
    (:func:`~dobutsu_tb.encoding.compact_set.set_add_sized`)."""
    bad = 0
    new = np.zeros(CLASS_MASK + 1, np.int64)  # counted here, added to the shared counters once
    for i in range(lo, hi):
        if i + _PREFETCH_AHEAD < hi:
            prefetch(setbuf, set_line(items[i + _PREFETCH_AHEAD] >> CLASS_BITS, set_layout))
        if (items[i] >> CLASS_BITS) & part_mask != 0:
            continue  # no longer partition 0's (the partitions doubled meanwhile)
        a = set_add_sized(setbuf, set_layout, items[i] >> CLASS_BITS, nbytes, n_entries)
        if a == 1:
            new[items[i] & CLASS_MASK] += 1
        elif a < 0:
            bad += 1
    set_counts[shard] += new.sum()
    for c in range(CLASS_MASK + 1):  # (a loop: an array added to a slice compiles numba's shape-error message, 1.6 s)
        by_class[shard, c] += new[c]
    return bad


@njit(inline="always")
def add_terminals(setbuf, set_layout, items, lo, hi, part_mask, set_counts, by_class, shard):
    """Add the terminal children ``items[lo:hi]`` (hash above, class below) of shard ``shard``
    whose hash lies in partition 0 (``hash & part_mask`` zero) to a set, each one's bucket
    prefetched a few ahead; the new ones are counted in ``set_counts[shard]`` and by class in
    ``by_class[shard]``. Returns the additions that found no room. Branches once on the set's
    entry width, so that the loop compiles for the full game's (:data:`~dobutsu_tb.encoding.compact_set.ENTRY_3`)."""
    if set_layout[L_ENTRY] == ENTRY_3[0]:
        return _add_terminal_run(setbuf, set_layout, items, lo, hi, part_mask, set_counts, by_class, shard,
                                 ENTRY_3[0], ENTRY_3[1])
    return _add_terminal_run(setbuf, set_layout, items, lo, hi, part_mask, set_counts, by_class, shard,
                             set_layout[L_ENTRY], set_layout[L_BUCKET_ENTRIES])


@njit(parallel=True)
def _insert(slots, layout, table_counts, tags, nt, term, counts, setbuf, set_layout, set_counts, new_by_class,
            part_mask, table_group, set_group):
    """Insert a batch's children, one task per shard: new non-terminal children are tagged
    fresh; terminal ones are added to the set and counted by class in ``new_by_class[shard]``.
    ``table_group`` and ``set_group``: the region bits of the table and of the set
    (:func:`~dobutsu_tb.encoding.routing.region_bits`; 0: not grouped).
    Returns the insertions that found no room in the table and in the set (the caller grows
    the one that overflowed and inserts the batch again, which is idempotent)."""
    failed_table = 0
    failed_set = 0
    for shard in prange(nt.shape[1]):
        # (np.int64: numba types a prange's index int64, then uint64 in the loop it runs in
        # parallel, and would compile _insert_shard, the largest kernel, once for each: 6 s)
        bad, bad_set = _insert_shard(np.int64(shard), slots, layout, table_counts, tags, nt, term, counts, setbuf,
                                     set_layout, set_counts, new_by_class, part_mask, table_group, set_group)
        failed_table += bad
        failed_set += bad_set
    return failed_table, failed_set


def _terminal_range(rules, slots, layout, batch, lo, hi, part_mask, part, term, counts):
    """The distinct terminal children of the positions at ``batch[lo:hi]`` whose hash lies in
    partition ``part`` (``hash & part_mask``), into this thread's lists ``term[shard]`` (class
    below the hash) and their lengths into ``counts[shard, 1]``."""
    moves = np.empty(rules[MAX_MOVES], np.int64)
    keys = np.empty(rules[MAX_MOVES], np.int64)
    classes = np.empty(rules[MAX_MOVES], np.int64)
    for b in range(lo, hi):
        if b + _PREFETCH_AHEAD < hi:
            prefetch(slots, batch[b + _PREFETCH_AHEAD])
        board, hand = decode_key(rules, table_key_at(slots, layout, batch[b]))
        n = child_keys(rules, board, hand, moves, keys, classes)
        for k in range(n):
            cls = classes[k]
            if cls == NONTERMINAL or repeated(keys, k):
                continue
            h = key_hash(keys[k], layout)
            if h & part_mask != part:
                continue
            shard = shard_of(h, layout)
            term[shard, counts[shard, 1]] = (h << CLASS_BITS) | cls
            counts[shard, 1] += 1


@kernel_options(parallel=True)
def _terminals(rules, slots, layout, batch, part_mask, part, term, counts):
    """:func:`_terminal_range` of ``batch``, one thread t per ``term[t]``."""
    n_threads = term.shape[0]
    per = (batch.shape[0] + n_threads - 1) // n_threads
    for t in prange(n_threads):
        counts[t, :, :] = 0
        _terminal_range(rules, slots, layout, batch, t * per, min(batch.shape[0], (t + 1) * per), part_mask, part,
                        term[t], counts[t])


def _keep_partition_zero(rules, old, old_layout, new, new_layout, counts, part_mask, dropped):
    """Copy the keys of a terminal set whose hash lies in partition 0 (``hash & part_mask``)
    into a new set; count the others by terminal class into ``dropped`` (their positions are
    decoded and classified: the set keeps no class). Returns the keys that did not fit."""
    failed = 0
    for s in range(set_entries(old_layout)):
        h = set_hash_at(old, old_layout, s)
        if h < 0:
            continue
        if h & part_mask == 0:
            a = set_add(new, new_layout, h)
            if a < 0:
                failed += 1
            else:
                counts[shard_of(h, new_layout)] += a
        else:
            board, hand = decode_key(rules, hash_key(h, old_layout))
            dropped[classify(rules, board, hand)] += 1
    return failed


@njit
def repeated(keys, k):
    """Whether ``keys[k]`` is among ``keys[:k]``: a child reached by two moves (symmetric ones)."""
    key = keys[k]
    for e in range(k):
        if keys[e] == key:
            return True
    return False


@njit
def _occupied(slots, start, out):
    """Occupied slots ``>= start`` into ``out`` until it is full; returns (how many, where the
    search stopped)."""
    n = 0
    s = start
    size = slots.shape[0]
    while s < size and n < out.shape[0]:
        if slots[s] != 0:
            out[n] = s
            n += 1
        s += 1
    return n, s


def sort_shares(a: np.ndarray, parts: int) -> None:
    """Sort each of ``parts`` equal shares of ``a`` (int64) in place, the shares on every thread
    (:func:`~dobutsu_tb.encoding.sorting.sort_runs`): a thread of a kernel given a slice of a share
    meets its items in order."""
    sort_runs(a, even_starts(a.shape[0], parts))


def slots_in_key_order(table: CompactTable, found: np.ndarray, parts: int) -> np.ndarray:
    """The slots ``found`` (int64, shape (n,)), each of ``parts`` equal shares in the order of
    its keys' top 31 bits (:func:`sort_shares`), so that a thread given a slice of a share
    expands neighbouring positions one after another: they take the same branches in the move
    generator (:data:`_WINDOW`). In place, as found, when slots do not fit 32 bits."""
    if table.capacity > 1 << 32:  # pragma: no cover - a table of 4 G slots
        return found
    packed = table.keys_at(found)
    packed >>= 32  # the key's bits 62..32 above the slot
    packed <<= 32
    packed |= found
    sort_shares(packed, parts)
    packed &= np.int64(0xFFFFFFFF)
    return packed


def thread_counters(threads: int, groups: int) -> np.ndarray:
    """Zeroed counters of the lengths of each thread's lists, by group (shard or worker), for the
    kernels that deal items out to them: int64, shape (threads, groups, COUNTER_WORDS), of which
    ``[t, group, 0]`` and ``[t, group, 1]`` are used (non-terminal and terminal children; one list
    a group uses only the first). A thread writes its counters at every item it deals out, so each
    thread's take whole cache lines: counters of two threads on one line would make the line move
    between their cores at every item."""
    return np.zeros((threads, groups, COUNTER_WORDS), np.int64)


@njit
def _move_tags(tags, remap, out):
    for s in range(remap.shape[0]):
        if remap[s] >= 0:
            out[remap[s]] = tags[s]


def regrow_tags(tags: np.ndarray, remap: np.ndarray, size: int) -> np.ndarray:
    """The tags of a table that grew (uint8, shape (size,)): each old slot's tag at its new slot.

    Parameters
    ----------
    tags : numpy.ndarray of uint8, shape (old capacity,)
    remap : numpy.ndarray of int32 or int64, shape (old capacity,)
        Each old slot's new slot, -1 for an empty one (:meth:`CompactTable.grow`).
    size : int
        The grown table's capacity.

    Returns
    -------
    numpy.ndarray of uint8, shape (size,)
        Made with no temporaries beside it: a table's growth holds its old tags, the new ones and
        ``remap`` at once, which the memory budget counts (:func:`growth_bytes_per_old_slot`).
    """
    out = np.zeros(size, np.uint8)
    _move_tags(tags, remap, out)
    return out


def growth_bytes_per_old_slot(grown_slots: int) -> int:
    """The bytes a table's growth to ``grown_slots`` slots holds per slot of the old table, beside
    the grown table and tags: the old slot's new place (:func:`~dobutsu_tb.encoding.compact.remap_dtype`,
    4 bytes up to ``2**31`` slots, else 8) and its tag, kept until :func:`regrow_tags` has moved
    it. The old slots themselves, held until the new ones are filled, are counted apart: they are
    given back before the new tags are made."""
    return np.dtype(remap_dtype(grown_slots)).itemsize + 1


def enumerate_positions(game: Game, start_state, expected: tuple[int, int] | None = None,
                        progress: Callable[[int, int], None] | None = None, budget: int | None = None,
                        terminal_parts: int = 1, set_load_factor: float = config.SET_LOAD_FACTOR,
                        table_load: float | None = None, spill_dir=None) -> Enumeration:
    """Enumerate every position reachable from a start.

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
    budget : int, optional
        The most bytes the table, its tags and the terminal set may take together (None: no
        bound). When the set would outgrow it, the terminal partitions double instead.
    terminal_parts : int, optional
        Partitions of the terminal positions to start with (a power of two; :mod:`~.memory`):
        the set counts only the first; :func:`count_terminal_partitions` counts the others.
    set_load_factor : float, optional
        How full the set of terminal positions may get.
    table_load : float, optional
        With ``expected``: a dense table sized for its non-terminal count at this load
        (:func:`~dobutsu_tb.encoding.compact.dense_table_slots`), which grows, to a power of two of
        slots, only past :data:`~.memory.DENSE_FILL_LIMIT`. Default: a power of two of slots.
    spill_dir : path-like, optional
        With ``terminal_parts`` above 1: an existing folder where the terminal children of the
        other partitions are set aside (:class:`TerminalSpill`, about 8 bytes a move that reaches
        one), for :func:`count_terminal_partitions` to read back instead of expanding every
        position again. They are given up (:attr:`TerminalSpill.failed`) when a write fails or
        the partitions double.

    Returns
    -------
    Enumeration
        Its terminal counts are partition 0's until :func:`count_terminal_partitions` runs.

    Raises
    ------
    ValueError
        If ``budget`` or an expected count is negative, ``terminal_parts`` is not a power of two
        up to :data:`~.memory.MAX_TERMINAL_PARTS`, or a load is not between 0 and 1.
    StartPositionError
        If the start position is terminal.
    dobutsu_tb.tablebase.memory.InsufficientMemoryError
        If the first tables (sized for ``expected``) or the table's growth would break ``budget``
        (before they are made).
    dobutsu_tb.encoding.compact.CompactTableFullError
        If the table or the set cannot grow any further.
    dobutsu_tb.encoding.interrupt.Interrupted
        After SIGINT or SIGTERM inside :func:`~dobutsu_tb.encoding.interrupt.stop_on_signals`
        (checked between batches).
    """
    if budget is not None and budget < 0:
        raise ValueError(f"the budget must be a number of bytes, 0 or more; {budget:,} given")
    if terminal_parts < 1 or terminal_parts & (terminal_parts - 1) or terminal_parts > MAX_TERMINAL_PARTS:
        raise ValueError(f"terminal_parts must be a power of two from 1 to {MAX_TERMINAL_PARTS}; "
                         f"{terminal_parts} given")
    if expected is not None and min(expected) < 0:
        raise ValueError(f"the expected counts must be 0 or more; {expected} given")
    for name, load in (("set_load_factor", set_load_factor), ("table_load", table_load)):
        if load is not None and not 0.0 < load < 1.0:
            raise ValueError(f"{name} must be between 0 and 1 (a share of the slots), not {load}")
    t0 = time.perf_counter()
    cls = game.classify(start_state)
    royal = game.variant.royal.name
    if cls != NONTERMINAL:
        raise StartPositionError("the start position is terminal: the side to move "
                                 + (f"can capture the enemy {royal}" if cls == CATCH
                                    else f"faces an enemy {royal} that has reached its far rank safely"))
    kernels = game.jitted(sys.modules[__name__])
    rules = game.rules_array
    n_nt, n_t = expected or (config.DEFAULT_EXPECTED, config.DEFAULT_EXPECTED)
    threads = config.THREADS
    bits, shift = game.layout["MAX_KEY_BITS"], game.layout["KEY_SHIFT"]
    parts = terminal_parts
    dense = table_load is not None and bool(expected)
    if dense:
        table = CompactTable(n_nt, bits, shift, DENSE_FILL_LIMIT, threads,
                             capacity=dense_table_slots(n_nt, table_load, threads, bits))
    else:
        table = CompactTable(n_nt, bits, shift, config.LOAD_FACTOR, threads)
    terminal = CompactSet(max(1, n_t // parts), bits, shift, set_load_factor, threads)

    def refuse(what: str, need: int, after: str = "", advice: str = ""):
        """Stop: ``need`` bytes for ``what`` the enumeration does next break the budget."""
        said, given = gib_apart(need, budget)
        raise InsufficientMemoryError(f"the enumeration needs more memory than the budget ({given} for its tables): "
                                      f"{what} {said}; {advice}{raise_by(need - budget)}{after}")

    def tables_held():
        """The bytes the table, its tags and the set hold (but the bookkeeping arrays)."""
        return table.nbytes + table.capacity + terminal.allocated

    if budget is not None and tables_held() > budget:  # (their pages not touched yet)
        sized = (f"for {n_nt:,} non-terminal and {n_t:,} terminal positions"
                 + (f" in {parts} partitions" if parts > 1 else "") if expected else "of the default size")
        refuse(f"its first tables, {sized}, need", tables_held(), advice="expect fewer positions, " if expected else "")
    spill = TerminalSpill(spill_dir, parts) if spill_dir is not None and parts > 1 else None
    spill_starts = np.zeros(parts + 1, np.int64)
    tags = np.zeros(table.capacity, np.uint8)
    tags[table.insert([game.key_of(start_state)])[0][0]] = TAG_FRESH
    max_moves = game.layout["MAX_MOVES"]
    window = np.empty(_WINDOW, np.int64)
    shards = table.n_shards  # the table and the set have the same shards: a child's hash picks both
    nt, term = (child_lists(threads, shards, config.ENUM_BATCH, max_moves) for _ in range(2))
    counts = thread_counters(threads, shards)
    by_class = np.zeros((table.n_shards, CLASS_MASK + 1), np.int64)
    dropped = np.zeros(CLASS_MASK + 1, np.int64)  # counted, then moved to another partition
    bookkeeping = counts.nbytes + by_class.nbytes + dropped.nbytes + table.counts.nbytes  # (counted too)

    def halve_set():
        """Double the terminal partitions: keep partition 0's half of the set. The smaller set is
        filled while the whole one is held: when that would break the budget, keep a quarter (an
        eighth ...) instead, and when no share fits, refuse."""
        nonlocal terminal, parts
        if spill is not None:  # its files hold partitions of the old count: expand the table again instead
            spill.discard("the terminal positions' partitions doubled")
        factor = 2
        while budget is not None and held(len(table), len(terminal), "halving", factor) > budget:
            if parts * factor >= MAX_TERMINAL_PARTS or len(terminal) // factor <= 1:
                refuse(f"it has found {len(table):,} non-terminal positions and {len(terminal):,} terminal ones "
                       f"so far, and setting terminal positions aside needs",
                       held(len(table), len(terminal), "halving", factor))
            factor *= 2
        parts *= factor
        smaller = CompactSet(max(1, len(terminal) // factor), bits, shift, set_load_factor, threads)
        if kernels._keep_partition_zero(rules, terminal.buf, terminal.layout, smaller.buf, smaller.layout,
                                        smaller.counts, parts - 1, dropped):
            raise CompactTableFullError("the terminal set could not be rebuilt")  # pragma: no cover
        terminal = smaller
        return factor

    def held(nt, t, growing, factor=2):
        """The bytes the table, its tags and the set hold at most while one of them changes:
        ``growing`` "table", while the table grows to hold ``nt`` positions (its old slots too, the
        set as it is); "set", while the set grows to hold ``t`` positions (its old buckets too,
        the table as it is); "halving", while the set (of ``t`` positions) makes its share of one
        partition in ``factor`` (the table and the whole set as they are)."""
        if growing == "table":  # the new slots are filled while the old ones are held; then the new tags are made
            slots, nbytes = table.grown_size(nt)
            return (nbytes + slots + terminal.allocated + bookkeeping
                    + growth_bytes_per_old_slot(slots) * table.capacity + max(0, table.nbytes - slots))
        tables = tables_held() + bookkeeping
        if growing == "set":  # the new buckets are filled while the old ones are held
            return tables + terminal.grown_nbytes(t)
        return tables + set_allocated(max(1, t // factor), bits, shift, set_load_factor, threads)

    def over(nt, t, growing):
        """Whether :func:`held` breaks the budget."""
        return budget is not None and held(nt, t, growing) > budget

    def check_table(grown_nt):
        while over(grown_nt, len(terminal), "table") and parts < MAX_TERMINAL_PARTS and len(terminal) > 1:
            halve_set()
        need = held(grown_nt, len(terminal), "table")
        if budget is not None and need > budget:
            refuse(f"it has found {len(table):,} non-terminal positions so far and its table's next growth needs",
                   need, " (the table may grow again)")

    def grow_set(grown_t):
        """Grow the terminal set, or (when that would break the budget) halve what it holds."""
        while over(len(table), grown_t, "set") and parts < MAX_TERMINAL_PARTS:
            factor = halve_set()
            grown_t = len(terminal) + max(0, grown_t - factor * len(terminal))
        if terminal.room() < grown_t - len(terminal):
            need = held(len(table), grown_t, "set")
            if budget is not None and need > budget:  # as many partitions as there may be, and still too big
                refuse(f"it has found {len(table):,} non-terminal positions so far, and its terminal set's next "
                       f"growth, in {parts} partitions, needs", need)
            terminal.grow(grown_t)

    expanded = no_moves = 0
    expand_seconds = insert_seconds = 0.0
    scan = 0
    swept_fresh = False
    pending = window[:0]  # fresh slots found, in key order, not yet expanded
    try:
        while True:
            interrupt.check()
            if pending.shape[0] == 0:
                w, scan = find_bytes(tags, TAG_FRESH, scan, window)
                if w == 0:
                    if not swept_fresh:
                        break  # a whole sweep found nothing to expand
                    scan, swept_fresh = 0, False
                    continue
                swept_fresh = True
                pending = slots_in_key_order(table, window[:w], threads)
            size = batch_size(bool(region_bits(table.nbytes) or region_bits(terminal.allocated)),
                              (table.room(), terminal.room()), max_moves)
            if nt.shape[2] * threads < size * max_moves:
                nt, term = (child_lists(threads, shards, size, max_moves) for _ in range(2))
            batch, pending = pending[:size], pending[size:]
            n = batch.shape[0]
            part_mask = parts - 1
            spilling = spill is not None and spill.failed is None
            t_expand = time.perf_counter()
            # (spilling: every terminal child comes back, and the other partitions' go to their files)
            no_moves += kernels._expand(rules, table.slots, table.layout, batch, tags, 0, nt, term, counts,
                                        0 if spilling else part_mask)
            if spilling:
                out = np.empty(int(counts[:, :, 1].sum()), np.int64)
                _split_terminals(term, counts, part_mask, out, spill_starts)
                spill.write(out, spill_starts)
                del out
            t_insert = time.perf_counter()
            expand_seconds += t_insert - t_expand
            expanded += n
            n_nt, n_term = int(counts[:, :, 0].sum()), int(counts[:, :, 1].sum())
            most_in_a_shard = int(counts[:, :, 0].sum(axis=0).max())  # the room asked is a shard's
            while True:
                if table.room() < most_in_a_shard:
                    grown = len(table) + max(n_nt, len(table))
                    check_table(grown)
                    tags = regrow_tags(tags, table.grow(grown), table.capacity)
                    scan, pending = 0, window[:0]  # slots moved: rescan (expanded positions are no longer fresh)
                if terminal.room() < n_term:
                    grow_set(len(terminal) + max(n_term, len(terminal)))
                part_mask = parts - 1
                failed_table, failed_set = _insert(table.slots, table.layout, table.counts, tags, nt, term, counts,
                                                   terminal.buf, terminal.layout, terminal.counts, by_class, part_mask,
                                                   region_bits(table.nbytes), region_bits(terminal.allocated))
                if failed_table == 0 and failed_set == 0:
                    break
                # A displacement did not fit: grow what overflowed, then insert the batch again.
                if failed_table:
                    check_table(2 * len(table))
                    tags = regrow_tags(tags, table.grow(2 * len(table)), table.capacity)
                    scan, pending = 0, window[:0]
                if failed_set:
                    grow_set(2 * len(terminal))
            insert_seconds += time.perf_counter() - t_insert
            if progress is not None:
                progress(expanded, len(table))
    except BaseException:
        if spill is not None:
            spill.discard("the enumeration stopped")
        raise
    if spill is not None:
        spill.finish()
    totals = by_class.sum(axis=0) - dropped
    return Enumeration(game, table, tags, int(totals[CATCH]), int(totals[TRY]), no_moves, time.perf_counter() - t0,
                       parts, {"expand": expand_seconds, "insert": insert_seconds}, spill)


def count_terminal_partitions(enum: Enumeration, progress: Callable[[int], None] | None = None,
                              budget: int | None = None) -> None:
    """Count the terminal positions of the partitions the enumeration left out (1 to
    ``enum.terminal_parts - 1``): per partition, the distinct ones among the terminal children
    the enumeration set aside in its file (:attr:`Enumeration.spilled`, removed once read), or
    without such files, among every position's terminal children, generated again in one pass
    over the table. Adds them to ``enum``'s counts.

    Parameters
    ----------
    enum : Enumeration
    progress : callable, optional
        Called as ``progress(n)`` with the children read from a file (a spilled enumeration), or
        with the positions of each batch expanded.
    budget : int, optional
        As for :func:`enumerate_positions` (the table, its tags and one partition's set).

    Raises
    ------
    OSError
        If a file of set-aside children cannot be read.
    dobutsu_tb.encoding.interrupt.Interrupted
        After SIGINT or SIGTERM (checked between batches).
    """
    if enum.terminal_parts <= 1:
        return
    if enum.spilled is not None:
        enum.spilled.check()
    if enum.spilled is not None and enum.spilled.failed is None:
        _count_spilled_partitions(enum, progress)
        return
    t0 = time.perf_counter()
    game, table = enum.game, enum.table
    kernels = game.jitted(sys.modules[__name__])
    rules = game.rules_array
    bits, shift = game.layout["MAX_KEY_BITS"], game.layout["KEY_SHIFT"]
    threads = config.THREADS
    part_mask = enum.terminal_parts - 1
    max_moves = game.layout["MAX_MOVES"]
    batch = np.empty(max(_BIG_BATCH, config.ENUM_BATCH), np.int64)
    term = child_lists(threads, table.n_shards, config.ENUM_BATCH, max_moves)
    counts = thread_counters(threads, table.n_shards)
    no_nt = np.empty((threads, table.n_shards, 0), np.int64)
    expected = max(1, (enum.catch_terminal + enum.try_terminal))
    for part in range(1, enum.terminal_parts):
        terminal = CompactSet(expected, bits, shift, config.SET_LOAD_FACTOR, threads)
        by_class = np.zeros((table.n_shards, CLASS_MASK + 1), np.int64)
        start = 0
        while start < table.capacity:
            interrupt.check()
            size = batch_size(bool(region_bits(terminal.allocated)), (terminal.room(),), max_moves)
            if term.shape[2] * threads < size * max_moves:
                term = child_lists(threads, table.n_shards, size, max_moves)
            n, start = _occupied(table.slots, start, batch[:size])
            if n == 0:
                break
            kernels._terminals(rules, table.slots, table.layout, batch[:n], part_mask, part, term, counts)
            n_term = int(counts[:, :, 1].sum())
            while True:
                if terminal.room() < n_term:
                    terminal.grow(len(terminal) + max(n_term, len(terminal)))
                _, failed = _insert(table.slots, table.layout, table.counts, enum.tags, no_nt, term, counts,
                                    terminal.buf, terminal.layout, terminal.counts, by_class, 0, 0,
                                    region_bits(terminal.allocated))
                if failed == 0:
                    break
                terminal.grow(2 * len(terminal))
            if progress is not None:
                progress(n)
        totals = by_class.sum(axis=0)
        enum.catch_terminal += int(totals[CATCH])
        enum.try_terminal += int(totals[TRY])
        del terminal
    enum.seconds += time.perf_counter() - t0
    enum.profile["terminal"] = time.perf_counter() - t0


def _count_spilled_partitions(enum: Enumeration, progress: Callable[[int], None] | None) -> None:
    """:func:`count_terminal_partitions` from the files of :attr:`Enumeration.spilled`: each read
    in slices of :data:`_SPILL_READ` children into a set of its own (grouped by region when big),
    and removed once counted."""
    t0 = time.perf_counter()
    table, spill = enum.table, enum.spilled
    bits, shift = enum.game.layout["MAX_KEY_BITS"], enum.game.layout["KEY_SHIFT"]
    threads = config.THREADS
    items = np.empty(_SPILL_READ, np.int64)
    term = np.empty((1, table.n_shards, _SPILL_READ), np.int64)
    counts = thread_counters(1, table.n_shards)
    no_nt = np.empty((1, table.n_shards, 0), np.int64)
    expected = max(1, (enum.catch_terminal + enum.try_terminal))
    try:
        for part, path in enumerate(spill.paths, 1):
            terminal = CompactSet(expected, bits, shift, config.SET_LOAD_FACTOR, threads)
            by_class = np.zeros((table.n_shards, CLASS_MASK + 1), np.int64)
            read = 0
            with open(path, "rb") as f:
                while True:
                    interrupt.check()
                    n = f.readinto(memoryview(items).cast("B")) // 8
                    if n == 0:
                        break
                    read += n
                    for part_items in within_room(items[:n], terminal, terminal.grow):
                        while True:
                            _deal_by_shard(part_items, part_items.shape[0], terminal.layout, term, counts)
                            if _insert(table.slots, table.layout, table.counts, enum.tags, no_nt, term, counts,
                                       terminal.buf, terminal.layout, terminal.counts, by_class, 0, 0,
                                       region_bits(terminal.allocated))[1] == 0:
                                break
                            terminal.grow(2 * len(terminal))  # a displacement did not fit: add again (idempotent)
                    if progress is not None:
                        progress(n)
            if read != spill.items[part]:  # (changed on disk since: a count from it would be wrong)
                raise OSError(errno.EIO, f"{read:,} children read back of the {spill.items[part]:,} written", path)
            os.unlink(path)
            totals = by_class.sum(axis=0)
            enum.catch_terminal += int(totals[CATCH])
            enum.try_terminal += int(totals[TRY])
            del terminal
    finally:
        spill.discard("counted")  # (what is left of the files: all of them, when reading failed)
    enum.spilled = None
    enum.seconds += time.perf_counter() - t0
    enum.profile["terminal"] = time.perf_counter() - t0
