"""Routing keys to their owners: which of ``n`` workers holds the key of a hash, and a batch of
hashes grouped by the shard of a table.

A build on one machine deals each child or predecessor it generates to the shard of its table
that the hash picks (:func:`~dobutsu_tb.encoding.compact_layout.shard_of`); a build on a cluster
deals it to the worker that owns it (:func:`owner_of`), which then groups what it received by the
shards of its own table (:func:`group_by_shard`). That is the only difference between the two:
the loops that generate and apply are the same (tablebase/enumeration.py, tablebase/retrograde.py).
"""

from __future__ import annotations

import numpy as np

from dobutsu_tb.encoding.compact_layout import shard_of
from dobutsu_tb.encoding.jit import njit, prange

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
