"""The layout of the compact hash structures: the key's hash, its home slot and shard, sizes.

A key ``code << shift`` (``0 < code < 2**code_bits``) is turned into its *hash*, a bijective
scramble of the code bits (:func:`key_hash`, inverted by :func:`hash_key`); the top ``q`` bits of
the hash pick the home slot among ``2**q`` (:func:`home_slot`) and the top bits of the home slot
the shard (:func:`shard_of`). A structure's geometry is one int64 array, its *layout* (fields
``L_*``, made by :func:`make_layout`), so that one compiled kernel serves every size. Used by
:mod:`~dobutsu_tb.encoding.compact` and :mod:`~dobutsu_tb.encoding.compact_set`.
"""

from __future__ import annotations

import numpy as np

from dobutsu_tb.encoding.jit import njit, prange

#: Fields of a layout array. A set's (:func:`make_set_layout`) also has its buckets a shard
#: (``L_SHARD_SLOTS``, any number), the width of an entry's low part, remainder and preimage
#: bit (``L_TAG_BITS``), its entries a bucket (``L_BUCKET_ENTRIES``) and stash slots a shard
#: (``L_STASH``); a table's slots a shard are a power of two.
(L_BITS, L_SHIFT, L_MASK, L_XS, L_M1, L_M2, L_I1, L_I2, L_R, L_REM_MASK, L_SHARD_BITS, L_DISP_MAX, L_ENTRY,
 L_SHARD_SLOTS, L_TAG_BITS, L_BUCKET_ENTRIES, L_STASH) = range(17)
LAYOUT_FIELDS = 17
#: A set's buckets are one cache line each.
BUCKET_BYTES = 64
#: A set's stash (keys whose buckets are all full, as whole hashes) has about a slot for each this
#: many entries of a shard (the power of two at or below), and at least :data:`STASH_MIN`.
STASH_SHARE = 64
STASH_MIN = 64
#: Multipliers of the scramble (odd; masked to the code width).
_M1 = 0x9E3779B97F4A7C15
_M2 = 0xBF58476D1CE4E5B9
#: Smallest and largest numbers of slot bits (2**16 slots; 2**33 slots of 4 bytes are 32 GiB).
MIN_SLOT_BITS = 16
MAX_SLOT_BITS = 33
#: The widest remainder of a table's uint32 slots (the displacement gets the other 2 bits at
#: least); a wider one (a small table of long keys: a 50-bit key in 2**17 slots has 33 bits)
#: takes uint64 slots.
MAX_NARROW_REMAINDER = 30


class CompactTableFullError(RuntimeError):
    """Raised when a compact table or set cannot hold more keys within the memory allowed."""


def make_layout(code_bits: int, shift: int, slot_bits: int, n_shards: int, disp_bits: int | None = None) -> np.ndarray:
    """The layout array of a structure with ``2**slot_bits`` slots.

    Parameters
    ----------
    code_bits, shift : int
        Keys are ``code << shift`` with ``0 < code < 2**code_bits``.
    slot_bits : int
        log2 of the number of slots (at most ``code_bits``).
    n_shards : int
        A power of two, at most the number of slots.
    disp_bits : int, optional
        Width of the displacement field: default the rest of the table's slot
        (:func:`table_slot_bits`: ``32 - remainder bits``, or ``63 - remainder bits`` in a uint64
        slot); a ``CompactSet`` passes its own.

    Returns
    -------
    numpy.ndarray of int64, shape (LAYOUT_FIELDS,)

    Raises
    ------
    ValueError
        If the sizes are inconsistent (slot bits above the code bits, shards not a power of two,
        a remainder too wide for a uint32 slot).
    """
    if not 0 < slot_bits <= code_bits or code_bits > 62:
        raise ValueError(f"bad sizes: {slot_bits} slot bits for {code_bits}-bit codes")
    if n_shards < 1 or n_shards & (n_shards - 1) or n_shards > 1 << slot_bits:
        raise ValueError(f"the shard count must be a power of two up to the slot count, got {n_shards}")
    r = code_bits - slot_bits
    mask = (1 << code_bits) - 1
    m1, m2 = _M1 & mask | 1, _M2 & mask | 1
    if disp_bits is None:
        disp_bits = table_slot_bits(r) - r
    layout = np.zeros(LAYOUT_FIELDS, np.int64)
    layout[L_BITS], layout[L_SHIFT], layout[L_MASK] = code_bits, shift, mask
    layout[L_XS] = (code_bits + 1) // 2
    layout[L_M1], layout[L_M2] = m1, m2
    layout[L_I1], layout[L_I2] = pow(m1, -1, 1 << code_bits), pow(m2, -1, 1 << code_bits)
    layout[L_R], layout[L_REM_MASK] = r, (1 << r) - 1
    layout[L_SHARD_BITS] = slot_bits - (n_shards.bit_length() - 1)
    layout[L_DISP_MAX] = (1 << disp_bits) - 2
    layout[L_ENTRY] = (r + disp_bits + 7) // 8
    layout[L_SHARD_SLOTS] = 1 << int(layout[L_SHARD_BITS])
    layout[L_TAG_BITS] = r
    return layout


