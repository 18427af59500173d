"""Breadth-first enumeration of every position reachable from a start (SPEC §1.4).

Non-terminal positions go into one hash table and are expanded; terminal positions (catch- or
try-terminal) go into a second table and are counted, never expanded. While a position is
expanded, the two facts the retrograde analysis starts from are recorded in slot-indexed arrays
of the non-terminal table: the number of its *distinct* canonical non-terminal children (the
counter of unresolved moves) and whether a move reaches a try-terminal position (a win in 1).
A non-terminal position without a legal move (SPEC §1.4: none is reachable from the standard
start) is counted and valued as a loss in 0 plies: the side that cannot move has lost, as in shogi.

The work goes in batches: the children of a batch of positions are generated in parallel, then
inserted with one thread per hash table shard.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from dobutsu_tb.encoding import config
from dobutsu_tb.encoding.bits import sort_prefix
from dobutsu_tb.encoding.hashtable import HashTable, insert_key, shard_of
from dobutsu_tb.encoding.jit import njit, prange
from dobutsu_tb.tablebase.game.kernels import canonical_key, classify, decode_key, gen_moves, make_move
from dobutsu_tb.tablebase.game.rules import CATCH, MAX_MOVES, NONTERMINAL, TRY
from dobutsu_tb.tablebase.values import LOSS, UNKNOWN, WIN


class StartPositionError(ValueError):
    """Raised when a build is asked to start from a terminal position."""


@dataclass
class Enumeration:
    """The reachable set of a start position.

    Attributes
    ----------
    table : HashTable
        Canonical keys of the non-terminal positions; a key's slot indexes the arrays below.
    counter : numpy.ndarray of uint8, shape (table.capacity,)
        Distinct canonical non-terminal children of each position.
    wdl, dtm : numpy.ndarray of int8 / uint16, shape (table.capacity,)
        Values so far: WIN and 1 where a move reaches a try-terminal position, else UNKNOWN / 0.
    catch_terminal, try_terminal : int
        Distinct terminal positions reached, by class.
    no_moves : int
        Non-terminal positions without a legal move (valued as losses in 0).
    seconds : float
        Wall time of the enumeration.
    """

    table: HashTable
    counter: np.ndarray
    wdl: np.ndarray
    dtm: np.ndarray
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


@njit(parallel=True)
def _expand(table, slots, children, n_children, counter, wdl, dtm):
    """Children of the positions at ``slots``: ``children[b, :n_children[b]]`` gets the distinct
    canonical keys of position b's children (positive for non-terminal children; for terminal
    ones the negated key with its class in bit 0; duplicates become 0)."""
    for b in prange(slots.shape[0]):
        slot = slots[b]
        state = decode_key(table[slot])
        row = children[b]
        n = gen_moves(state, row)
        win1 = False
        for k in range(n):
            child = make_move(state, row[k])
            cls = classify(child)
            key = canonical_key(child)
            if cls == NONTERMINAL:
                row[k] = key
            else:
                row[k] = -(key | cls)
                if cls == TRY:
                    win1 = True
        sort_prefix(row, n)
        distinct = 0
        for k in range(n):
            if k > 0 and row[k] == row[k - 1]:
                row[k] = 0
            elif row[k] > 0:
                distinct += 1
        n_children[b] = n
        counter[slot] = distinct
        if n == 0:
            wdl[slot] = LOSS
            dtm[slot] = 0
        elif win1:
            wdl[slot] = WIN
            dtm[slot] = 1


@njit(parallel=True)
def _insert_children(nt, nt_cap, t, t_cap, n_shards, nt_counts, t_counts, children, n_children,
                     new_slot):
    """Insert a batch's children, one task per shard. ``new_slot[b, k]`` gets the slot of a
    non-terminal child that was not in the table before, else -1. Returns how many insertions
    found a table full (a sum reduction: plain assignments inside prange are thread-private)."""
    full = 0
    for shard in prange(n_shards):
        added = 0
        t_added = 0
        failed = 0
        for b in range(children.shape[0]):
            for k in range(n_children[b]):
                key = children[b, k]
                if key > 0:
                    if shard_of(key, n_shards) != shard:
                        continue
                    s = insert_key(nt, nt_cap, n_shards, key)
                    if s == -1:
                        failed += 1
                    if s >= 0:
                        added += 1
                        new_slot[b, k] = s
                    else:
                        new_slot[b, k] = -1
                elif key < 0:
                    tk = -key
                    if shard_of(tk, n_shards) != shard:
                        continue
                    s = insert_key(t, t_cap, n_shards, tk)
                    if s == -1:
                        failed += 1
                    if s >= 0:
                        t_added += 1
        nt_counts[shard] += added
        t_counts[shard] += t_added
        full += failed
    return full


@njit
def _append_new(children, n_children, new_slot, queue, tail):
    for b in range(children.shape[0]):
        for k in range(n_children[b]):
            if children[b, k] > 0 and new_slot[b, k] >= 0:
                queue[tail] = new_slot[b, k]
                tail += 1
    return tail


@njit(parallel=True)
def _count_try(t):
    n = 0
    for s in prange(t.shape[0]):
        if t[s] & 1 == 0 and t[s] & TRY:
            n += 1
    return n


def _grow(arr: np.ndarray, remap: np.ndarray, size: int, fill) -> np.ndarray:
    out = np.full(size, fill, arr.dtype)
    used = remap >= 0
    out[remap[used]] = arr[used]
    return out


def enumerate_positions(start_state: int, expected: tuple[int, int] | None = None,
                        progress: Callable[[int, int], None] | None = None) -> Enumeration:
    """Enumerate every position reachable from a start (SPEC §1.4).

    Parameters
    ----------
    start_state : int
        Packed normalised start state; it must be non-terminal.
    expected : (int, int), optional
        Expected numbers of non-terminal and terminal positions, to size the hash tables
        (they grow when exceeded). Default: :data:`config.DEFAULT_EXPECTED` each.
    progress : callable, optional
        Called as ``progress(expanded, queued)`` after each batch.

    Returns
    -------
    Enumeration

    Raises
    ------
    StartPositionError
        If the start position is terminal.
    encoding.hashtable.HashTableFullError
        If a table cannot grow any further.
    """
    import time

    t0 = time.perf_counter()
    start_state = np.int64(start_state)
    cls = classify(start_state)
    if cls != NONTERMINAL:
        raise StartPositionError("the start position is terminal: the side to move "
                                 + ("can capture the enemy lion" if cls == CATCH
                                    else "faces an enemy lion that has reached its home rank"))
    n_nt, n_t = expected or (config.DEFAULT_EXPECTED, config.DEFAULT_EXPECTED)
    batch = config.ENUM_BATCH
    # Headroom for one batch whose children are all new, so exact figures never force a rehash.
    headroom = batch * MAX_MOVES
    shards = config.THREADS
    nt = HashTable(n_nt + headroom, config.LOAD_FACTOR, shards)
    term = HashTable(n_t + headroom, config.LOAD_FACTOR, shards)
    counter = np.zeros(nt.capacity, np.uint8)
    wdl = np.full(nt.capacity, UNKNOWN, np.int8)
    dtm = np.zeros(nt.capacity, np.uint16)
    queue = np.empty(max(16, n_nt), np.int64)
    slots, _ = nt.insert([canonical_key(start_state)])
    queue[0] = slots[0]
    head, tail = 0, 1
    no_moves = 0
    children = np.zeros((batch, MAX_MOVES), np.int64)
    n_children = np.zeros(batch, np.int64)
    new_slot = np.empty((batch, MAX_MOVES), np.int64)
    while head < tail:
        stop = min(tail, head + batch)
        nb = stop - head
        _expand(nt.table, queue[head:stop], children[:nb], n_children[:nb], counter, wdl, dtm)
        no_moves += int(np.count_nonzero(n_children[:nb] == 0))
        n_new = int(n_children[:nb].sum())  # the worst case: every child new
        if nt.room() < n_new:
            remap = nt.grow(len(nt) + max(n_new, len(nt)))
            counter = _grow(counter, remap, nt.capacity, 0)
            wdl = _grow(wdl, remap, nt.capacity, UNKNOWN)
            dtm = _grow(dtm, remap, nt.capacity, 0)
            queue[:tail] = remap[queue[:tail]]
        if term.room() < n_new:
            term.grow(len(term) + max(n_new, len(term)))
        before = len(nt)
        status = _insert_children(nt.table, nt.shard_capacity, term.table, term.shard_capacity,
                                  shards, nt.counts, term.counts, children[:nb], n_children[:nb],
                                  new_slot[:nb])
        if status != 0:  # pragma: no cover - room was made above
            raise RuntimeError("hash table overflow during enumeration")
        if queue.shape[0] < tail + len(nt) - before:
            queue = np.concatenate([queue, np.empty(max(len(nt) - before, tail), np.int64)])
        tail = _append_new(children[:nb], n_children[:nb], new_slot[:nb], queue, tail)
        head = stop
        if progress is not None:
            progress(head, tail)
    del queue, children, new_slot
    n_try = int(_count_try(term.table))
    return Enumeration(nt, counter, wdl, dtm, len(term) - n_try, n_try, no_moves,
                       time.perf_counter() - t0)
