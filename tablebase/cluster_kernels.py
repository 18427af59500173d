"""The kernels of the build on a cluster (:mod:`~dobutsu_tb.tablebase.cluster`, docs/cluster.md).

Every canonical key has one *owner* among the workers, :func:`owner_of` its hash; a worker keeps
the table, tags, values and counters of the positions it owns. Its kernels are those of the
in-process build with the children and predecessors dealt out by owner instead of by shard:

- :func:`_expand` (after :func:`~dobutsu_tb.tablebase.enumeration._expand`): expand fresh
  positions; the hashes of each one's distinct canonical children go to their owners' lists
  (non-terminal ones as they are, terminal ones with their class below), its tag becomes its
  counter of distinct non-terminal children (or a win in 1, or no moves);
- :func:`insert_nonterminal`, :func:`insert_terminal`: an owner inserts what it received, one
  thread per shard of its table (:func:`group_by_shard` first);
- :func:`_predecessors` (after :func:`~dobutsu_tb.tablebase.retrograde._propagate_range`): the
  distinct canonical predecessors of each position decided at a ply, de-duplicated per position
  (docs/rules.md §6, the second trap), dealt out by owner;
- :func:`apply_predecessors`: an owner makes the predecessors of losses wins and decrements the
  counters of the predecessors of wins (a loss at zero), as the in-process analysis does.

:func:`_expand_range` and :func:`_predecessors_range` repeat the loops of their in-process
counterparts (enumeration.py and retrograde.py, which deal out by shard); the seeding is
``retrograde.seed_cells``, the repeated children ``enumeration.repeated``.
"""

from __future__ import annotations

import numpy as np

from dobutsu_tb.encoding.atomics import atomic_cas, atomic_sub, prefetch
from dobutsu_tb.encoding.binding import kernel_options
from dobutsu_tb.encoding.bits import sort_prefix
from dobutsu_tb.encoding.compact import FULL, table_find, table_insert, table_key_at
from dobutsu_tb.encoding.compact_layout import home_slot, key_hash, shard_of
from dobutsu_tb.encoding.jit import njit, prange
from dobutsu_tb.tablebase.enumeration import (  # a terminal child in a list: hash above CLASS_BITS, class below
    CLASS_BITS,
    TAG_FRESH,
    TAG_NO_MOVES,
    TAG_WIN1,
    add_terminals,
    repeated,
)
from dobutsu_tb.tablebase.game.key import decode_key
from dobutsu_tb.tablebase.game.layout import MAX_MOVES, MAX_UNMOVES, NONTERMINAL, TRY
from dobutsu_tb.tablebase.game.rules import child_keys
from dobutsu_tb.tablebase.game.unmoves import parent_keys
from dobutsu_tb.tablebase.values import UNDECIDED

#: How many keys ahead of the one being handled a slot is prefetched; positions per lookup group.
_AHEAD = 16
_GROUP = 32

#: The kernels bound to each variant's tables (Game.jitted).
__kernels__ = ("_expand_range", "_expand", "_predecessors_range", "_predecessors")

_M1 = np.uint64(0xD6E8FEB86659FD93)
_M2 = np.uint64(0xA0761D6478BD642F)
_S = np.uint64(32)


@njit
def owner_of(h, n_workers):
    """The worker (0 .. n_workers - 1) that owns the key of hash ``h``: a mixing of the hash
    other than the tables' own (whose top bits pick a key's home slot), scaled to the number of
    workers, so that any number of workers shares the keys evenly and each worker's keys still
    spread over all the slots of its table."""
    x = np.uint64(h)
    x = (x ^ (x >> _S)) * _M1
    x = (x ^ (x >> _S)) * _M2
    x = x ^ (x >> _S)
    return np.int64(((x & np.uint64(0xFFFFFFFF)) * np.uint64(n_workers)) >> _S)


