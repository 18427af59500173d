"""Retrograde analysis: WDL and DTM of every non-terminal position (docs/rules.md §7).

Values live in one byte per table slot (:mod:`dobutsu_tb.tablebase.values`: 0 undecided, else
DTM + 1, a win when the DTM is odd); the enumeration's tags serve as the counters of unresolved
moves. :func:`seed_values` starts from what enumeration found: a win in 1 for each position
with a successful try, a loss in 2 for each whose every move lets the lion be caught (counter
0), a loss in 0 for a position without moves. Catch-terminal positions are wins in 1 for the
opponent that are never looked at again.

Then ply by ply (:func:`propagate_ply`): every position decided at DTM ``n`` generates its
non-terminal predecessors by unmoves (terminal ones are pruned before they are generated:
:func:`~dobutsu_tb.tablebase.game.unmoves.gen_unmoves`), canonicalises and de-duplicates them
(docs/rules.md §6, the second trap) and looks them up. A predecessor of a loss in n is a win in n + 1
(set once, by compare-and-swap); a predecessor of a win has its counter decremented atomically
and is a loss in n + 1 when it reaches zero. Ply n only ever decides positions at n + 1, so
processing DTM in order gives the winner the fastest and the loser the slowest line. What is
left undecided is a draw: its byte stays 0, the draw code.

In a table of 2 GiB or more (the 5x3 game's), a ply's predecessors are not looked up position by
position as they are generated: the predecessors of half a million frontier positions are
generated first (:func:`_predecessors`, as for a build on a cluster), then looked up and updated
grouped by region of the table (:func:`~dobutsu_tb.encoding.routing.grouped_by_region`,
:func:`apply_predecessors`), where a random access costs less than a third.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from dobutsu_tb.encoding import config, interrupt
from dobutsu_tb.encoding.atomics import atomic_cas, atomic_sub, prefetch
from dobutsu_tb.encoding.binding import kernel_options
from dobutsu_tb.encoding.bits import sort_prefix
from dobutsu_tb.encoding.compact import table_find, table_home
from dobutsu_tb.encoding.compact_layout import L_BITS, key_hash
from dobutsu_tb.encoding.jit import njit, prange
from dobutsu_tb.encoding.routing import grouped_by_region, owner_of, region_bits
from dobutsu_tb.encoding.sorting import even_starts
from dobutsu_tb.tablebase.enumeration import TAG_NO_MOVES, TAG_WIN1, Enumeration, sort_shares, thread_counters
from dobutsu_tb.tablebase.game.key import decode_key
from dobutsu_tb.tablebase.game.layout import MAX_UNMOVES
from dobutsu_tb.tablebase.game.unmoves import parent_keys
from dobutsu_tb.tablebase.values import LONG, UNDECIDED

#: Frontier positions handled per kernel call, and per group inside it; predecessors a worker of a
#: build on a cluster received, looked up per group.
_FRONTIER = 1 << 20
#: Frontier positions whose predecessors are looked up together, grouped by region, in a big
#: table (module docstring).
_GROUPED_FRONTIER = 1 << 19
_GROUP = 16
_APPLY_GROUP = 32
#: The room of a thread's list of decisions beyond one group's most (:func:`propagate_ply`); a
#: thread of the standard game decides at most 1.13 M positions of its 0.5 M of a kernel call.
_SPARE = 1 << 21
#: Frontier positions whose keys are sorted together before their predecessors are generated
#: (each thread's share of a window in key order: neighbours then take the same branches in
#: the unmove generator, which costs 25 % less a position than in the table's hash order,
#: ``scripts/bench_moves.py --window``).
_WINDOW = 1 << 22

#: The kernels bound to each board shape (Game.jitted).
__kernels__ = ("group_parents", "_propagate_range", "_propagate", "_predecessors_range", "_predecessors")


@njit(parallel=True)
def seed_cells(slots, tags, values, counters, n_threads):
    """The values and counters the analysis starts from: the counter is the tag; a win in 1 (a
    try), a loss in 0 (no moves), a loss in 2 (counter 0) are decided. Also the cluster
    workers' (:mod:`~dobutsu_tb.tablebase.cluster`)."""
    size = slots.shape[0]
    per = (size + n_threads - 1) // n_threads
    for t in prange(n_threads):
        for s in range(t * per, min(size, (t + 1) * per)):
            if slots[s] == 0:
                continue
            tag = tags[s]
            counters[s] = tag
            if tag == TAG_WIN1:
                values[s] = 1 + 1
            elif tag == TAG_NO_MOVES:
                values[s] = 0 + 1
            elif tag == 0:
                values[s] = 2 + 1