def _per_shard(count: int, n_shards: int, what: str) -> int:
    """``count`` (slots or buckets) a shard; ValueError unless ``n_shards`` is a power of two and
    ``count`` a positive multiple of it."""
    if n_shards < 1 or n_shards & (n_shards - 1) or count < n_shards or count % n_shards:
        raise ValueError(f"{what} must be a positive multiple of its shards, got {count} for {n_shards}")
    return count // n_shards


def make_table_layout(code_bits: int, shift: int, slots: int, n_shards: int) -> np.ndarray:
    """The layout of a table of ``slots`` slots, any multiple of ``n_shards`` (a *dense* table,
    sized to the keys it will hold rather than to the next power of two).

    Each shard's hashes go to its ``m = slots / n_shards`` slots as a set's go to its buckets
    (:func:`make_set_layout`): the ``k = ceil(log2 m)`` hash bits below the shard bits pick the
    home ``(t * m) >> k``, and when ``m`` is not a power of two a slot stores one preimage bit
    above the remainder, saying which of the two ``t`` of its home it holds. With ``m`` a power
    of two the layout is :func:`make_layout`'s.

    Parameters
    ----------
    code_bits, shift : int
        As for :func:`make_layout`.
    slots : int
        Slots of the table, a multiple of ``n_shards`` with at most ``2**31`` a shard when that is
        not a power of two (so that ``t * m`` fits 62 bits).
    n_shards : int
        A power of two.

    Returns
    -------
    numpy.ndarray of int64, shape (LAYOUT_FIELDS,)

    Raises
    ------
    ValueError
        If the sizes are inconsistent.
    """
    per = _per_shard(slots, n_shards, "a table's slots")
    k = (per - 1).bit_length()
    if per == 1 << k:
        return make_layout(code_bits, shift, k + n_shards.bit_length() - 1, n_shards)
    if k > 31:
        raise ValueError(f"a dense table has at most 2**31 slots a shard, got {per:,}")
    r = code_bits - k - (n_shards.bit_length() - 1)
    tag = r + 1
    layout = make_layout(code_bits, shift, k + n_shards.bit_length() - 1, n_shards, table_slot_bits(tag, True) - tag)
    layout[L_TAG_BITS], layout[L_SHARD_SLOTS] = tag, per
    return layout


def table_slot_bits(remainder_bits: int, dense: bool = False) -> int:
    """The bits of a compact table's slot for a remainder this wide: 32 (uint32 slots) up to
    :data:`MAX_NARROW_REMAINDER`, else 63 (uint64 slots, the top bit unused, so that an entry is a
    positive int64). A dense table's slots are signed (int32, int64: :func:`make_table_layout`),
    so 31 bits up to a tag (remainder and preimage bit) of ``MAX_NARROW_REMAINDER - 1``, else 63."""
    if dense:
        return 31 if remainder_bits <= MAX_NARROW_REMAINDER - 1 else 63
    return 32 if remainder_bits <= MAX_NARROW_REMAINDER else 63


