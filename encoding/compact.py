"""Compact open-addressing hash tables over 64-bit keys: 4 bytes a slot instead of 8.

Both structures hold positive keys of the form ``code << shift`` with ``code < 2**code_bits``
(for dobutsu shogi's canonical keys: 44 code bits above a shift of 19). A key is turned into
its *hash*, a bijective scramble of the code bits; the top ``q`` bits of the hash pick the home
slot among ``2**q`` and only the remaining ``code_bits - q`` bits, the *remainder*, are stored,
with the slot's distance from home. Slot and entry together give back the hash, and the hash
the key (quotienting, as in Cleary's compact hash tables), so nothing is lost.

- :class:`CompactTable` (linear probing, uint32 slots): a key never moves once inserted, so its
  slot indexes value arrays that run alongside (a tag, a counter, a value per position). A
  *dense* table has any number of slots a shard, not a power of two (a memory plan sizes it to
  its positions): its homes are spread as a set's buckets are, each slot keeps a preimage bit
  above the remainder, and its slots are signed (int32, int64: :func:`is_dense`), so that its
  kernels compile apart;
- :class:`~dobutsu_tb.encoding.compact_set.CompactSet` (buckets of one cache line, entries of
  1 to 8 bytes): a set that only counts and answers membership, as small as the remainder
  allows (21 entries of 3 bytes a bucket at ``2**23`` buckets).

Both are split into ``n_shards`` (a power of two) contiguous shards picked by the top bits of the
home slot; probing wraps inside the shard, so one thread per shard inserts without atomics
(:func:`shard_of`). Slot layout of a :class:`CompactTable`::

    bits 31 .. r    displacement from the home slot + 1 (0: empty slot)
    bits r-1 .. 0   remainder: the low r = code_bits - q bits of the hash

An entry of a ``CompactSet`` holds the same remainder, a preimage bit when its buckets a shard
are not a power of two, and its displacement in buckets (:mod:`~dobutsu_tb.encoding.compact_set`).

The kernels take the structure's ``layout``, an int64 array (fields ``L_*``), so one compiled
kernel serves every size; the layout, the hash and the sizes are in
:mod:`~dobutsu_tb.encoding.compact_layout`.
"""

from __future__ import annotations

import numpy as np
from numba.core import types
from numba.extending import overload

from dobutsu_tb.encoding import compact_layout
from dobutsu_tb.encoding.atomics import prefetch
from dobutsu_tb.encoding.compact_layout import (
    L_DISP_MAX,
    L_R,
    L_REM_MASK,
    L_SHARD_BITS,
    L_SHARD_SLOTS,
    L_TAG_BITS,
    CompactTableFullError,
    hash_key,
    hash_keys,
    home_slot,
    make_layout,
    make_table_layout,
    shard_of,
    shards_for,
    slot_bits_for,
    table_slot_bits,
)
from dobutsu_tb.encoding.config import LOAD_FACTOR
from dobutsu_tb.encoding.jit import njit, prange

#: How many slots ahead :meth:`CompactTable.keys_at` prefetches.
_KEYS_AHEAD = 16

#: :func:`table_insert` answer when the shard has no usable slot (grow the table and retry).
FULL = -1

# --- kernels -------------------------------------------------------------------------------


def is_dense(slots) -> bool:
    """Whether ``slots`` are a dense table's (:func:`~dobutsu_tb.encoding.compact_layout.make_table_layout`):
    its slots are signed (int32 or int64), a power of two's unsigned. In a kernel the answer is a
    constant of the slots' type, so that the kernels of a power-of-two table compile without the
    dense table's branches (a branch on the layout instead made a table's keys 2.7 to 4.4 times
    slower to read: the loops no longer vectorized)."""
    return np.dtype(slots.dtype).kind == "i"


@overload(is_dense, inline="always")
def _is_dense_in_a_kernel(slots):
    dense = isinstance(slots, types.Array) and isinstance(slots.dtype, types.Integer) and slots.dtype.signed
    return lambda slots: dense