@njit(parallel=True)
def _count_equal(slots, values, code, n_blocks, counts):
    size = slots.shape[0]
    per = (size + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        n = 0
        for s in range(b * per, min(size, (b + 1) * per)):
            if values[s] == code and slots[s] != 0:
                n += 1
        counts[b] = n


@njit(parallel=True)
def _fill_equal(slots, values, code, n_blocks, offsets, out):
    size = slots.shape[0]
    per = (size + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        j = offsets[b]
        for s in range(b * per, min(size, (b + 1) * per)):
            if values[s] == code and slots[s] != 0:
                out[j] = s
                j += 1


def _in_memory(n: int, dtype) -> np.ndarray:
    return np.empty(n, dtype)


def _scan(slots: np.ndarray, values: np.ndarray, code: int, dtype=np.int64, alloc=_in_memory) -> np.ndarray:
    """Every occupied slot whose value byte is ``code`` (ascending), into ``alloc(n, dtype)``."""
    n_blocks = 64
    counts = np.zeros(n_blocks, np.int64)
    _count_equal(slots, values, code, n_blocks, counts)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    out = alloc(int(counts.sum()), dtype)
    _fill_equal(slots, values, code, n_blocks, offsets, out)
    return out


@kernel_options(inline="always")
def group_parents(rules, layout, slots, frontier, lo, hi, preds, hashes, home):
    """The hashes of the distinct canonical non-terminal predecessors of each position of keys
    ``frontier[lo:hi]`` into ``hashes`` (de-duplicated per position: docs/rules.md §6, the second
    trap); returns how many. With ``home``, each one's home slot in ``slots`` is prefetched."""
    m = 0
    for i in range(lo, hi):
        board, hand = decode_key(rules, frontier[i])
        n = parent_keys(rules, board, hand, preds)
        sort_prefix(preds, n)
        prev = np.int64(0)
        for k in range(n):
            key = preds[k]
            if key != prev:
                h = key_hash(key, layout)
                if home:
                    prefetch(slots, table_home(slots, layout, h))
                hashes[m] = h
                m += 1
                prev = key
    return m


@njit(inline="always")
def apply_group(slots, layout, values, counters, hashes, lo, hi, found, lost, code, out, decided):
    """Decide the predecessors ``hashes[lo:hi]`` of positions of one ply (skipping those not in the
    table: unreachable): of losses (``lost``) a win, once (compare-and-swap); of wins a decrement of
    the counter, a loss at zero. Looked up first, their value bytes (and counters) prefetched, then
    updated, so that the cache misses of a group overlap. Writes the slots decided (value byte
    ``code``) to ``out[decided:]``; returns the new ``decided``."""
    f = 0
    for k in range(lo, hi):
        p = table_find(slots, layout, hashes[k])
        if p >= 0:
            prefetch(values, p)
            if not lost:
                prefetch(counters, p)
            found[f] = p
            f += 1
    for k in range(f):
        p = found[k]
        if values[p] != UNDECIDED:
            continue
        if lost:
            if atomic_cas(values, p, UNDECIDED, code) != UNDECIDED:
                continue
        elif atomic_sub(counters, p, 1) == 1:
            values[p] = code
        else:
            continue
        out[decided] = p
        decided += 1
    return decided


def _propagate_range(rules, slots, layout, values, counters, frontier, lo, hi, ply, code, out):
    """:func:`_propagate` for the keys ``frontier[lo:hi]``, the slots it decides going to ``out``;
    returns (how many it decided, where it stopped). It stops early, at a group, when ``out``
    might not hold that group's decisions: the caller keeps them and goes on from there.

    Positions go in groups of :data:`_GROUP`: the group's distinct canonical predecessors are
    generated and their home slots prefetched (:func:`group_parents`), then looked up and
    updated (:func:`apply_group`); so the cache misses of a group overlap. A group decides at
    most its distinct predecessors, ``_GROUP * MAX_UNMOVES``."""
    max_unmoves = rules[MAX_UNMOVES]
    preds = np.empty(max_unmoves, np.int64)
    hashes = np.empty(_GROUP * max_unmoves, np.int64)
    found = np.empty(_GROUP * max_unmoves, np.int64)
    lost = ply % 2 == 0  # the frontier positions are losses: their predecessors win
    decided = 0
    for g in range(lo, hi, _GROUP):
        if out.shape[0] - decided < _GROUP * max_unmoves:
            return decided, g
        m = group_parents(rules, layout, slots, frontier, g, min(hi, g + _GROUP), preds, hashes, True)
        decided = apply_group(slots, layout, values, counters, hashes, 0, m, found, lost, code, out, decided)
    return decided, hi


@kernel_options(parallel=True)
def _propagate(rules, slots, layout, values, counters, frontier, starts, ends, ply, code, out, out_n):
    """Decide the predecessors of the positions of keys ``frontier`` (all of DTM ``ply``), thread
    t those of ``frontier[starts[t]:ends[t]]``: its decisions (at DTM ``ply + 1``, value byte
    ``code``) go to ``out[t, :out_n[t]]``. A thread whose row fills stops early; ``starts[t]``
    is left where it stopped, to call again from (:func:`propagate_ply`)."""
    for t in prange(out.shape[0]):
        out_n[t], starts[t] = _propagate_range(rules, slots, layout, values, counters, frontier, starts[t], ends[t],
                                               ply, code, out[t])


def _predecessors_range(rules, slots, layout, frontier, lo, hi, n_owners, out, counts):
    """:func:`_predecessors` for the keys ``frontier[lo:hi]`` into one thread's lists ``out[owner]``
    (:func:`group_parents`, in groups of :data:`_GROUP`)."""
    max_unmoves = rules[MAX_UNMOVES]
    preds = np.empty(max_unmoves, np.int64)
    hashes = np.empty(_GROUP * max_unmoves, np.int64)
    for g in range(lo, hi, _GROUP):
        m = group_parents(rules, layout, slots, frontier, g, min(hi, g + _GROUP), preds, hashes, False)
        for k in range(m):
            o = owner_of(hashes[k], n_owners)
            out[o, counts[o, 0]] = hashes[k]
            counts[o, 0] += 1


@kernel_options(parallel=True)
def _predecessors(rules, slots, layout, frontier, n_owners, out, counts):
    """The distinct canonical non-terminal predecessors of each position of keys ``frontier`` (a
    ply of a build on a cluster), as hashes, one thread t per ``out[t]``: into ``out[t, owner,
    :counts[t, owner, 0]]`` (:func:`~dobutsu_tb.tablebase.enumeration.thread_counters`), for their
    owners to decide (:func:`apply_predecessors`)."""
    n_threads = out.shape[0]
    per = (frontier.shape[0] + n_threads - 1) // n_threads
    for t in prange(n_threads):
        counts[t, :, :] = 0
        _predecessors_range(rules, slots, layout, frontier, t * per, min(frontier.shape[0], (t + 1) * per), n_owners,
                            out[t], counts[t])


@njit(parallel=True)
def apply_predecessors(slots, layout, values, counters, hashes, lost, code, n_threads, out, out_n):
    """Decide the predecessors (hashes) that a worker of a build on a cluster received, of
    positions decided at one ply (:func:`apply_group`, in groups of :data:`_GROUP` positions'
    worth); ``code`` is the value byte of the next ply. Thread t takes a t-th of the hashes and
    writes the slots it decides to ``out[lo_t:lo_t + out_n[t]]`` (``lo_t`` its first hash), so
    ``out`` has the length of ``hashes``."""
    n = hashes.shape[0]
    per = (n + n_threads - 1) // n_threads
    for t in prange(n_threads):
        lo = t * per
        hi = min(n, (t + 1) * per)
        found = np.empty(_APPLY_GROUP, np.int64)
        decided = 0
        for g in range(lo, hi, _APPLY_GROUP):
            end = min(hi, g + _APPLY_GROUP)
            for k in range(g, end):
                prefetch(slots, table_home(slots, layout, hashes[k]))
            decided = apply_group(slots, layout, values, counters, hashes, g, end, found, lost, code, out[lo:],
                                  decided)
        out_n[t] = decided


def frontier_keys(table, frontier: np.ndarray, parts: int) -> np.ndarray:
    """The keys (int64) of a frontier's slots, each of ``parts`` equal shares sorted
    (:func:`~dobutsu_tb.tablebase.enumeration.sort_shares`), so that a thread given a share, or
    a slice of one, meets its positions in key order (:data:`_WINDOW`)."""
    keys = table.keys_at(frontier)
    sort_shares(keys, parts)
    return keys


def seed_values(enum: Enumeration) -> np.ndarray:
    """The value byte and counter of every slot, interleaved so that one cache line holds both
    (uint16, shape (capacity,): byte 0 the value, byte 1 the counter), as the analysis starts
    from them (module docstring). The enumeration's tags are copied and dropped."""
    cells = np.zeros(enum.table.capacity, np.uint16)
    values, counters = value_bytes(cells), counter_bytes(cells)
    seed_cells(enum.table.slots, enum.tags, values, counters, config.THREADS)
    enum.tags = None
    return cells


def value_bytes(cells: np.ndarray) -> np.ndarray:
    """The value bytes (a strided uint8 view) of interleaved cells."""
    return cells.view(np.uint8)[0::2]


@njit(parallel=True)
def _gather(values, n_blocks, out):
    size = values.shape[0]
    per = (size + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        for s in range(b * per, min(size, (b + 1) * per)):
            out[s] = values[s]


@njit(parallel=True)
def _compact_in_place(buf, n, n_blocks):
    """``buf[s] = buf[2 * s]`` for every s < n, in place: in rounds ``[lo, 2 lo)``, each on every
    thread. A round reads ``[2 lo, 4 lo)``, past what it writes, and what it overwrites was read by
    the rounds before (byte j is read for s = j / 2 < lo)."""
    lo = 1
    while lo < n:
        hi = min(n, 2 * lo)
        per = (hi - lo + n_blocks - 1) // n_blocks
        for b in prange(n_blocks):
            for s in range(lo + b * per, min(hi, lo + (b + 1) * per)):
                buf[s] = buf[2 * s]
        lo = hi


def _give_back(buf: np.ndarray, start: int) -> None:
    """Give the whole pages of ``buf[start:]`` (uint8, its own memory) back to the system
    (``madvise(MADV_DONTNEED)``: the process's resident memory drops by them; reading them again
    would give zeros). Where the system has no ``madvise`` the memory stays until the cells are
    freed."""
    import ctypes
    import mmap

    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):  # (not Linux)
        return
    page = mmap.PAGESIZE
    lo = -(-(buf.ctypes.data + start) // page) * page
    hi = (buf.ctypes.data + buf.shape[0]) // page * page
    if hi > lo:
        madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        madvise(lo, hi - lo, mmap.MADV_DONTNEED)


def contiguous_values(values: np.ndarray) -> np.ndarray:
    """The value bytes of :func:`value_bytes` (or any uint8 array), contiguous, so that the
    cells they were part of, and their counters, need not be held.

    The value bytes of cells are moved to the cells' first half, in place and on every thread,
    and the second half's pages are given back to the system: the values then take one byte a
    slot, where a copy held three at once (the cells and the copy: the standard build's sort phase
    peaked at 1.05 GiB, now 0.93), and the records' key ranges can be larger
    (:meth:`~dobutsu_tb.tablebase.memory.Sizes.records`). Their counters are lost. Another strided
    array is copied, on every thread.

    Parameters
    ----------
    values : numpy.ndarray of uint8, shape (n,)
        Strided or not.

    Returns
    -------
    numpy.ndarray of uint8, shape (n,), C-contiguous
        ``values`` itself if it is contiguous already; the cells' memory for their value bytes.
        (``np.ascontiguousarray`` copied the standard build's 134 M bytes on one thread: 0.30 s
        of its 0.5 s sort phase, which then scaled 1.45 from one thread to two; docs/building.md.)
    """
    if values.flags.c_contiguous:
        return values
    n = values.shape[0]
    cells = values.base
    if (isinstance(cells, np.ndarray) and cells.dtype == np.uint16 and cells.ndim == 1 and cells.flags.c_contiguous
            and cells.flags.writeable and cells.flags.owndata and cells.shape[0] == n and values.strides == (2,)
            and values.ctypes.data == cells.ctypes.data):
        buf = cells.view(np.uint8)
        _compact_in_place(buf, n, 64)
        _give_back(buf, n)
        return buf[:n]
    out = np.empty(n, np.uint8)
    _gather(values, 64, out)
    return out


def counter_bytes(cells: np.ndarray) -> np.ndarray:
    """The counters (a strided uint8 view) of interleaved cells."""
    return cells.view(np.uint8)[1::2]


def slot_dtype(capacity: int):
    """The dtype of lists of slots of a table of ``capacity`` slots: uint32 when it fits."""
    return np.uint32 if capacity <= 1 << 32 else np.int64


#: The shortest DTM kept in the lists of long DTMs (LONG - 1 = 254 plies; the tests lower it).
LONG_DTM = LONG - 1


def value_code(dtm: int) -> int:
    """The value byte of a decided position of DTM ``dtm`` during the analysis: DTM + 1, or
    :data:`~dobutsu_tb.tablebase.values.LONG` for a DTM too long for the byte (then the position's
    slot is in a list of its ply, :attr:`Solution.long_slots`)."""
    return dtm + 1 if dtm < LONG_DTM else LONG


def _joined(parts: list, dtype, alloc) -> np.ndarray:
    """The arrays of ``parts`` one after another, in ``alloc(n, dtype)``."""
    out = alloc(sum(p.shape[0] for p in parts), dtype)
    at = 0
    for p in parts:
        out[at: at + p.shape[0]] = p
        at += p.shape[0]
    return out


class PlyBuffers:
    """What :func:`propagate_ply` writes into, kept from ply to ply so that a ply touches no fresh
    memory but its result (each page of a new array costs a fault and its zeroing: py-spy counted
    0.8 s of the standard build's 39 s of analysis in copying each kernel call's decisions into new
    arrays): the kernel's rows of decisions, and the array the ply's decisions are gathered in
    (grown by a quarter when a ply decides more than any before)."""

    def __init__(self, threads: int, max_unmoves: int, dtype):
        self.out = np.empty((threads, _SPARE + _GROUP * max_unmoves), dtype)
        self.gathered = np.empty(0, dtype)
        self.n = 0
        self.threads, self.max_unmoves, self.dtype = threads, max_unmoves, dtype
        self.lists = self.counts = self.hashes = self.slots = None

    def grouped(self):
        """The arrays of a ply's predecessors looked up grouped by region (made at the first call;
        their pages cost memory only where written): each thread's list of hashes, its count,
        the hashes grouped, the slots decided."""
        if self.lists is None:
            most = _GROUPED_FRONTIER * self.max_unmoves
            self.lists = np.empty((self.threads, 1, -(-_GROUPED_FRONTIER // self.threads) * self.max_unmoves),
                                  np.int64)
            self.counts = thread_counters(self.threads, 1)
            self.hashes = np.empty(most, np.int64)
            self.slots = np.empty(most, self.dtype)
        return self.lists, self.counts, self.hashes, self.slots

    def clear(self) -> None:
        """Start a ply: no decisions gathered."""
        self.n = 0

    def decided(self) -> np.ndarray:
        """The decisions gathered so far (a view)."""
        return self.gathered[:self.n]

    def append(self, row: np.ndarray) -> None:
        """Append ``row`` to the decisions gathered (growing :attr:`gathered` when it is full)."""
        end = self.n + row.shape[0]
        if end > self.gathered.shape[0]:
            grown = np.empty(max(end, self.gathered.shape[0] * 5 // 4), self.gathered.dtype)  # at most a quarter unused
            grown[:self.n] = self.gathered[:self.n]
            self.gathered = grown
        self.gathered[self.n:end] = row
        self.n = end


def propagate_ply(enum: Enumeration, cells: np.ndarray, ply: int, frontier: np.ndarray,
                  alloc=_in_memory, buffers: PlyBuffers | None = None) -> np.ndarray:
    """Decide the predecessors of every position of DTM ``ply``.

    Parameters
    ----------
    enum : Enumeration
        The table.
    cells : numpy.ndarray of uint16, shape (enum.table.capacity,)
        Value bytes and counters (:func:`seed_values`), updated in place.
    ply : int
        DTM of the positions whose predecessors are decided.
    frontier : numpy.ndarray of uint32 or int64, shape (n,)
        The slots of every position of DTM ``ply``.
    alloc : callable, optional
        ``alloc(n, dtype)``: where the list of decisions goes (memory, or a file: spilled lists).
    buffers : PlyBuffers, optional
        Where the kernel writes, kept from one ply to the next (default: made for this ply).

    Returns
    -------
    numpy.ndarray of the slot dtype (:func:`slot_dtype`)
        The slots of the positions newly decided at DTM ``ply + 1``.

    Notes
    -----
    Each thread's decisions go to a row of ``_SPARE + _GROUP * MAX_UNMOVES`` slots; a thread
    whose row might not hold its next group's stops, and the kernel is called again from where
    each thread stopped. So the memory a ply takes is its list of decisions, however many
    predecessors its positions have.
    """
    dtype = slot_dtype(enum.table.capacity)
    if frontier.shape[0] == 0:
        return np.zeros(0, dtype)
    threads = config.THREADS
    kernels = enum.game.jitted(sys.modules[__name__])
    rules = enum.game.rules_array
    values, counters = value_bytes(cells), counter_bytes(cells)
    code = value_code(ply + 1)
    if buffers is None:
        buffers = PlyBuffers(threads, enum.game.layout["MAX_UNMOVES"], dtype)
    out = buffers.out
    out_n = np.zeros(threads, np.int64)
    buffers.clear()
    slots, layout = enum.table.slots, enum.table.layout
    group = region_bits(enum.table.nbytes)
    for start in range(0, frontier.shape[0], _WINDOW):
        interrupt.check()
        keys = frontier_keys(enum.table, frontier[start:start + _WINDOW], threads)
        for lo in range(0, keys.shape[0], _GROUPED_FRONTIER if group else _FRONTIER):
            interrupt.check()
            if group:  # (module docstring)
                lists, counts, hashes, decided = buffers.grouped()
                kernels._predecessors(rules, slots, layout, keys[lo:lo + _GROUPED_FRONTIER], 1, lists, counts)
                n = grouped_by_region(lists, 0, counts, 0, layout[L_BITS] - group, hashes)
                apply_predecessors(slots, layout, values, counters, hashes[:n], ply % 2 == 0, code, threads,
                                   decided, out_n)
                per = -(-n // threads)
                for t in range(threads):
                    buffers.append(decided[t * per:t * per + out_n[t]])
                continue
            share = keys[lo:lo + _FRONTIER]
            bounds = even_starts(share.shape[0], threads)
            starts, ends = bounds[:-1].copy(), bounds[1:]  # (starts: where each thread stopped, kept by the kernel)
            while (starts < ends).any():
                kernels._propagate(rules, slots, layout, values, counters, share, starts, ends, ply, code, out,
                                   out_n)
                for t in range(threads):  # (out is written again by the next call)
                    buffers.append(out[t, :out_n[t]])
        del keys
    return _joined([buffers.decided()], dtype, alloc)


@dataclass
class Solution:
    """What the retrograde analysis found.

    Attributes
    ----------
    values : numpy.ndarray of uint8, shape (capacity,)
        The value byte of every slot (a strided view): 0 draw (and empty slots), DTM + 1, or
        :data:`~dobutsu_tb.tablebase.values.LONG` for a DTM of LONG - 1 plies or more.
    long_slots, long_dtm : numpy.ndarray, shape (m,)
        The slots whose value byte is LONG, ascending, and their DTM (plies, int64).
    seconds : float
        Wall time.
    profile : dict of str to float
        Wall seconds of its parts (``seed``: values and first lists; ``propagate``: the plies),
        for benchmarks.
    """

    values: np.ndarray
    long_slots: np.ndarray
    long_dtm: np.ndarray
    seconds: float
    profile: dict = field(default_factory=dict)

    def dtm_of(self, slot: int) -> tuple[int, int]:
        """(WDL, DTM in plies) of the position in ``slot``."""
        code = int(self.values[slot])
        if code == LONG:
            dtm = int(self.long_dtm[np.searchsorted(self.long_slots, slot)])
        elif code == UNDECIDED:
            return 0, 0
        else:
            dtm = code - 1
        return (1 if dtm % 2 else -1), dtm


def solve(enum: Enumeration, report: Callable[[int, int, int, float], None] | None = None,
          alloc=None) -> Solution:
    """Run the retrograde analysis on an enumeration.

    Parameters
    ----------
    enum : Enumeration
        From :func:`~dobutsu_tb.tablebase.enumeration.enumerate_positions`; its tags are used up
        as counters (and dropped).
    report : callable, optional
        Called once per ply as ``report(ply, processed, decided, seconds)``.
    alloc : callable, optional
        ``alloc(n, dtype)`` makes the lists of positions (seeds, each ply's decisions): in memory
        by default, memory-mapped files when the build spills them.

    Returns
    -------
    Solution

    Raises
    ------
    dobutsu_tb.encoding.interrupt.Interrupted
        After SIGINT or SIGTERM inside :func:`~dobutsu_tb.encoding.interrupt.stop_on_signals`
        (checked between plies and between slices of a ply's frontier).
    """
    t0 = time.perf_counter()
    alloc = alloc or _in_memory
    cells = seed_values(enum)
    values = value_bytes(cells)
    dtype = slot_dtype(enum.table.capacity)
    # no moves (DTM 0), wins in 1 (a try), losses in 2 (every move lets the lion be caught)
    seeds = {dtm: _scan(enum.table.slots, values, dtm + 1, dtype, alloc) for dtm in (0, 1, 2)}
    seeded = time.perf_counter()
    highest = 2
    ply = 0 if enum.no_moves else 1  # DTM 0 is stored only for positions without moves
    frontier = seeds.pop(ply)
    long_parts, long_dtm = [], []
    buffers = PlyBuffers(config.THREADS, enum.game.layout["MAX_UNMOVES"], dtype)
    while ply <= highest:
        interrupt.check()
        t = time.perf_counter()
        decided = propagate_ply(enum, cells, ply, frontier, alloc, buffers)
        if decided.shape[0]:
            highest = max(highest, ply + 1)
            if value_code(ply + 1) == LONG:
                long_parts.append(decided)
                long_dtm.append(np.full(decided.shape[0], ply + 1, np.int64))
        if report is not None:
            report(ply, frontier.shape[0], decided.shape[0], time.perf_counter() - t)
        frontier = _joined([seeds.pop(ply + 1), decided], dtype, alloc) if ply + 1 in seeds else decided
        ply += 1
    slots = np.concatenate(long_parts) if long_parts else np.zeros(0, dtype)
    dtms = np.concatenate(long_dtm) if long_dtm else np.zeros(0, np.int64)
    order = np.argsort(slots, kind="stable")
    done = time.perf_counter()
    return Solution(values, slots[order], dtms[order], done - t0,
                    {"seed": seeded - t0, "propagate": done - seeded})
