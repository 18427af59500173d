"""Bit helpers for kernels over int64 bit sets (boards, masks): counting and finding set bits.

Jitted, so other kernels call them; from Python they work on ints and numpy integers too.

*Wide* bit sets hold more than 64 elements: a row ``m[r, :]`` of a 2-D int64 array, element x
being bit ``x % 64`` of word ``x // 64``::

    m[r, 0]: elements 63 .. 0    m[r, 1]: elements 127 .. 64    ...

The ``wide_*`` helpers read and write such rows in place (no array is allocated).
"""

from __future__ import annotations

import numba
import numpy as np

from dobutsu_tb.encoding.jit import njit

if numba.config.DISABLE_JIT:  # (NUMBA_DISABLE_JIT=1: the kernels run as plain Python, this too)
    def trailing_zeros(x):
        """Index of the lowest set bit of a non-zero int64, in plain Python."""
        x = int(x) & 0xFFFF_FFFF_FFFF_FFFF
        return (x & -x).bit_length() - 1
else:
    from numba.cpython.unsafe.numbers import trailing_zeros

#: log2 of the bits of a word of a wide bit set, and the mask of a bit's place in its word.
WORD_SHIFT, WORD_MASK = 6, 63
_M1, _M2, _M4, _H01 = 0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F, 0x0101010101010101


@njit
def popcount(x):
    """Number of set bits of an int64 (bit 63 included: the loop clears the lowest set bit until
    none is left)."""
    n = 0
    while x:
        x &= x - 1
        n += 1
    return n


@njit
def lowest_bit(x):
    """Index of the lowest set bit of a non-zero int64 (0..63); -1 for zero."""
    if x == 0:
        return -1
    i = 0
    while not (x >> i) & 1:
        i += 1
    return i


@njit
def sort_prefix(row, n):
    """Sort ``row[:n]`` in place (insertion sort: for the short rows of one position's children
    or predecessors, at most a few hundred entries)."""
    for i in range(1, n):
        v = row[i]
        j = i - 1
        while j >= 0 and row[j] > v:
            row[j + 1] = row[j]
            j -= 1
        row[j + 1] = v


#: 0x0101010101010101: one in every byte of a 64-bit word.
_BYTES_ONE = 0x0101010101010101
_BYTES_HIGH = -0x7F7F7F7F7F7F7F80  # 0x8080808080808080 as an int64


@njit
def find_bytes(data, value, start, out):
    """Indices ``i >= start`` with ``data[i] == value`` (a uint8 array), into ``out`` until it is
    full; returns (how many, where the search stopped). Eight bytes are tested at a time (a
    word with no byte equal to ``value`` is skipped whole)."""
    n = 0
    i = start
    size = data.shape[0]
    cap = out.shape[0]
    pattern = np.int64(value) * _BYTES_ONE
    words = data[: size - size % 8].view(np.int64)
    while i < size and n < cap:
        if i % 8 == 0 and i + 8 <= size:
            x = words[i // 8] ^ pattern  # a zero byte where data equals value
            if ((x - _BYTES_ONE) & ~x & _BYTES_HIGH) == 0:
                i += 8
                continue
        if data[i] == value:
            out[n] = i
            n += 1
        i += 1
    return n, i


@njit
def popcount_word(x):
    """Number of set bits of an int64, without a loop (the SWAR sum: pairs, nibbles, bytes)."""
    x = x - ((x >> 1) & _M1)
    x = (x & _M2) + ((x >> 2) & _M2)
    x = (x + (x >> 4)) & _M4
    return ((x * _H01) >> 56) & 0xFF


@njit
def lowest_bit_word(x):
    """Index of the lowest set bit of a non-zero int64 (0..63), one instruction (undefined for 0)."""
    return trailing_zeros(x)


@njit
def wide_has(m, r, x):
    """Whether element ``x`` is in the wide bit set ``m[r]``."""
    return (m[r, x >> WORD_SHIFT] >> (x & WORD_MASK)) & 1 != 0


@njit
def wide_add(m, r, x):
    """Add element ``x`` to the wide bit set ``m[r]``."""
    m[r, x >> WORD_SHIFT] |= np.int64(1) << (x & WORD_MASK)


@njit
def wide_remove(m, r, x):
    """Remove element ``x`` from the wide bit set ``m[r]``."""
    m[r, x >> WORD_SHIFT] &= ~(np.int64(1) << (x & WORD_MASK))


@njit
def wide_count(m, r):
    """Number of elements of the wide bit set ``m[r]``."""
    n = 0
    for w in range(m.shape[1]):
        n += popcount_word(m[r, w])
    return n


@njit
def wide_empty(m, r):
    """Whether the wide bit set ``m[r]`` is empty."""
    for w in range(m.shape[1]):
        if m[r, w] != 0:
            return False
    return True


@njit
def wide_copy(src, a, dst, b):
    """``dst[b] = src[a]`` for wide bit sets of the same width."""
    for w in range(src.shape[1]):
        dst[b, w] = src[a, w]
