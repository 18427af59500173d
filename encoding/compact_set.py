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
    L_SHARD_SLOTS,
    L_TAG_BITS,
    MAX_SLOT_BITS,
    CompactTableFullError,
    hash_keys,
    make_set_layout,
    shard_of,
    shards_for,
)
from dobutsu_tb.encoding.config import SET_LOAD_FACTOR
from dobutsu_tb.encoding.jit import njit, prange

#: Fewest bits of an entry's displacement field (displacements up to 126; at 90 % load the
#: largest of 15 M random keys was 58).
SET_DISP_BITS = 7
#: A set's slots are a multiple of this many a shard (sizes are rounded up to it).
SET_SLOT_GRAIN = 1 << 12
#: The fewest slots of a set.
MIN_SET_SLOTS = 1 << 16
#: How full a set may get before it grows, whatever load it was sized for: a set made for a
#: known count at its load factor must not grow for a few keys more in one shard.
SET_FILL_LIMIT = 0.95


@njit
def entry_at(buf, nbytes, s):
    """The value of entry ``s`` of a set's ``buf`` (``nbytes`` bytes, little-endian)."""
    if nbytes == 3:  # the full game's entries: three loads, no loop
        b = 3 * s
        return np.int64(buf[b]) | (np.int64(buf[b + 1]) << 8) | (np.int64(buf[b + 2]) << 16)
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


@njit(inline="always")
def _move_run(buf, nbytes, s, t, inc):
    """Move entries ``s .. t - 1`` of a set's ``buf`` one slot on (to ``s + 1 .. t``) and add
    ``inc`` to the top byte of each: their displacements, one more (no wrap-around)."""
    for j in range(nbytes * t + nbytes - 1, nbytes * s + nbytes - 1, -1):
        buf[j] = buf[j - nbytes]
    for j in range(nbytes * (s + 1) + nbytes - 1, nbytes * (t + 1), nbytes):
        buf[j] += inc


@njit
def set_home(h, layout):
    """The home slot of hash ``h`` in a set (:func:`~dobutsu_tb.encoding.compact_layout.make_set_layout`)."""
    r, per = layout[L_R], layout[L_SHARD_SLOTS]
    k = layout[L_SHARD_BITS]
    t = (h >> r) & ((np.int64(1) << k) - 1)
    return (h >> (r + k)) * per + ((t * per) >> k)


@njit
def _set_tag(h, layout):
    """The low part of hash ``h``'s entry: its remainder, and above it the preimage bit (1 when
    the ``t`` just below this one has the same home: :func:`make_set_layout`)."""
    r, per = layout[L_R], layout[L_SHARD_SLOTS]
    k = layout[L_SHARD_BITS]
    rem = h & layout[L_REM_MASK]
    if layout[L_TAG_BITS] == r:
        return rem
    t = (h >> r) & ((np.int64(1) << k) - 1)
    if t > 0 and ((t - 1) * per) >> k == (t * per) >> k:
        return (np.int64(1) << r) | rem
    return rem


@njit
def set_add(buf, layout, h):
    """Add the key with hash ``h`` to a :class:`CompactSet`'s ``buf``: 1 if it is new, 0 if it
    was there, -1 (nothing changed) when a displacement would not fit: grow the set and add again.

    Robin Hood probing: the key goes to the first slot of its probe sequence whose entry is
    nearer to its own home, and the run of entries from there to the next empty slot moves one
    slot on; this keeps every displacement short. Probes wrap around within the key's shard.
    Only the owner of the key's shard (:func:`shard_of`) may call this."""
    if layout[L_ENTRY] == 3:  # the full game's entries: the body compiled for a constant width
        return _set_add(buf, layout, h, 3)
    return _set_add(buf, layout, h, layout[L_ENTRY])


