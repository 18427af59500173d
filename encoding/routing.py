"""Routing keys to their owners: which of ``n`` workers holds the key of a hash, a batch of
hashes grouped by the shard of a table, and by region of a big table.

A build on one machine deals each child or predecessor it generates to the shard of its table
that the hash picks (:func:`~dobutsu_tb.encoding.compact_layout.shard_of`); a build on a cluster
deals it to the worker that owns it (:func:`owner_of`), which then groups what it received by the
shards of its own table (:func:`group_by_shard`). That is the only difference between the two:
the loops that generate and apply are the same (tablebase/enumeration.py, tablebase/retrograde.py).

In a table (or set) of :data:`GROUP_FROM` bytes or more, a random access costs two to three
times what it costs in one of 1 GiB: the CPU's address translation misses as well as its caches
(``scripts/bench_sets.py --regions``; docs/building.md, "Big tables"). A batch of hashes bound
for such a table goes to it grouped by region (:func:`grouped_by_region`): the top bits of a hash
(:func:`region_bits`) pick a stretch of about :data:`REGION_BYTES` of its slots, since a home slot
ascends with the hash, so the accesses of a batch sweep the table one stretch at a time.
"""

from __future__ import annotations

import numpy as np

from dobutsu_tb.encoding.compact_layout import shard_of
from dobutsu_tb.encoding.jit import njit, prange

_M1 = np.uint64(0xD6E8FEB86659FD93)
_M2 = np.uint64(0xA0761D6478BD642F)
_S = np.uint64(32)

#: Tables and sets of at least this many bytes take their accesses grouped by region; smaller ones
#: are mostly within the reach of the CPU's address translation already.
GROUP_FROM = 1 << 31
#: The bytes of a region: the top bits of the hash that group a batch are those that cut the table
#: (or set) into stretches of about this size.
REGION_BYTES = 1 << 25
#: The most bits :func:`region_bits` gives.
MAX_REGION_BITS = 12


def region_bits(nbytes: int) -> int:
    """How many top bits of a hash group the accesses to a table or set (module docstring).

    Parameters
    ----------
    nbytes : int
        The table's (or set's) bytes.

    Returns
    -------
    int
        0 (not grouped) under :data:`GROUP_FROM` bytes, else enough bits for regions of at most
        :data:`REGION_BYTES`, up to :data:`MAX_REGION_BITS` (8 for the 5x3 game's 8 GiB table).
    """
    if nbytes < GROUP_FROM:
        return 0
    return min(MAX_REGION_BITS, (-(-nbytes // REGION_BYTES) - 1).bit_length())


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


@njit(inline="always")
def route(h, layout, n_owners):
    """Where a hash goes: its shard of the table of ``layout`` when ``n_owners`` is 0 (a build in
    one process), else its owner among ``n_owners`` workers (:func:`owner_of`)."""
    if n_owners == 0:
        return shard_of(h, layout)
    return owner_of(h, n_owners)


@njit(parallel=True)
def owners_of(hashes, n_workers, out):
    """``out[i] = owner_of(hashes[i], n_workers)``."""
    for i in prange(hashes.shape[0]):
        out[i] = owner_of(hashes[i], n_workers)


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


@njit
def grouped_by_region(lists, group, counts, column, shift, out):
    """Every thread's list of one group, concatenated and grouped by region (a stable counting
    sort: module docstring).

    Parameters
    ----------
    lists : numpy.ndarray of int64, shape (threads, groups, n)
        Each thread's lists of entries by group (a shard, or an owner).
    group : int
        The group whose lists are read: ``lists[t, group, :counts[t, group, column]]``.
    counts : numpy.ndarray of int64, shape (threads, groups, k)
        The lists' lengths, in column ``column``
        (:func:`~dobutsu_tb.tablebase.enumeration.thread_counters`).
    column : int
    shift : int
        An entry's region is ``entry >> shift``, below ``2**MAX_REGION_BITS``: the hash's bits
        less :func:`region_bits` (plus the bits below the hash in an entry).
    out : numpy.ndarray of int64, shape (at least the entries,)
        Where the entries go, by ascending region, each region's in the order they came.

    Returns
    -------
    int
        How many entries were written.
    """
    regions = np.zeros((1 << MAX_REGION_BITS) + 1, np.int64)
    n = 0
    for t in range(lists.shape[0]):
        for i in range(counts[t, group, column]):
            regions[(lists[t, group, i] >> shift) + 1] += 1
            n += 1
    for r in range(regions.shape[0] - 1):
        regions[r + 1] += regions[r]
    for t in range(lists.shape[0]):
        for i in range(counts[t, group, column]):
            e = lists[t, group, i]
            r = e >> shift
            out[regions[r]] = e
            regions[r] += 1
    return n
