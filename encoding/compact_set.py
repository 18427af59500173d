"""A compact set of 64-bit keys that counts distinct keys: Robin Hood probing over entries of
3 to 8 bytes (the enumeration counts the terminal positions of the full game in it, 3 bytes a
key). Keys, hashes, layouts and shards are those of :mod:`dobutsu_tb.encoding.compact`.
"""

from __future__ import annotations

import numpy as np

from dobutsu_tb.encoding.compact import ShardedKeys
from dobutsu_tb.encoding.compact_layout import (
    L_DISP_MAX,
    L_ENTRY,
    L_R,
    L_REM_MASK,
    L_SHARD_BITS,
    hash_keys,
    make_layout,
    shard_of,
    shards_for,
    slot_bits_for,
)
from dobutsu_tb.encoding.config import SET_LOAD_FACTOR
from dobutsu_tb.encoding.jit import njit, prange

#: Bits of an entry's displacement field.
SET_DISP_BITS = 8


@njit
def entry_at(buf, nbytes, s):
    """The value of entry ``s`` of a set's ``buf`` (``nbytes`` bytes, little-endian)."""
    v = np.int64(0)
    base = s * nbytes
    for j in range(nbytes):
        v |= np.int64(buf[base + j]) << (8 * j)
    return v


@njit
def _put_entry(buf, nbytes, s, v):
    base = s * nbytes
    for j in range(nbytes):
        buf[base + j] = (v >> (8 * j)) & 0xFF


@njit
def set_add(buf, layout, h):
    """Add the key with hash ``h`` to a :class:`CompactSet`'s ``buf``: 1 if it is new, 0 if it
    was there, -1 (nothing changed) when a displacement would not fit: grow the set and add again.

    Robin Hood probing: the key goes to the first slot of its probe sequence whose entry is
    nearer to its own home, and the run of entries from there to the next empty slot moves one
    slot on; this keeps every displacement short. Only the owner of the key's shard
    (:func:`shard_of`) may call this."""
    r = layout[L_R]
    nbytes = layout[L_ENTRY]
    rem_mask = layout[L_REM_MASK]
    disp_max = layout[L_DISP_MAX]
    rem = h & rem_mask
    size_mask = (np.int64(1) << layout[L_SHARD_BITS]) - 1
    home = h >> r
    base = home & ~size_mask
    s = home
    d = np.int64(0)
    while True:  # find the key, or where it goes
        v = entry_at(buf, nbytes, s)
        if v == 0:
            break
        vd = (v >> r) - 1
        if vd == d and (v & rem_mask) == rem:
            return 0
        if vd < d:
            break
        d += 1
        if d > disp_max:
            return -1
        s = base + ((s + 1) & size_mask)
    t = s  # the run from s to the next empty slot moves on by one; check it fits first
    while True:
        v = entry_at(buf, nbytes, t)
        if v == 0:
            break
        if (v >> r) > disp_max:
            return -1
        t = base + ((t + 1) & size_mask)
        if t == s:
            return -1
    one = np.int64(1) << r
    while t != s:
        prev = base + ((t - 1) & size_mask)
        _put_entry(buf, nbytes, t, entry_at(buf, nbytes, prev) + one)
        t = prev
    _put_entry(buf, nbytes, s, ((d + 1) << r) | rem)
    return 1


@njit(parallel=True)
def _set_add_many(buf, layout, n_shards, counts, hashes, out):
    failed = 0
    for shard in prange(n_shards):
        added = 0
        bad = 0
        for i in range(hashes.shape[0]):
            h = hashes[i]
            if shard_of(h, layout) != shard:
                continue
            a = set_add(buf, layout, h)
            out[i] = a
            if a == 1:
                added += 1
            elif a < 0:
                bad += 1
        counts[shard] += added
        failed += bad
    return failed


@njit
def set_hash_at(buf, layout, s):
    """The hash held by entry ``s`` of a set's buffer (its home from the stored displacement,
    then the remainder), or -1 if the entry is empty."""
    r = layout[L_R]
    v = entry_at(buf, layout[L_ENTRY], s)
    if v == 0:
        return np.int64(-1)
    size_mask = (np.int64(1) << layout[L_SHARD_BITS]) - 1
    home = (s & ~size_mask) + ((s - ((v >> r) - 1)) & size_mask)
    return (home << r) | (v & layout[L_REM_MASK])


