"""Bit helpers for kernels over int64 bit sets (boards, masks): counting and finding set bits.

Jitted, so other kernels call them; from Python they work on ints and numpy integers too.
"""

from __future__ import annotations

import numpy as np

from dobutsu_tb.encoding.jit import njit


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