def make_set_layout(code_bits: int, shift: int, buckets: int, n_shards: int, disp_bits: int) -> np.ndarray:
    """The layout of a set of ``buckets`` buckets (of one 64-byte cache line each), any multiple
    of ``n_shards``: a set can be sized to the keys it will hold instead of the next power of two.

    Each shard's hashes are spread over its ``m = buckets / n_shards`` buckets by
    ``home = (t * m) >> k``, where ``t`` is the ``k = ceil(log2 m)`` bits of the hash after the
    shard bits; the lower ``r = code_bits - shard bits - k`` bits are the remainder. At most two
    values of ``t`` share a home (``m > 2**(k-1)``), so an entry stores the remainder, one bit
    saying which of them it is (none when ``m`` is a power of two) and the displacement in
    buckets: the hash is given back exactly
    (:func:`~dobutsu_tb.encoding.compact_set.set_hash_at`). A bucket holds ``63 // entry bytes``
    entries (21 of 3 bytes) and its count in its last byte.

    Parameters
    ----------
    code_bits, shift : int
        As for :func:`make_layout`.
    buckets : int
        Buckets of the set, a multiple of ``n_shards``.
    n_shards : int
        A power of two.
    disp_bits : int
        Fewest bits of the displacement field; entries are whole bytes, so it may get more.

    Returns
    -------
    numpy.ndarray of int64, shape (LAYOUT_FIELDS,)

    Raises
    ------
    ValueError
        If the sizes are inconsistent.
    """
    per = _per_shard(buckets, n_shards, "a set's buckets")
    k = max(1, (per - 1).bit_length())
    layout = make_layout(code_bits, shift, k + n_shards.bit_length() - 1, n_shards, disp_bits)
    r = int(layout[L_R])
    tag = r + (0 if per == 1 << k else 1)
    entry = (tag + disp_bits + 7) // 8
    if entry > 8:
        raise ValueError(f"a set entry of {tag + disp_bits} bits does not fit 8 bytes")
    layout[L_ENTRY], layout[L_TAG_BITS], layout[L_SHARD_SLOTS] = entry, tag, per
    layout[L_DISP_MAX] = min((1 << (8 * entry - tag)) - 1, per - 1, (1 << 62) - 1)
    layout[L_BUCKET_ENTRIES] = (BUCKET_BYTES - 1) // entry
    layout[L_STASH] = max(STASH_MIN, 1 << max(0, (per * int(layout[L_BUCKET_ENTRIES]) // STASH_SHARE).bit_length() - 1))
    return layout


# --- kernels ---------------------------------------------------------------------------------


@njit
def key_hash(key, layout):
    """The hash of a key: its code bits scrambled by a bijection (so the hash gives back the key)."""
    mask, xs = layout[L_MASK], layout[L_XS]
    x = (key >> layout[L_SHIFT]) & mask
    x ^= x >> xs
    x = (x * layout[L_M1]) & mask
    x ^= x >> xs
    x = (x * layout[L_M2]) & mask
    x ^= x >> xs
    return x


@njit
def hash_key(h, layout):
    """The key of a hash (the inverse of :func:`key_hash`)."""
    mask, xs = layout[L_MASK], layout[L_XS]
    x = h ^ (h >> xs)  # x ^ (x >> xs) inverts in one step since 2 * xs >= code bits
    x = (x * layout[L_I2]) & mask
    x ^= x >> xs
    x = (x * layout[L_I1]) & mask
    x ^= x >> xs
    return x << layout[L_SHIFT]


@njit
def home_slot(h, layout):
    """The home slot of a hash in a table of a power of two of slots (its top bits; a dense
    table's: :func:`~dobutsu_tb.encoding.compact.table_home`)."""
    return h >> layout[L_R]


@njit
def shard_of(h, layout):
    """The shard of a hash: only the thread that owns it may insert the key."""
    return h >> (layout[L_R] + layout[L_SHARD_BITS])


@njit(parallel=True)
def _hash_many(keys, layout, out):
    for i in prange(keys.shape[0]):
        out[i] = key_hash(keys[i], layout)


def hash_keys(keys, layout) -> np.ndarray:
    """The hashes of canonical keys under a table layout.

    Parameters
    ----------
    keys : array_like of int64, shape (n,)
        Positive keys.
    layout : numpy.ndarray of int64
        A table's layout (``CompactTable.layout``).

    Returns
    -------
    numpy.ndarray of int64, shape (n,)
    """
    keys = np.ascontiguousarray(keys, dtype=np.int64)
    out = np.empty(keys.shape[0], np.int64)
    _hash_many(keys, layout, out)
    return out


def slot_bits_for(expected: int, load_factor: float, n_shards: int, code_bits: int) -> int:
    """log2 of the slots for ``expected`` keys under ``load_factor``.

    Raises
    ------
    CompactTableFullError
        If that is more than :data:`MAX_SLOT_BITS` (or the code width) allows.
    """
    need = max(1, int(np.ceil(max(expected, 1) / load_factor)))
    bits = max(MIN_SLOT_BITS, n_shards.bit_length() - 1, (need - 1).bit_length())
    if bits > min(code_bits, MAX_SLOT_BITS):
        raise CompactTableFullError(f"hash table is full: {expected:,} keys would need 2**{bits} slots, "
                                    f"more than 2**{min(code_bits, MAX_SLOT_BITS)}")
    return bits


def shards_for(n: int) -> int:
    """The smallest power of two >= n (shards must be a power of two)."""
    return 1 << max(0, (int(n) - 1).bit_length())