@njit(parallel=True)
def owners_of(hashes, n_workers, out):
    """``out[i] = owner_of(hashes[i], n_workers)``."""
    for i in prange(hashes.shape[0]):
        out[i] = owner_of(hashes[i], n_workers)


def _expand_range(slots, layout, batch, lo, hi, tags, n_workers, nt, term, counts):
    """:func:`_expand` for ``batch[lo:hi]`` into one thread's lists ``nt[owner]``, ``term[owner]``
    (lengths in ``counts[owner, 0]`` and ``counts[owner, 1]``); returns the positions without
    moves."""
    moves = np.empty(MAX_MOVES, np.int64)
    keys = np.empty(MAX_MOVES, np.int64)
    classes = np.empty(MAX_MOVES, np.int64)
    no_moves = 0
    for b in range(lo, hi):
        if b + _AHEAD < hi:
            prefetch(slots, batch[b + _AHEAD])
            prefetch(tags, batch[b + _AHEAD])
        s = batch[b]
        board, hand = decode_key(table_key_at(slots, layout, s))
        n = child_keys(board, hand, moves, keys, classes)
        win1 = False
        distinct = 0
        for k in range(n):  # drop repeated children (symmetric moves), deal out the others
            if repeated(keys, k):
                continue
            key = keys[k]
            cls = classes[k]
            h = key_hash(key, layout)
            o = owner_of(h, n_workers)
            if cls == NONTERMINAL:
                nt[o, counts[o, 0]] = h
                counts[o, 0] += 1
                distinct += 1
            else:
                win1 |= cls == TRY
                term[o, counts[o, 1]] = (h << CLASS_BITS) | cls
                counts[o, 1] += 1
        if n == 0:
            tags[s] = TAG_NO_MOVES
            no_moves += 1
        elif win1:
            tags[s] = TAG_WIN1
        else:
            tags[s] = distinct
    return no_moves


@kernel_options(parallel=True)
def _expand(slots, layout, batch, tags, n_workers, nt, term, counts):
    """Expand the positions at slots ``batch``, one thread t per ``nt[t]``: the hashes of each
    one's distinct canonical non-terminal children go to ``nt[t, owner]``, of its distinct terminal
    children (class below) to ``term[t, owner]``, their numbers to ``counts[t, owner]``; each
    position's tag is set. Returns the positions without moves."""
    n_threads = nt.shape[0]
    no_moves = 0
    per = (batch.shape[0] + n_threads - 1) // n_threads
    for t in prange(n_threads):
        counts[t, :, :] = 0
        no_moves += _expand_range(slots, layout, batch, t * per, min(batch.shape[0], (t + 1) * per), tags,
                                  n_workers, nt[t], term[t], counts[t])
    return no_moves


@njit
def group_by_shard(values, drop, layout, n_shards, out, starts):
    """Counting sort of ``values`` by the shard of ``values[i] >> drop`` (a hash) into ``out``;
    shard s's values land in ``out[starts[s]:starts[s + 1]]``."""
    starts[:] = 0
    for i in range(values.shape[0]):
        starts[shard_of(values[i] >> drop, layout) + 1] += 1
    for s in range(n_shards):
        starts[s + 1] += starts[s]
    at = starts[:n_shards].copy()
    for i in range(values.shape[0]):
        s = shard_of(values[i] >> drop, layout)
        out[at[s]] = values[i]
        at[s] += 1


@njit(parallel=True)
def insert_nonterminal(slots, layout, table_counts, tags, hashes, starts, fresh, fresh_n):
    """Insert hashes grouped by shard (:func:`group_by_shard`), one thread per shard; the new
    keys' slots are tagged fresh and written to ``fresh[starts[s]:starts[s] + fresh_n[s]]``.
    Returns the insertions that found no room (grow the table, insert again: idempotent)."""
    n_shards = starts.shape[0] - 1
    failed = 0
    for shard in prange(n_shards):
        lo, hi = starts[shard], starts[shard + 1]
        added = 0
        bad = 0
        for i in range(lo, hi):
            if i + _AHEAD < hi:
                prefetch(slots, home_slot(hashes[i + _AHEAD], layout))
            s = table_insert(slots, layout, hashes[i])
            if s >= 0:
                fresh[lo + added] = s
                added += 1
            elif s == FULL:
                bad += 1
        for i in range(lo, lo + added):
            tags[fresh[i]] = TAG_FRESH
        table_counts[shard] += added
        fresh_n[shard] = added
        failed += bad
    return failed


