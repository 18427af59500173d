"""A compact set of 64-bit keys that counts distinct keys: buckets of one cache line, entries of 1
to 8 bytes (the enumeration counts the terminal positions of the full game in it, 21 entries of
3 bytes a bucket). Keys, hashes, layouts and shards are those of :mod:`dobutsu_tb.encoding.compact`.

A key goes to the first bucket from its home on that is not full, and its entry records how
many buckets on that is (its displacement), so that a look-up reads one cache line, rarely
two: in a one-off count of a set of 21 entries a bucket filled to 85 %, one key in 40 lay past
its home bucket and one in 200 past its neighbour. A key whose buckets are all full up to the
largest displacement an entry can hold goes to its shard's *stash*, a small linear-probing
array of whole hashes (about 1 key in 5,000 in that count). Keys are never removed, so a
bucket that is not full ends every search.

Layout of ``buf`` (uint64 words; the buckets 64-byte aligned), with ``E = 63 // entry bytes``
entries a bucket and ``S`` stash slots a shard::

    buckets of shard 0, shard 1, ...    64 bytes each: byte plane j (the j-th byte of every
                                         entry, little-endian) at bytes j*E .. j*E + E - 1,
                                         the number of entries in byte 63
    stash of shard 0, shard 1, ...      S words each: a hash, or 0 for an empty slot

The first byte plane is searched eight entries at a time (a SWAR compare of a word), and the
other bytes of a candidate compared one by one.
"""

from __future__ import annotations

import numpy as np