@njit(inline="always")
def _dense_home(h, layout):
    """(first slot of the shard, slots a shard, home slot, the entry's low bits: the remainder and
    the preimage bit) of hash ``h`` in a dense table (:func:`~dobutsu_tb.encoding.compact_layout.make_table_layout`)."""
    r, k, per = layout[L_R], layout[L_SHARD_BITS], layout[L_SHARD_SLOTS]
    rem = h & layout[L_REM_MASK]
    t = (h >> r) & ((np.int64(1) << k) - 1)
    local = (t * per) >> k
    if t > 0 and ((t - 1) * per) >> k == local:
        rem |= np.int64(1) << r  # the second t of this home
    base = (h >> (r + k)) * per
    return base, per, base + local, rem


@njit
def _dense_find(slots, layout, h):
    """:func:`table_find` in a dense table. (Its loop and :func:`_dense_insert`'s are the power of
    two's but for the wrap at the shard's end: one loop for both, wrapping as these do, made the
    power of two's look-ups 8-10 % slower.)"""
    base, per, s, low = _dense_home(h, layout)
    tag_bits = layout[L_TAG_BITS]
    end = base + per
    d = np.int64(0)
    while d <= layout[L_DISP_MAX]:
        v = np.int64(slots[s])
        if v == 0:
            return np.int64(-1)
        if v == (((d + 1) << tag_bits) | low):
            return s
        d += 1
        s += 1
        if s == end:
            s = base
    return np.int64(-1)


@njit
def _dense_insert(slots, layout, h):
    base, per, s, low = _dense_home(h, layout)
    tag_bits = layout[L_TAG_BITS]
    end = base + per
    d = np.int64(0)
    while d <= layout[L_DISP_MAX]:
        v = np.int64(slots[s])
        entry = ((d + 1) << tag_bits) | low
        if v == 0:
            slots[s] = entry
            return s
        if v == entry:
            return -s - 2
        d += 1
        s += 1
        if s == end:
            s = base
    return np.int64(FULL)


@njit
def _dense_hash_at(slots, layout, s):
    r, k, per = layout[L_R], layout[L_SHARD_BITS], layout[L_SHARD_SLOTS]
    tag_bits = layout[L_TAG_BITS]
    v = np.int64(slots[s])
    shard = s // per
    local = s - shard * per - ((v >> tag_bits) - 1)
    if local < 0:
        local += per
    t = ((local << k) + per - 1) // per + ((v >> r) & 1)  # the smallest t of this home, or the next
    return (((shard << k) | t) << r) | (v & layout[L_REM_MASK])


@njit
def table_home(slots, layout, h):
    """The home slot of hash ``h`` in a :class:`CompactTable` (to prefetch)."""
    if is_dense(slots):
        return _dense_home(h, layout)[2]
    return home_slot(h, layout)


@njit
def table_find(slots, layout, h):
    """Slot of the key with hash ``h`` in a :class:`CompactTable`'s ``slots``, or -1 when absent."""
    if is_dense(slots):
        return _dense_find(slots, layout, h)
    r = layout[L_R]
    rem = h & layout[L_REM_MASK]
    home = h >> r
    size_mask = (np.int64(1) << layout[L_SHARD_BITS]) - 1
    base = home & ~size_mask
    s = home
    d = np.int64(0)
    while d <= layout[L_DISP_MAX]:
        v = np.int64(slots[s])
        if v == 0:
            return np.int64(-1)
        if v == (((d + 1) << r) | rem):
            return s
        d += 1
        s = base + ((s + 1) & size_mask)
    return np.int64(-1)


@njit
def table_insert(slots, layout, h):
    """Insert the key with hash ``h``: its new slot, ``-slot - 2`` if it was there, or
    :data:`FULL` when its displacement would not fit (grow the table and insert again).
    Only the owner of the key's shard (:func:`shard_of`) may call this."""
    if is_dense(slots):
        return _dense_insert(slots, layout, h)
    r = layout[L_R]
    rem = h & layout[L_REM_MASK]
    home = h >> r
    size_mask = (np.int64(1) << layout[L_SHARD_BITS]) - 1
    base = home & ~size_mask
    s = home
    d = np.int64(0)
    while d <= layout[L_DISP_MAX]:
        v = np.int64(slots[s])
        entry = ((d + 1) << r) | rem
        if v == 0:
            slots[s] = entry
            return s
        if v == entry:
            return -s - 2
        d += 1
        s = base + ((s + 1) & size_mask)
    return np.int64(FULL)