@njit(inline="always")
def _set_add(buf, layout, h, nbytes):
    """:func:`set_add` for entries of ``nbytes`` bytes."""
    tag_bits = layout[L_TAG_BITS]
    tag_mask = (np.int64(1) << tag_bits) - 1
    disp_max = layout[L_DISP_MAX]
    tag = _set_tag(h, layout)
    per = layout[L_SHARD_SLOTS]
    s = set_home(h, layout)
    base = (h >> (layout[L_R] + layout[L_SHARD_BITS])) * per
    end = base + per
    d = np.int64(0)
    while True:  # find the key, or where it goes
        v = entry_at(buf, nbytes, s)
        if v == 0:
            break
        vd = (v >> tag_bits) - 1
        if vd == d and (v & tag_mask) == tag:
            return 0
        if vd < d:
            break
        d += 1
        if d > disp_max:
            return -1
        s += 1
        if s == end:
            s = base
    t = s  # the run from s to the next empty slot moves on by one; check it fits first
    while True:
        v = entry_at(buf, nbytes, t)
        if v == 0:
            break
        if (v >> tag_bits) > disp_max:
            return -1
        t += 1
        if t == end:
            t = base
        if t == s:
            return -1
    top = 8 * (nbytes - 1)
    if t >= s and tag_bits >= top:  # no wrap, displacements in the top byte: move bytes, bump top bytes
        inc = np.uint8(1 << (tag_bits - top))  # one more displacement: no carry (the run was checked)
        _move_run(buf, nbytes, s, t, inc)
    else:
        one = np.int64(1) << tag_bits
        while t != s:
            prev = t - 1 if t > base else end - 1
            _put_entry(buf, nbytes, t, entry_at(buf, nbytes, prev) + one)
            t = prev
    _put_entry(buf, nbytes, s, ((d + 1) << tag_bits) | tag)
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
    the hash bits that chose the home from the home and the preimage bit, then the remainder),
    or -1 if the entry is empty."""
    r, per, k = layout[L_R], layout[L_SHARD_SLOTS], layout[L_SHARD_BITS]
    tag_bits = layout[L_TAG_BITS]
    v = entry_at(buf, layout[L_ENTRY], s)
    if v == 0:
        return np.int64(-1)
    shard = s // per
    home = (s - shard * per - ((v >> tag_bits) - 1)) % per
    t = ((home << k) + per - 1) // per  # the smallest t whose home this is
    if tag_bits > r:
        t += (v >> r) & 1
    return (((shard << k) | t) << r) | (v & layout[L_REM_MASK])


@njit
def _set_hashes(buf, layout, out):
    n = 0
    for s in range(buf.shape[0] // layout[L_ENTRY]):
        h = set_hash_at(buf, layout, s)
        if h >= 0:
            if n < out.shape[0]:
                out[n] = h
            n += 1
    return n


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


def set_slots_for(expected: int, load_factor: float, n_shards: int, code_bits: int) -> int:
    """Slots of a set for ``expected`` keys under ``load_factor``: the fewest that keep it below
    the load factor, rounded up to :data:`SET_SLOT_GRAIN` a shard, at least :data:`MIN_SET_SLOTS`;
    a multiple of ``n_shards``, not necessarily a power of two (unless the next power of two a
    shard takes fewer bytes).

    Raises
    ------
    CompactTableFullError
        If that is more than ``2**MAX_SLOT_BITS`` slots or the hash can address.
    """
    need = max(MIN_SET_SLOTS, int(np.ceil(max(expected, 1) / load_factor)))
    grain = SET_SLOT_GRAIN * n_shards
    slots = -(-need // grain) * grain
    most = 1 << min(code_bits, MAX_SLOT_BITS)
    if slots > most:
        raise CompactTableFullError(f"hash table is full: {expected:,} keys would need {slots:,} slots, "
                                    f"more than {most:,}")
    whole = n_shards << max(0, (slots // n_shards - 1).bit_length())  # the next power of two a shard
    if whole <= most and _entry_bytes(code_bits, whole, n_shards) * whole < _entry_bytes(code_bits, slots,
                                                                                           n_shards) * slots:
        return whole  # a remainder bit less makes the entries a byte shorter: fewer bytes in all
    return slots


def _entry_bytes(code_bits: int, slots: int, n_shards: int) -> int:
    return int(make_set_layout(code_bits, 0, slots, n_shards, SET_DISP_BITS)[L_ENTRY])


class CompactSet(ShardedKeys):
    """A set of keys ``code << shift`` that counts distinct keys (Robin Hood probing).

    The set has any number of slots (a multiple of :data:`SET_SLOT_GRAIN` a shard), so it is
    sized to its keys (:func:`~dobutsu_tb.encoding.compact_layout.make_set_layout`). Entries take
    ``ceil((r + p + 7) / 8)`` bytes, with ``r = code_bits - ceil(log2 slots)`` remainder bits and
    ``p`` one preimage bit (none when the slots a shard are a power of two): 3 bytes for 44-bit
    codes at 2**27 to 2**28 slots.

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

    Raises
    ------
    CompactTableFullError
        If no set can hold ``expected`` keys.
    """

    def __init__(self, expected: int, code_bits: int, shift: int, load_factor: float = SET_LOAD_FACTOR,
                 n_shards: int = 1):
        self.code_bits, self.shift, self.load_factor = int(code_bits), int(shift), float(load_factor)
        self.n_shards = shards_for(n_shards)
        self._allocate(set_slots_for(expected, load_factor, self.n_shards, self.code_bits))

    def _allocate(self, slots: int) -> None:
        self.layout = make_set_layout(self.code_bits, self.shift, slots, self.n_shards, SET_DISP_BITS)
        self.buf = np.zeros(slots * int(self.layout[L_ENTRY]), np.uint8)
        self.counts = np.zeros(self.n_shards, np.int64)

    @property
    def capacity(self) -> int:
        """Number of slots."""
        return int(self.layout[L_SHARD_SLOTS]) * self.n_shards

    @property
    def limit(self) -> int:
        """Most keys one shard may hold before the set grows: :data:`SET_FILL_LIMIT` of its slots
        (the load factor sizes the set; the last few percent are slack)."""
        return int(self.capacity // self.n_shards * max(self.load_factor, SET_FILL_LIMIT))

    @property
    def entry_bytes(self) -> int:
        """Bytes per slot."""
        return int(self.layout[L_ENTRY])

    @property
    def nbytes(self) -> int:
        return self.buf.nbytes

    def hashes(self) -> np.ndarray:
        """The hashes of the keys held, in slot order (int64, shape (len(self),))."""
        out = np.empty(len(self), np.int64)
        if _set_hashes(self.buf, self.layout, out) != out.shape[0]:
            raise AssertionError("the set's counts disagree with its entries")  # pragma: no cover
        return out

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
        most = 1 << min(self.code_bits, MAX_SLOT_BITS)
        slots = 2 * self.capacity
        try:
            slots = max(slots, set_slots_for(max(int(expected), 2 * len(self)), self.load_factor, self.n_shards,
                                             self.code_bits))
        except CompactTableFullError:
            slots = most + 1
        while True:
            if slots > most:
                raise CompactTableFullError(f"hash table is full: {len(self):,} keys, and it cannot grow beyond "
                                            f"{most:,} slots")
            self._allocate(slots)
            if _set_rehash(old_buf, old_layout, self.buf, self.layout, self.counts) == 0:
                return
            slots *= 2


def set_nbytes(expected: int, code_bits: int, shift: int, load_factor: float = SET_LOAD_FACTOR,
               n_shards: int = 1) -> int:
    """Bytes of the entries of a :class:`CompactSet` made for ``expected`` keys, for memory
    estimates.

    Raises
    ------
    CompactTableFullError
        If no set can hold that many keys.
    """
    shards = shards_for(n_shards)
    slots = set_slots_for(expected, load_factor, shards, code_bits)
    return slots * int(make_set_layout(code_bits, shift, slots, shards, SET_DISP_BITS)[L_ENTRY])