@njit
def _set_rehash(old, old_layout, new, new_layout, counts):
    failed = 0
    for s in range(old.shape[0] // old_layout[L_ENTRY]):
        h = set_hash_at(old, old_layout, s)
        if h < 0:
            continue
        a = set_add(new, new_layout, h)
        if a < 0:
            failed += 1
        else:
            counts[shard_of(h, new_layout)] += a
    return failed


class CompactSet(ShardedKeys):
    """A set of keys ``code << shift`` that counts distinct keys (Robin Hood probing).

    Entries take ``ceil((code_bits - q + 8) / 8)`` bytes at ``2**q`` slots: 3 bytes for 44-bit
    codes at ``2**28`` slots.

    Parameters
    ----------
    expected : int
        Keys the set should hold without growing.
    code_bits, shift : int
        As for :class:`CompactTable`.
    load_factor : float, optional
        Most keys per slot (default :data:`~dobutsu_tb.encoding.config.SET_LOAD_FACTOR`).
    n_shards : int, optional
        Threads that may add at once; rounded up to a power of two.

    Attributes
    ----------
    buf : numpy.ndarray of uint8, shape (capacity * entry_bytes,)
    layout : numpy.ndarray of int64
    counts : numpy.ndarray of int64, shape (n_shards,)
    """

    def __init__(self, expected: int, code_bits: int, shift: int, load_factor: float = SET_LOAD_FACTOR,
                 n_shards: int = 1):
        self.code_bits, self.shift, self.load_factor = int(code_bits), int(shift), float(load_factor)
        self.n_shards = shards_for(n_shards)
        self._allocate(slot_bits_for(expected, load_factor, self.n_shards, self.code_bits))

    def _allocate(self, bits: int) -> None:
        self.layout = make_layout(self.code_bits, self.shift, bits, self.n_shards, SET_DISP_BITS)
        self.buf = np.zeros((1 << bits) * int(self.layout[L_ENTRY]), np.uint8)
        self.counts = np.zeros(self.n_shards, np.int64)

    @property
    def capacity(self) -> int:
        """Number of slots."""
        return self.buf.shape[0] // int(self.layout[L_ENTRY])

    @property
    def entry_bytes(self) -> int:
        """Bytes per slot."""
        return int(self.layout[L_ENTRY])

    @property
    def nbytes(self) -> int:
        return self.buf.nbytes

    def add_hashes(self, hashes) -> np.ndarray:
        """Add keys given by their hashes (:func:`key_hash`); returns 1 where a key was new, else 0."""
        hashes = np.ascontiguousarray(hashes, dtype=np.int64)
        if self.room() < hashes.size:
            self.grow(len(self) + hashes.size)
        while True:
            out = np.zeros(hashes.shape[0], np.int64)
            if _set_add_many(self.buf, self.layout, self.n_shards, self.counts, hashes, out) == 0:
                return out
            self.grow(2 * len(self) + hashes.size)

    def add(self, keys) -> np.ndarray:
        """Add keys (array_like of int64, shape (n,)); returns int64 (n,), 1 where a key was new."""
        return self.add_hashes(hash_keys(keys, self.layout))

    def grow(self, expected: int) -> None:
        """Rehash into at least twice as many slots, sized for ``max(expected, 2 * len(self))`` keys.

        Raises
        ------
        CompactTableFullError
            If the set cannot grow (the hash has no more bits).
        """
        old_buf, old_layout = self.buf, self.layout
        for bits in self._grown_bits(expected):
            self._allocate(bits)
            if _set_rehash(old_buf, old_layout, self.buf, self.layout, self.counts) == 0:
                return


def set_nbytes(expected: int, code_bits: int, shift: int, load_factor: float = SET_LOAD_FACTOR,
               n_shards: int = 1) -> int:
    """Bytes of the entries of a :class:`CompactSet` made for ``expected`` keys, for memory
    estimates.

    Raises
    ------
    CompactTableFullError
        If no set can hold that many keys.
    """
    bits = slot_bits_for(expected, load_factor, shards_for(n_shards), code_bits)
    return (1 << bits) * int(make_layout(code_bits, shift, bits, shards_for(n_shards), SET_DISP_BITS)[L_ENTRY])