@njit
def table_hash_at(slots, layout, s):
    """The hash of the key in (occupied) slot ``s``."""
    if is_dense(slots):
        return _dense_hash_at(slots, layout, s)
    r = layout[L_R]
    v = np.int64(slots[s])
    size_mask = (np.int64(1) << layout[L_SHARD_BITS]) - 1
    home = (s & ~size_mask) + ((s - ((v >> r) - 1)) & size_mask)
    return (home << r) | (v & layout[L_REM_MASK])


@njit
def table_key_at(slots, layout, s):
    """The key in (occupied) slot ``s``."""
    return hash_key(table_hash_at(slots, layout, s), layout)


@njit(parallel=True)
def _table_insert_many(slots, layout, n_shards, counts, hashes, out):
    failed = 0
    for shard in prange(n_shards):
        added = 0
        bad = 0
        for i in range(hashes.shape[0]):
            h = hashes[i]
            if shard_of(h, layout) != shard:
                continue
            s = table_insert(slots, layout, h)
            out[i] = s
            if s >= 0:
                added += 1
            elif s == FULL:
                bad += 1
        counts[shard] += added
        failed += bad
    return failed


@njit(parallel=True)
def _table_find_many(slots, layout, hashes, out):
    for i in prange(hashes.shape[0]):
        out[i] = table_find(slots, layout, hashes[i])


@njit
def _rehash(old, old_layout, new, new_layout, counts, remap):
    failed = 0
    for s in range(old.shape[0]):
        if old[s] == 0:
            remap[s] = -1
            continue
        h = table_hash_at(old, old_layout, s)
        t = table_insert(new, new_layout, h)
        remap[s] = t
        if t < 0:
            failed += 1
        else:
            counts[shard_of(h, new_layout)] += 1
    return failed