@njit(parallel=True)
def insert_terminal(buf, layout, set_counts, items, starts, by_class):
    """Add terminal children (hash above, class below; grouped by shard) to a set, one thread per
    shard; the new ones are counted by class in ``by_class[shard]``. Returns the additions that
    found no room (grow the set, add again: idempotent)."""
    n_shards = starts.shape[0] - 1
    failed = 0
    for shard in prange(n_shards):
        lo, hi = starts[shard], starts[shard + 1]
        failed += add_terminals(buf, layout, items, lo, hi, 0, set_counts, by_class, shard)
    return failed


def _predecessors_range(slots, layout, frontier, lo, hi, n_workers, out, counts):
    """:func:`_predecessors` for ``frontier[lo:hi]`` into one thread's lists ``out[owner]``."""
    preds = np.empty(MAX_UNMOVES, np.int64)
    for i in range(lo, hi):
        if i + _AHEAD < hi:
            prefetch(slots, frontier[i + _AHEAD])
        board, hand = decode_key(table_key_at(slots, layout, frontier[i]))
        n = parent_keys(board, hand, preds)
        sort_prefix(preds, n)
        prev = np.int64(0)
        for k in range(n):  # one position's distinct canonical predecessors, as hashes
            key = preds[k]
            if key != prev:
                h = key_hash(key, layout)
                o = owner_of(h, n_workers)
                out[o, counts[o, 0]] = h
                counts[o, 0] += 1
                prev = key


@kernel_options(parallel=True)
def _predecessors(slots, layout, frontier, n_workers, out, counts):
    """The distinct canonical non-terminal predecessors of each position at slots ``frontier``, as
    hashes, one thread t per ``out[t]``: into ``out[t, owner, :counts[t, owner, 0]]``
    (:func:`~dobutsu_tb.tablebase.enumeration.thread_counters`)."""
    n_threads = out.shape[0]
    per = (frontier.shape[0] + n_threads - 1) // n_threads
    for t in prange(n_threads):
        counts[t, :, :] = 0
        _predecessors_range(slots, layout, frontier, t * per, min(frontier.shape[0], (t + 1) * per), n_workers,
                            out[t], counts[t])


@njit(parallel=True)
def apply_predecessors(slots, layout, values, counters, hashes, lost, code, n_threads, out, out_n):
    """Decide the predecessors (hashes) of positions decided at one ply: of losses (``lost``) a win,
    once; of wins a decrement of the counter, a loss at zero; ``code`` is the value byte of the
    next ply. Hashes of keys that are not in the table (unreachable) are skipped. Thread t takes
    a t-th of the hashes and writes the slots it decides to ``out[lo_t:lo_t + out_n[t]]``
    (``lo_t`` its first hash), so ``out`` has the length of ``hashes``."""
    n = hashes.shape[0]
    per = (n + n_threads - 1) // n_threads
    for t in prange(n_threads):
        lo = t * per
        hi = min(n, (t + 1) * per)
        found = np.empty(_GROUP, np.int64)
        decided = 0
        for g in range(lo, hi, _GROUP):
            end = min(hi, g + _GROUP)
            for k in range(g, end):
                prefetch(slots, home_slot(hashes[k], layout))
            f = 0
            for k in range(g, end):
                p = table_find(slots, layout, hashes[k])
                if p >= 0:
                    prefetch(values, p)
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
                out[lo + decided] = p
                decided += 1
        out_n[t] = decided
