"""Open-addressing hash table over positive 64-bit keys (numpy arrays + numba kernels).

A table is one ``int64`` array of slots, ``0`` marking an empty slot (no valid key is 0). A
key's slot is its index into any value arrays that run alongside the table, so a set of
positions and their values need no other index.

The slots are split into ``n_shards`` equal shards; a key's shard and its home slot inside the
shard come from two halves of a 64-bit mix of the key, and probing is linear, wrapping inside the
shard. Shards let several threads insert at once without atomics: thread ``t`` inserts just the
keys of shard ``t`` (:func:`insert_key`).
"""

from __future__ import annotations

import numpy as np

from dobutsu_tb.encoding.config import LOAD_FACTOR
from dobutsu_tb.encoding.jit import njit, prange

_MIX1 = 0xBF58476D1CE4E5B9 - (1 << 64)
_MIX2 = 0x94D049BB133111EB - (1 << 64)
#: Largest capacity (slots): slot arithmetic needs ``shard_capacity < 2**31``.
MAX_CAPACITY = (1 << 31) - 1


class HashTableFullError(RuntimeError):
    """Raised when a hash table has no room left under its load factor."""


@njit
def _mix(key):
    """splitmix64's finaliser: a 64-bit mix of the key (signed arithmetic, wraps)."""
    x = key
    x ^= (x >> 30) & 0x3FFFFFFFF
    x *= _MIX1
    x ^= (x >> 27) & 0x1FFFFFFFFF
    x *= _MIX2
    x ^= (x >> 31) & 0x1FFFFFFFF
    return x


@njit
def shard_of(key, n_shards):
    """The shard (0 .. n_shards - 1) that holds ``key``."""
    return ((_mix(key) & 0xFFFFFFFF) * n_shards) >> 32


@njit
def _home(x, shard, shard_cap):
    return shard * shard_cap + ((((x >> 32) & 0xFFFFFFFF) * shard_cap) >> 32)


@njit
def _probe(key, shard_cap, n_shards):
    """Where probing for ``key`` starts: (home slot, first slot of its shard, end of its shard)."""
    x = _mix(key)
    shard = ((x & 0xFFFFFFFF) * n_shards) >> 32
    lo = shard * shard_cap
    return _home(x, shard, shard_cap), lo, lo + shard_cap


@njit
def find_slot(table, shard_cap, n_shards, key):
    """Slot of ``key`` in ``table`` (the slots of a :class:`HashTable` with ``shard_cap`` slots in
    each of ``n_shards`` shards), or -1 when absent."""
    s, lo, hi = _probe(key, shard_cap, n_shards)
    for _ in range(shard_cap):
        k = table[s]
        if k == key:
            return s
        if k == 0:
            return -1
        s += 1
        if s == hi:
            s = lo
    return -1


@njit
def insert_key(table, shard_cap, n_shards, key):
    """Insert a positive ``key`` into ``table`` (laid out as in :func:`find_slot`); return its
    slot, or ``-slot - 2`` when it was already there, -1 when the shard is full.

    The caller keeps the shard's load under its limit, so -1 is a defect, not a normal outcome.
    Only the thread that owns the key's shard may insert it (:func:`shard_of`).
    """
    s, lo, hi = _probe(key, shard_cap, n_shards)
    for _ in range(shard_cap):
        k = table[s]
        if k == key:
            return -s - 2
        if k == 0:
            table[s] = key
            return s
        s += 1
        if s == hi:
            s = lo
    return -1


@njit(parallel=True)
def _insert_sharded(table, shard_cap, n_shards, counts, keys, slots):
    """Insert ``keys`` with one task per shard; ``slots[i]`` gets ``insert_key``'s answer.

    ``counts[shard]`` grows by the number of new keys of that shard.
    """
    for shard in prange(n_shards):
        added = 0
        for i in range(keys.shape[0]):
            key = keys[i]
            if key == 0 or shard_of(key, n_shards) != shard:
                continue
            s = insert_key(table, shard_cap, n_shards, key)
            slots[i] = s
            if s >= 0:
                added += 1
        counts[shard] += added


@njit(parallel=True)
def _find_many(table, shard_cap, n_shards, keys, out):
    for i in prange(keys.shape[0]):
        out[i] = find_slot(table, shard_cap, n_shards, keys[i])


@njit
def _rehash(old, new, shard_cap, n_shards, counts, remap):
    for s in range(old.shape[0]):
        key = old[s]
        if key != 0:
            t = insert_key(new, shard_cap, n_shards, key)
            remap[s] = t
            counts[shard_of(key, n_shards)] += 1
        else:
            remap[s] = -1