@njit(parallel=True)
def _keys_in_slot_order(slots, layout, offsets, out):
    """out[offsets[b]:offsets[b + 1]] = the keys of block b's occupied slots, in slot order."""
    size = slots.shape[0]
    n_blocks = offsets.shape[0] - 1
    per = (size + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        j = offsets[b]
        for s in range(b * per, min(size, (b + 1) * per)):
            if slots[s] != 0:
                out[j] = table_key_at(slots, layout, s)
                j += 1


@njit(parallel=True)
def _keys_at(slots, layout, where, out):
    """out[i] = the key in (occupied) slot where[i], each slot prefetched a few ahead."""
    n = where.shape[0]
    for i in prange(n):
        if i + _KEYS_AHEAD < n:
            prefetch(slots, where[i + _KEYS_AHEAD])
        out[i] = table_key_at(slots, layout, where[i])


@njit(parallel=True)
def _count_blocks(slots, n_blocks, counts):
    size = slots.shape[0]
    per = (size + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        n = 0
        for s in range(b * per, min(size, (b + 1) * per)):
            if slots[s] != 0:
                n += 1
        counts[b] = n


#: Blocks of slots that kernels walking every occupied slot split the table into.
BLOCKS = 256


def block_offsets(slots: np.ndarray) -> np.ndarray:
    """Where each block's occupied slots start in a list of all of them, for kernels that write
    one entry per occupied slot in parallel: block b of ``BLOCKS`` equal blocks of ``slots``
    writes ``[offsets[b], offsets[b + 1])``.

    Returns
    -------
    numpy.ndarray of int64, shape (BLOCKS + 1,)
        Starts, then the total.
    """
    counts = np.zeros(BLOCKS, np.int64)
    _count_blocks(slots, BLOCKS, counts)
    offsets = np.zeros(BLOCKS + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets


# --- the classes -----------------------------------------------------------------------------


#: A dense table's slots a shard are a multiple of this (:func:`dense_table_slots`).
TABLE_SLOT_GRAIN = 1 << 12


def dense_table_slots(expected: int, load_factor: float, n_shards: int, code_bits: int) -> int:
    """Slots of a dense :class:`CompactTable` (:func:`~dobutsu_tb.encoding.compact_layout.make_table_layout`)
    for ``expected`` keys under ``load_factor``: the fewest multiple of :data:`TABLE_SLOT_GRAIN`
    a shard, at least ``2**MIN_SLOT_BITS``.

    Raises
    ------
    CompactTableFullError
        If a shard would need more than ``2**31`` slots, or the hash cannot address them.
    """
    n_shards = shards_for(n_shards)
    need = max(1 << compact_layout.MIN_SLOT_BITS, int(np.ceil(max(expected, 1) / load_factor)))
    per = -(-need // (n_shards * TABLE_SLOT_GRAIN)) * TABLE_SLOT_GRAIN
    if per > 1 << 31 or (per - 1).bit_length() + n_shards.bit_length() - 1 > code_bits:
        raise CompactTableFullError(f"hash table is full: {expected:,} keys would need {per * n_shards:,} slots")
    return per * n_shards


def _layout_dtype(layout: np.ndarray) -> np.dtype:
    """The dtype of the slots of a table of this layout (dense when a slot keeps a preimage bit)."""
    return np.dtype(slot_dtype(int(layout[L_TAG_BITS]), bool(layout[L_TAG_BITS] != layout[L_R])))


def table_slot_dtype(capacity: int, code_bits: int, n_shards: int) -> np.dtype:
    """The dtype of the slots of a table of ``capacity`` slots (:class:`CompactTable` with
    ``capacity``): int32 or int64 for a dense one, uint32 or uint64 for a power of two a shard."""
    return _layout_dtype(make_table_layout(code_bits, 0, capacity, shards_for(n_shards)))


def table_nbytes(expected: int, code_bits: int, load_factor: float = LOAD_FACTOR, n_shards: int = 1,
                 dense: bool = False) -> int:
    """Bytes of the slots of a :class:`CompactTable` made for ``expected`` keys (its other arrays
    take a few bytes a shard), a power of two of them or (``dense``) :func:`dense_table_slots`,
    for memory estimates; raises :class:`CompactTableFullError` if no table can hold that many keys."""
    if dense:
        slots = dense_table_slots(expected, load_factor, n_shards, code_bits)
        return table_slot_dtype(slots, code_bits, n_shards).itemsize * slots
    bits = min(slot_bits_for(expected, load_factor, shards_for(n_shards), code_bits), code_bits)
    return slot_dtype(code_bits - bits)(0).nbytes << bits


def remap_dtype(capacity: int):
    """The dtype of :meth:`CompactTable.grow`'s new place of each old slot, for a grown table of
    ``capacity`` slots: int32 while its slots (and -1, an empty old slot's) fit, else int64 (half
    the bytes a growth holds beside the tables, for tables of up to ``2**31`` slots)."""
    return np.int32 if capacity <= 1 << 31 else np.int64


def slot_dtype(remainder_bits: int, dense: bool = False):
    """The dtype of a table's slots for a remainder this wide
    (:func:`~dobutsu_tb.encoding.compact_layout.table_slot_bits`): uint32 or uint64, or for a
    dense table (``remainder_bits`` its tag: the remainder and the preimage bit) int32 or int64."""
    if dense:
        return np.int32 if table_slot_bits(remainder_bits, True) == 31 else np.int64
    return np.uint32 if table_slot_bits(remainder_bits) == 32 else np.uint64


class ShardedKeys:
    """What the compact structures share: shards, counts, the load limit, the growth rule.

    Subclasses set ``capacity``, ``layout``, ``counts``, ``n_shards``, ``code_bits``, ``shift``
    and ``load_factor``.
    """

    def __len__(self) -> int:
        return int(self.counts.sum())

    @property
    def limit(self) -> int:
        """Most keys one shard may hold under the load factor."""
        return int(self.capacity // self.n_shards * self.load_factor)

    def room(self) -> int:
        """Keys that can surely still be inserted under the load factor (the least room of any shard)."""
        return int(self.limit - self.counts.max())

    def _grown_bits(self, expected: int):
        """Slot bits to try when growing, smallest first (at least one more than now).

        Raises
        ------
        CompactTableFullError
            Once the hash has no more bits (or :data:`~dobutsu_tb.encoding.compact_layout.MAX_SLOT_BITS` is reached).
        """
        bits = int(self.code_bits - self.layout[L_R]) + 1
        try:
            bits = max(bits, slot_bits_for(max(int(expected), 2 * len(self)), self.load_factor, self.n_shards,
                                           self.code_bits))
        except CompactTableFullError:
            bits = compact_layout.MAX_SLOT_BITS + 1
        while True:
            if bits > min(self.code_bits, compact_layout.MAX_SLOT_BITS):
                raise CompactTableFullError(f"hash table is full: {len(self):,} keys, and it cannot grow beyond "
                                            f"2**{min(self.code_bits, compact_layout.MAX_SLOT_BITS)} slots")
            yield bits
            bits += 1


class CompactTable(ShardedKeys):
    """A set of keys ``code << shift`` in uint32 slots (linear probing); slots index value arrays.

    A table whose remainder is wider than :data:`~dobutsu_tb.encoding.compact_layout.MAX_NARROW_REMAINDER`
    bits (few slots for long keys) has uint64 slots instead.

    Parameters
    ----------
    expected : int
        Keys the table should hold without growing.
    code_bits, shift : int
        Keys are ``code << shift`` with ``0 < code < 2**code_bits`` (code_bits <= 62).
    load_factor : float, optional
        Most keys per slot (default :data:`~dobutsu_tb.encoding.config.LOAD_FACTOR`).
    n_shards : int, optional
        Threads that may insert at once; rounded up to a power of two.
    slot_bits : int, optional
        log2 of the slots, instead of what ``expected`` and ``load_factor`` ask for.
    capacity : int, optional
        The slots of a dense table (:func:`dense_table_slots`: any multiple of ``n_shards``),
        instead of a power of two; the table grows only past ``load_factor``, to a power of two.

    Attributes
    ----------
    slots : numpy.ndarray of uint32 (or uint64), shape (capacity,)
        0 marks an empty slot (layout in the module docstring).
    layout : numpy.ndarray of int64, shape (LAYOUT_FIELDS,)
        For the kernels (:func:`table_find`, :func:`table_insert`, :func:`table_key_at`).
    counts : numpy.ndarray of int64, shape (n_shards,)
        Keys per shard.

    Raises
    ------
    ValueError
        For inconsistent sizes.
    """

    def __init__(self, expected: int, code_bits: int, shift: int, load_factor: float = LOAD_FACTOR,
                 n_shards: int = 1, slot_bits: int | None = None, capacity: int | None = None):
        if not 0.0 < load_factor < 1.0:
            raise ValueError(f"load factor must be in (0, 1), got {load_factor}")
        self.code_bits, self.shift, self.load_factor = int(code_bits), int(shift), float(load_factor)
        self.n_shards = shards_for(n_shards)
        if capacity is not None:
            self.layout = make_table_layout(self.code_bits, self.shift, int(capacity), self.n_shards)
            self.slots = np.zeros(int(capacity), _layout_dtype(self.layout))  # (unsigned for a power of two a shard)
        else:
            bits = slot_bits if slot_bits is not None else slot_bits_for(expected, load_factor, self.n_shards,
                                                                         code_bits)
            self.layout = make_layout(self.code_bits, self.shift, min(bits, self.code_bits), self.n_shards)
            self.slots = np.zeros(1 << int(self.code_bits - self.layout[L_R]), slot_dtype(int(self.layout[L_R])))
        self.counts = np.zeros(self.n_shards, np.int64)

    @property
    def capacity(self) -> int:
        """Number of slots."""
        return self.slots.shape[0]

    @property
    def nbytes(self) -> int:
        """Memory held by the slots, in bytes."""
        return self.slots.nbytes

    def __repr__(self) -> str:
        return f"<CompactTable {len(self):,} keys in {self.capacity:,} slots, {self.n_shards} shards>"

    def hashes(self, keys) -> np.ndarray:
        """The hashes (int64, shape (n,)) of keys (array_like of int64, shape (n,))."""
        return hash_keys(keys, self.layout)

    def insert(self, keys) -> tuple[np.ndarray, np.ndarray]:
        """Insert keys, growing the table when needed (which moves every slot: value arrays kept by
        slot must then be moved by the caller, so builders call :meth:`grow` themselves).

        Parameters
        ----------
        keys : array_like of int64, shape (n,)
            Keys ``code << shift``; duplicates are allowed.

        Returns
        -------
        slots : numpy.ndarray of int64, shape (n,)
            Each key's slot after the call.
        new : numpy.ndarray of bool, shape (n,)
            True where the key was not in the table before (its first occurrence only).

        Raises
        ------
        ValueError
            If a key is not positive or not of the form ``code << shift``.
        """
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        self._check(keys)
        if self.room() < keys.size:
            self.grow(len(self) + keys.size)
        hashes = self.hashes(keys)
        while True:
            raw = np.empty(keys.shape[0], np.int64)
            if _table_insert_many(self.slots, self.layout, self.n_shards, self.counts, hashes, raw) == 0:
                break
            self.grow(2 * len(self) + keys.size)
        # Keys inserted before a grow were moved: find every key's slot afresh.
        slots = self.lookup(keys)
        new = np.zeros(keys.shape[0], np.bool_)
        new[raw >= 0] = True
        return slots, new

    def lookup(self, keys) -> np.ndarray:
        """Slots of keys (array_like of int64, shape (n,)): int64, shape (n,), -1 where absent."""
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        out = np.empty(keys.shape[0], np.int64)
        _table_find_many(self.slots, self.layout, self.hashes(keys), out)
        return out

    def __contains__(self, key) -> bool:
        return bool(self.lookup([key])[0] >= 0)

    def keys(self) -> np.ndarray:
        """The keys held, in slot order (int64, shape (len(self),))."""
        offsets = block_offsets(self.slots)
        out = np.empty(int(offsets[-1]), np.int64)
        _keys_in_slot_order(self.slots, self.layout, offsets, out)
        return out

    def keys_at(self, where: np.ndarray) -> np.ndarray:
        """The keys (int64, shape (n,)) in occupied slots ``where`` (an integer array, shape (n,);
        not checked: an empty slot gives a meaningless key)."""
        out = np.empty(where.shape[0], np.int64)
        _keys_at(self.slots, self.layout, where, out)
        return out

    def occupied(self) -> np.ndarray:
        """Slots in use, ascending (int64, shape (len(self),))."""
        return np.flatnonzero(self.slots)

    def grown_size(self, expected: int) -> tuple[int, int]:
        """The slots and bytes of the table :meth:`grow` makes for ``expected`` keys (the first
        size it tries; only a rehash that finds no room tries a larger one).

        Returns
        -------
        (int, int)
            Slots, and bytes their array holds.

        Raises
        ------
        CompactTableFullError
            If the table cannot grow.
        """
        bits = next(self._grown_bits(expected))
        layout = make_layout(self.code_bits, self.shift, bits, self.n_shards)
        return 1 << bits, (1 << bits) * _layout_dtype(layout).itemsize

    def grow(self, expected: int) -> np.ndarray:
        """Rehash into a table sized for ``max(expected, 2 * len(self))`` keys, at least twice as many slots.

        Returns
        -------
        numpy.ndarray of int32 or int64 (:func:`remap_dtype` of the new capacity), shape (old capacity,)
            New slot of each old slot, -1 for empty old slots: move value arrays with it.

        Raises
        ------
        CompactTableFullError
            If the table cannot grow (the hash has no more bits).
        """
        for bits in self._grown_bits(expected):
            layout = make_layout(self.code_bits, self.shift, bits, self.n_shards)
            slots = np.zeros(1 << bits, _layout_dtype(layout))
            counts = np.zeros(self.n_shards, np.int64)
            remap = np.empty(self.capacity, remap_dtype(1 << bits))
            if _rehash(self.slots, self.layout, slots, layout, counts, remap) == 0:
                break
        self.slots, self.layout, self.counts = slots, layout, counts
        return remap

    def _check(self, keys: np.ndarray) -> None:
        if keys.size and (keys.min() <= 0 or np.any(keys & ((1 << self.shift) - 1))
                          or keys.max() >> (self.shift + self.code_bits)):
            raise ValueError(f"keys must be positive and of the form code << {self.shift} "
                             f"with a code below 2**{self.code_bits}")