from dobutsu_tb.encoding.bits import trailing_zeros
from dobutsu_tb.encoding.compact import ShardedKeys
from dobutsu_tb.encoding.compact_layout import (
    BUCKET_BYTES,
    L_BITS,
    L_BUCKET_ENTRIES,
    L_DISP_MAX,
    L_ENTRY,
    L_R,
    L_REM_MASK,
    L_SHARD_BITS,
    L_SHARD_SLOTS,
    L_STASH,
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

#: Fewest bits of an entry's displacement field (in buckets: up to 7 before the stash).
SET_DISP_BITS = 3
#: The same where it makes the set smaller: up to 3 buckets before the stash. Halving a set (the
#: terminal positions counted in two partitions) lengthens the remainder by a bit, and a
#: preimage bit, the remainder and 3 bits of displacement no longer fit 3 bytes; with 2 they do
#: (the 5x3 game's half set: 3.3 GiB instead of 4.1).
SET_DISP_BITS_SHORT = 2
#: ... but only where it saves at least this share of the bytes (the standard game's set would
#: save 1.5 %, for more keys in the stash).
SHORT_DISP_SAVING = 0.125
#: A set's buckets are a multiple of this many a shard (sizes are rounded up to it).
SET_BUCKET_GRAIN = 1 << 8
#: The fewest buckets of a set (256 KiB).
MIN_SET_BUCKETS = 1 << 12
#: How full a set may get before it grows, whatever load it was sized for: a set made for a
#: known count at its load factor must not grow for a few keys more in one shard.
SET_FILL_LIMIT = 0.93
#: Most stash slots probed for one key before the set asks to grow.
STASH_PROBES = 64
#: Words of a bucket.
_BUCKET_WORDS = BUCKET_BYTES // 8
_COUNT_BYTE = BUCKET_BYTES - 1
_ONES = np.uint64(0x0101010101010101)
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
#: Multiplying the low bits of a word's eight bytes by this gathers them in its top byte.
_GATHER = np.uint64(0x0102040810204080)


@njit(inline="always")
def _byte(buf, w0, o):
    """Byte ``o`` of the bucket at word ``w0``."""
    return np.int64((buf[w0 + (o >> 3)] >> np.uint64(8 * (o & 7))) & np.uint64(0xFF))


@njit(inline="always")
def _put_byte(buf, w0, o, v):
    i = w0 + (o >> 3)
    shift = np.uint64(8 * (o & 7))
    buf[i] = (buf[i] & ~(np.uint64(0xFF) << shift)) | (np.uint64(v & 0xFF) << shift)


@njit(inline="always")
def _entry(buf, w0, i, n_entries, nbytes):
    """Entry ``i`` of the bucket at word ``w0``."""
    v = np.int64(0)
    for j in range(nbytes):
        v |= _byte(buf, w0, j * n_entries + i) << (8 * j)
    return v


@njit(inline="always")
def _bucket_has(buf, w0, c, n_entries, nbytes, v):
    """Whether the ``c`` entries of the bucket at word ``w0`` hold ``v``: the entries whose first
    byte matches are found eight at a time (the zero bytes of a word XOR the byte repeated,
    gathered into one bit each), then their other bytes compared."""
    pattern = np.uint64(v & 0xFF) * _ONES
    found = np.uint64(0)
    for j in range((n_entries + 7) >> 3):
        x = buf[w0 + j] ^ pattern
        zero = ~(((x & _LOW7) + _LOW7) | x | _LOW7)  # the top bit of each zero byte, exactly
        found |= ((zero >> np.uint64(7)) * _GATHER >> np.uint64(56)) << np.uint64(8 * j)
    found &= (np.uint64(1) << np.uint64(c)) - np.uint64(1)
    while found != 0:
        i = np.int64(trailing_zeros(found))
        same = True
        for b in range(1, nbytes):
            if _byte(buf, w0, b * n_entries + i) != (v >> (8 * b)) & 0xFF:
                same = False
                break
        if same:
            return True
        found &= found - np.uint64(1)
    return False


@njit(inline="always")
def _home(h, layout):
    """(shard, t, home bucket within the shard) of hash ``h`` (:func:`make_set_layout`)."""
    r, per, k = layout[L_R], layout[L_SHARD_SLOTS], layout[L_SHARD_BITS]
    t = (h >> r) & ((np.int64(1) << k) - 1)
    return h >> (r + k), t, (t * per) >> k


@njit
def set_line(h, layout):
    """The word of a set's ``buf`` where the home bucket of hash ``h`` starts (to prefetch)."""
    shard, _, local = _home(h, layout)
    return (shard * layout[L_SHARD_SLOTS] + local) * _BUCKET_WORDS


@njit
def _n_shards(layout):
    return np.int64(1) << (layout[L_BITS] - layout[L_R] - layout[L_SHARD_BITS])


@njit
def set_entries(layout):
    """The number of entry indices of a set (:func:`set_hash_at`): its buckets' entries, then
    its stash slots."""
    n = _n_shards(layout)
    return n * layout[L_SHARD_SLOTS] * layout[L_BUCKET_ENTRIES] + n * layout[L_STASH]


def _words(layout: np.ndarray, n_shards: int) -> int:
    """uint64 words of a set's ``buf``: its buckets, then each shard's stash."""
    return int(layout[L_SHARD_SLOTS]) * n_shards * _BUCKET_WORDS + n_shards * int(layout[L_STASH])


#: The full game's entries (bytes, entries a bucket), for :func:`set_add_sized`.
ENTRY_3 = (3, (BUCKET_BYTES - 1) // 3)


@njit
def set_add(buf, layout, h):
    """Add the key with hash ``h`` to a :class:`CompactSet`'s ``buf``: 1 if it is new, 0 if it
    was there, -1 (nothing changed) when neither its buckets nor the stash have room: grow the
    set and add again. Only the owner of the key's shard (:func:`shard_of`) may call this."""
    return set_add_sized(buf, layout, h, layout[L_ENTRY], layout[L_BUCKET_ENTRIES])


@njit(inline="always")
def set_add_sized(buf, layout, h, nbytes, n_entries):
    """:func:`set_add` for entries of ``nbytes`` bytes, ``n_entries`` a bucket. A loop of many
    additions branches once on the set's width and calls this with constants for the common
    one (:data:`ENTRY_3`), so that the body compiles for them: 20 instead of 33 ns an addition
    (a branch inside each addition costs as much as the generic body)."""
    r, per, k = layout[L_R], layout[L_SHARD_SLOTS], layout[L_SHARD_BITS]
    tag_bits = layout[L_TAG_BITS]
    shard, t, local = _home(h, layout)
    tag = h & layout[L_REM_MASK]
    if tag_bits > r and t > 0 and ((t - 1) * per) >> k == local:
        tag |= np.int64(1) << r  # the second t of this home
    base = shard * per
    for d in range(layout[L_DISP_MAX] + 1):
        w0 = (base + local) * _BUCKET_WORDS
        c = _byte(buf, w0, _COUNT_BYTE)
        v = (np.int64(d) << tag_bits) | tag
        if _bucket_has(buf, w0, c, n_entries, nbytes, v):
            return 0
        if c < n_entries:
            for j in range(nbytes):
                _put_byte(buf, w0, j * n_entries + c, v >> (8 * j))
            _put_byte(buf, w0, _COUNT_BYTE, c + 1)
            return 1
        local += 1
        if local == per:
            local = 0
    return _stash_add(buf, layout, h, shard)


@njit
def _stash_add(buf, layout, h, shard):
    """:func:`set_add` in the shard's stash (every bucket the key may go to is full)."""
    size = layout[L_STASH]
    start = _n_shards(layout) * layout[L_SHARD_SLOTS] * _BUCKET_WORDS + shard * size
    want = np.uint64(h)
    s = h & (size - 1)
    for _ in range(min(STASH_PROBES, size)):
        v = buf[start + s]
        if v == want:
            return 0
        if v == 0:
            buf[start + s] = want
            return 1
        s = (s + 1) & (size - 1)
    return -1


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
    """The hash held by entry ``s`` of a set (``0 <= s <`` :func:`set_entries`), or -1 if the
    entry is empty. A bucket's entry gives its home from the bucket and the displacement, the
    hash bits that chose the home from the home and the preimage bit, then the remainder; a
    stash slot holds the hash."""
    r, per, k = layout[L_R], layout[L_SHARD_SLOTS], layout[L_SHARD_BITS]
    n_entries = layout[L_BUCKET_ENTRIES]
    n = _n_shards(layout)
    in_buckets = n * per * n_entries
    if s >= in_buckets:
        v = buf[n * per * _BUCKET_WORDS + s - in_buckets]
        return np.int64(-1) if v == 0 else np.int64(v)
    bucket, i = s // n_entries, s % n_entries
    w0 = bucket * _BUCKET_WORDS
    if i >= _byte(buf, w0, _COUNT_BYTE):
        return np.int64(-1)
    tag_bits = layout[L_TAG_BITS]
    v = _entry(buf, w0, i, n_entries, layout[L_ENTRY])
    shard = bucket // per
    home = (bucket - shard * per - (v >> tag_bits)) % per
    t = ((home << k) + per - 1) // per  # the smallest t whose home this is
    if tag_bits > r:
        t += (v >> r) & 1
    return (((shard << k) | t) << r) | (v & layout[L_REM_MASK])


@njit
def _set_hashes(buf, layout, out):
    n = 0
    for s in range(set_entries(layout)):
        h = set_hash_at(buf, layout, s)
        if h >= 0:
            if n < out.shape[0]:
                out[n] = h
            n += 1
    return n


@njit
def _set_rehash(old, old_layout, new, new_layout, counts):
    failed = 0
    for s in range(set_entries(old_layout)):
        h = set_hash_at(old, old_layout, s)
        if h < 0:
            continue
        a = set_add(new, new_layout, h)
        if a < 0:
            failed += 1
        else:
            counts[shard_of(h, new_layout)] += a
    return failed


def set_geometry(expected: int, load_factor: float, n_shards: int, code_bits: int) -> tuple[int, int]:
    """Buckets and displacement bits of a set for ``expected`` keys under ``load_factor``: the
    fewest bytes among the bucket counts that keep it below the load factor (a multiple of
    :data:`SET_BUCKET_GRAIN` a shard, or a power of two a shard, whose entries have no preimage
    bit and may be a byte shorter), at least :data:`MIN_SET_BUCKETS`, and the displacement fields
    of :data:`SET_DISP_BITS` bits or, where that saves :data:`SHORT_DISP_SAVING` of the bytes,
    :data:`SET_DISP_BITS_SHORT`.

    Raises
    ------
    CompactTableFullError
        If that is more than ``2**MAX_SLOT_BITS`` buckets or the hash can address.
    """
    need = max(1, int(np.ceil(max(expected, 1) / load_factor)))
    grain = SET_BUCKET_GRAIN * n_shards
    most = 1 << min(code_bits, MAX_SLOT_BITS)
    best = {}
    for disp_bits in (SET_DISP_BITS, SET_DISP_BITS_SHORT):
        for nbytes in range(1, 9):
            buckets = max(MIN_SET_BUCKETS, -(-need // ((BUCKET_BYTES - 1) // nbytes)))
            buckets = -(-buckets // grain) * grain
            whole = n_shards << max(0, (buckets // n_shards - 1).bit_length())  # the next power of two a shard
            for b in (buckets, whole):
                if b > most:
                    continue
                layout = make_set_layout(code_bits, 0, b, n_shards, disp_bits)
                if layout[L_ENTRY] > nbytes:
                    continue  # these entries are wider: fewer a bucket than counted
                size = 8 * _words(layout, n_shards)
                if disp_bits not in best or size < best[disp_bits][0]:
                    best[disp_bits] = (size, b)
    if not best:
        raise CompactTableFullError(f"hash table is full: {expected:,} keys would need more than {most:,} buckets")
    usual, short = best.get(SET_DISP_BITS), best.get(SET_DISP_BITS_SHORT)
    if usual is None or short is not None and short[0] <= usual[0] * (1 - SHORT_DISP_SAVING):
        return short[1], SET_DISP_BITS_SHORT
    return usual[1], SET_DISP_BITS


def set_buckets_for(expected: int, load_factor: float, n_shards: int, code_bits: int) -> int:
    """The buckets of :func:`set_geometry`."""
    return set_geometry(expected, load_factor, n_shards, code_bits)[0]


class CompactSet(ShardedKeys):
    """A set of keys ``code << shift`` that counts distinct keys (buckets of a cache line).

    The set has any number of buckets (a multiple of :data:`SET_BUCKET_GRAIN` a shard), so it is
    sized to its keys (:func:`~dobutsu_tb.encoding.compact_layout.make_set_layout`). Entries take
    ``ceil((r + p + 3) / 8)`` bytes, with ``r = code_bits - ceil(log2 buckets)`` remainder bits,
    ``p`` one preimage bit (none when the buckets a shard are a power of two) and 3 bits of
    displacement: 3 bytes for 44-bit codes at ``2**23`` buckets, 21 a bucket.

    Parameters
    ----------
    expected : int
        Keys the set should hold without growing.
    code_bits, shift : int
        As for :class:`CompactTable`.
    load_factor : float, optional
        Most keys per entry (default :data:`~dobutsu_tb.encoding.config.SET_LOAD_FACTOR`).
    n_shards : int, optional
        Threads that may add at once; rounded up to a power of two.

    Attributes
    ----------
    buf : numpy.ndarray of uint64, shape (buckets * 8 + n_shards * stash slots,)
        64-byte aligned (module docstring).
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
        buckets, self.disp_bits = set_geometry(expected, load_factor, self.n_shards, self.code_bits)
        self._allocate(buckets)

    def _allocate(self, buckets: int) -> None:
        self.layout, self.buf, self.counts = self._empty(buckets, self.disp_bits)

    def _empty(self, buckets: int, disp_bits: int):
        """The layout, buffer and counts of an empty set of ``buckets`` buckets."""
        layout = make_set_layout(self.code_bits, self.shift, buckets, self.n_shards, disp_bits)
        words = _words(layout, self.n_shards)
        raw = np.zeros(words + _BUCKET_WORDS, np.uint64)
        skip = (-raw.ctypes.data % BUCKET_BYTES) // 8  # buckets on cache lines
        return layout, raw[skip:skip + words], np.zeros(self.n_shards, np.int64)

    @property
    def buckets(self) -> int:
        """Number of buckets."""
        return int(self.layout[L_SHARD_SLOTS]) * self.n_shards

    @property
    def capacity(self) -> int:
        """Number of entries in the buckets (the stash not counted)."""
        return self.buckets * int(self.layout[L_BUCKET_ENTRIES])

    @property
    def limit(self) -> int:
        """Most keys one shard may hold before the set grows: :data:`SET_FILL_LIMIT` of its entries
        (the load factor sizes the set; the last few percent are slack)."""
        return int(self.capacity // self.n_shards * max(self.load_factor, SET_FILL_LIMIT))

    @property
    def entry_bytes(self) -> int:
        """Bytes per entry."""
        return int(self.layout[L_ENTRY])

    @property
    def nbytes(self) -> int:
        return self.buf.nbytes

    @property
    def allocated(self) -> int:
        """The bytes the set allocated: its buckets (:attr:`nbytes`), their alignment on cache
        lines and its counts."""
        return self.buf.nbytes + _beside_buckets(self.n_shards)

    @property
    def _most_buckets(self) -> int:
        """The most buckets the hash can address."""
        return 1 << min(self.code_bits, MAX_SLOT_BITS)

    def hashes(self) -> np.ndarray:
        """The hashes of the keys held, in entry order (int64, shape (len(self),))."""
        out = np.empty(len(self), np.int64)
        if _set_hashes(self.buf, self.layout, out) != out.shape[0]:
            raise AssertionError("the set's counts disagree with its entries")  # pragma: no cover
        return out

    def add_hashes(self, hashes) -> np.ndarray:
        """Add keys given by their hashes (:func:`key_hash`); returns 1 where a key was new, else 0."""
        hashes = np.ascontiguousarray(hashes, dtype=np.int64)
        if self.room() < hashes.size:
            self.grow(len(self) + hashes.size)
        new = np.zeros(hashes.shape[0], np.int64)
        out = np.empty_like(new)
        while True:
            out[:] = 0
            failed = _set_add_many(self.buf, self.layout, self.n_shards, self.counts, hashes, out)
            np.maximum(new, out, out=new)  # a key added before the set grew is found again (0), not new
            if failed == 0:
                return new
            self.grow(2 * len(self) + hashes.size)

    def add(self, keys) -> np.ndarray:
        """Add keys (array_like of int64, shape (n,)); returns int64 (n,), 1 where a key was new."""
        return self.add_hashes(hash_keys(keys, self.layout))

    def _grown_geometry(self, expected: int) -> tuple[int, int]:
        """The buckets and displacement bits :meth:`grow` tries first (more buckets than the hash
        can address when it cannot grow)."""
        buckets, disp_bits = 2 * self.buckets, SET_DISP_BITS
        try:
            sized, sized_disp = set_geometry(max(int(expected), 2 * len(self)), self.load_factor, self.n_shards,
                                             self.code_bits)
            if sized > buckets:
                buckets, disp_bits = sized, sized_disp
        except CompactTableFullError:
            buckets = self._most_buckets + 1
        return buckets, disp_bits

    def grown_nbytes(self, expected: int) -> int:
        """The bytes the set :meth:`grow` makes for ``expected`` keys allocates (the first size it
        tries; only a rehash that finds no room tries a larger one): its buckets, their alignment
        on cache lines and the counts.

        Raises
        ------
        CompactTableFullError
            If the set cannot grow.
        """
        buckets, disp_bits = self._grown_geometry(expected)
        if buckets > self._most_buckets:
            raise CompactTableFullError(f"hash table is full: {len(self):,} keys, and it cannot grow any further")
        layout = make_set_layout(self.code_bits, self.shift, buckets, self.n_shards, disp_bits)
        return 8 * _words(layout, self.n_shards) + _beside_buckets(self.n_shards)

    def grow(self, expected: int) -> None:
        """Rehash into at least twice as many buckets, sized for ``max(expected, 2 * len(self))`` keys.

        The set is unchanged if this raises.

        Raises
        ------
        CompactTableFullError
            If the set cannot grow (the hash has no more bits).
        MemoryError
            If numpy cannot allocate the new buckets.
        """
        most = self._most_buckets
        buckets, disp_bits = self._grown_geometry(expected)
        while True:
            if buckets > most:
                raise CompactTableFullError(f"hash table is full: {len(self):,} keys, and it cannot grow beyond "
                                            f"{most:,} buckets")
            layout, buf, counts = self._empty(buckets, disp_bits)
            if _set_rehash(self.buf, self.layout, buf, layout, counts) == 0:
                self.layout, self.buf, self.counts, self.disp_bits = layout, buf, counts, disp_bits
                return
            buckets, disp_bits = 2 * buckets, SET_DISP_BITS


def set_allocated(expected: int, code_bits: int, shift: int, load_factor: float = SET_LOAD_FACTOR,
                  n_shards: int = 1) -> int:
    """Bytes a :class:`CompactSet` made for ``expected`` keys allocates (:attr:`CompactSet.allocated`:
    :func:`set_nbytes` and a few bytes more), for memory budgets.

    Raises
    ------
    CompactTableFullError
        If no set can hold that many keys.
    """
    shards = shards_for(n_shards)
    return set_nbytes(expected, code_bits, shift, load_factor, shards) + _beside_buckets(shards)


def _beside_buckets(n_shards: int) -> int:
    """The bytes a set allocates beside its buckets (:meth:`CompactSet._empty`): a bucket's words
    for their alignment on cache lines, and a count a shard."""
    return 8 * (_BUCKET_WORDS + n_shards)


def set_nbytes(expected: int, code_bits: int, shift: int, load_factor: float = SET_LOAD_FACTOR,
               n_shards: int = 1) -> int:
    """Bytes of a :class:`CompactSet` made for ``expected`` keys (its buckets and stash), for
    memory estimates.

    Raises
    ------
    CompactTableFullError
        If no set can hold that many keys.
    """
    shards = shards_for(n_shards)
    buckets, disp_bits = set_geometry(expected, load_factor, shards, code_bits)
    return 8 * _words(make_set_layout(code_bits, shift, buckets, shards, disp_bits), shards)