class HashTable:
    """A set of positive int64 keys in an open-addressing table; slots index value arrays.

    Parameters
    ----------
    expected : int
        Number of keys the table should hold without growing.
    load_factor : float, optional
        Largest fraction of each shard's slots in use (default
        :data:`~dobutsu_tb.encoding.config.LOAD_FACTOR`). Capacity is
        ``ceil(expected / load_factor)`` slots, 8 bytes each.
    n_shards : int, optional
        Number of shards, also the number of threads that can insert at once (default 1).

    Raises
    ------
    ValueError
        If ``expected`` is negative or ``load_factor`` is not in (0, 1).
    HashTableFullError
        If the capacity would exceed :data:`MAX_CAPACITY` slots per shard.

    Attributes
    ----------
    table : numpy.ndarray of int64, shape (capacity,)
        The slots; 0 marks an empty slot.
    counts : numpy.ndarray of int64, shape (n_shards,)
        Keys held in each shard.
    """

    def __init__(self, expected: int, load_factor: float = LOAD_FACTOR, n_shards: int = 1):
        if expected < 0:
            raise ValueError(f"expected count must be >= 0, got {expected}")
        if not 0.0 < load_factor < 1.0:
            raise ValueError(f"load factor must be in (0, 1), got {load_factor}")
        if n_shards < 1:
            raise ValueError(f"n_shards must be >= 1, got {n_shards}")
        self.load_factor = float(load_factor)
        self.n_shards = int(n_shards)
        shard_cap = max(16, -(-int(expected) // self.n_shards))
        shard_cap = int(np.ceil(shard_cap / self.load_factor)) + 1
        if shard_cap > MAX_CAPACITY:
            raise HashTableFullError(f"hash table is full: {expected:,} keys would need {shard_cap:,} "
                                     f"slots per shard, more than the limit of {MAX_CAPACITY:,}")
        self.shard_capacity = shard_cap
        self.table = np.zeros(shard_cap * self.n_shards, np.int64)
        self.counts = np.zeros(self.n_shards, np.int64)

    @property
    def capacity(self) -> int:
        """Number of slots."""
        return self.table.shape[0]

    @property
    def limit(self) -> int:
        """Most keys one shard may hold under the load factor."""
        return int(self.shard_capacity * self.load_factor)

    @property
    def nbytes(self) -> int:
        """Memory held by the slots, in bytes."""
        return self.table.nbytes

    def __len__(self) -> int:
        return int(self.counts.sum())

    def __contains__(self, key) -> bool:
        return find_slot(self.table, self.shard_capacity, self.n_shards, np.int64(key)) >= 0

    def __repr__(self) -> str:
        return (f"<HashTable {len(self):,} keys in {self.capacity:,} slots, "
                f"{self.n_shards} shards, load factor {self.load_factor}>")

    def room(self) -> int:
        """Keys that can surely still be inserted (the least room of any shard)."""
        return int(self.limit - self.counts.max())

    def insert(self, keys) -> tuple[np.ndarray, np.ndarray]:
        """Insert keys, growing the table when needed.

        Growing rehashes every key, so slots returned by earlier calls are then stale; code that
        keeps value arrays by slot calls :meth:`grow` itself and moves them with its answer.

        Parameters
        ----------
        keys : array_like of int64, shape (n,)
            Positive keys; duplicates are allowed.

        Returns
        -------
        slots : numpy.ndarray of int64, shape (n,)
            The slot of each key after the call.
        new : numpy.ndarray of bool, shape (n,)
            True where the key was not in the table before (the first occurrence only).

        Raises
        ------
        ValueError
            If a key is not positive.
        """
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        if keys.size and keys.min() <= 0:
            raise ValueError("hash table keys must be positive")
        if self.room() < keys.size:
            self.grow(len(self) + keys.size)
        raw = np.empty(keys.shape[0], np.int64)
        _insert_sharded(self.table, self.shard_capacity, self.n_shards, self.counts, keys, raw)
        if raw.size and raw.min() == -1:
            raise HashTableFullError(f"hash table is full ({len(self):,} keys in {self.capacity:,} slots)")
        new = raw >= 0
        slots = np.where(new, raw, -raw - 2)
        return slots, new

    def lookup(self, keys) -> np.ndarray:
        """Slots of keys.

        Parameters
        ----------
        keys : array_like of int64, shape (n,)

        Returns
        -------
        numpy.ndarray of int64, shape (n,)
            The slot of each key, or -1 where the key is absent.
        """
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        out = np.empty(keys.shape[0], np.int64)
        _find_many(self.table, self.shard_capacity, self.n_shards, keys, out)
        return out

    def occupied(self) -> np.ndarray:
        """Slots in use, ascending (int64, shape (len(self),))."""
        return np.flatnonzero(self.table)

    def keys(self) -> np.ndarray:
        """The keys held, in slot order (int64, shape (len(self),))."""
        return self.table[self.table != 0]

    def grow(self, expected: int) -> np.ndarray:
        """Rehash into a table sized for ``max(expected, 2 * len(self))`` keys.

        Returns
        -------
        numpy.ndarray of int64, shape (old capacity,)
            New slot of each old slot, -1 for old empty slots; use it to move value arrays.

        Raises
        ------
        HashTableFullError
            If the larger table would exceed :data:`MAX_CAPACITY` slots per shard.
        """
        expected = max(int(expected), 2 * len(self))
        try:
            bigger = HashTable(expected, self.load_factor, self.n_shards)
        except HashTableFullError as exc:
            raise HashTableFullError(f"cannot grow: {exc}") from None
        remap = np.empty(self.capacity, np.int64)
        _rehash(self.table, bigger.table, bigger.shard_capacity, self.n_shards, bigger.counts, remap)
        self.table, self.counts, self.shard_capacity = bigger.table, bigger.counts, bigger.shard_capacity
        return remap
