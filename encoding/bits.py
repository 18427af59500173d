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
_BYTES_HIGH = -0x7F7F7F7F7F7F7F80  # 0x8080808080808080 as an int64: the top bit of every byte
_BYTES_LOW7 = 0x7F7F7F7F7F7F7F7F  # the low seven bits of every byte
#: Words tested together before a block with no match is skipped (a cache line).
_FIND_BLOCK = 8


@njit
def find_bytes(data, value, start, out):
    """Indices ``i >= start`` with ``data[i] == value`` (a uint8 array), into ``out`` until it is
    full; returns (how many, where the search stopped: the index to search on from). A cache line
    without ``value`` is skipped after one test of its eight words; in a word that holds it, each
    match is found from the word's exact mask of matching bytes, lowest first. What a plain scan
    gives (tests/test_compact.py); 2.5 times faster than testing a word at a time where matches
    are rare, as in the enumeration's sweeps for fresh positions (a one-off test: docs/experiments.md)."""
    n = 0
    i = start
    size = data.shape[0]
    cap = out.shape[0]
    while i < size and i % 8 != 0 and n < cap:  # up to a word boundary, a byte at a time
        if data[i] == value:
            out[n] = i
            n += 1
        i += 1
    n_words = size // 8
    words = data[: 8 * n_words].view(np.int64)
    pattern = np.int64(value) * _BYTES_ONE
    w = i // 8
    while w < n_words and n < cap:
        if w % _FIND_BLOCK == 0 and w + _FIND_BLOCK <= n_words:
            seen = np.int64(0)
            for k in range(_FIND_BLOCK):  # a byte equal to value is a zero byte of x
                x = words[w + k] ^ pattern
                seen |= (x - _BYTES_ONE) & ~x  # its top bit set (and maybe those above: a borrow)
            if seen & _BYTES_HIGH == 0:
                w += _FIND_BLOCK
                continue
        x = words[w] ^ pattern
        zero = ~(((x & _BYTES_LOW7) + _BYTES_LOW7) | x | _BYTES_LOW7)  # exactly the zero bytes' top bits
        while zero != 0:
            at = 8 * w + (trailing_zeros(zero) >> 3)
            if n == cap:
                return n, at
            out[n] = at
            n += 1
            zero &= zero - 1
        w += 1
    i = max(i, 8 * w)
    while i < size and n < cap:  # the bytes after the last whole word
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
