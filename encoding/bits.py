"""Bit helpers for kernels over int64 bit sets (boards, masks): counting and finding set bits.

Jitted, so other kernels call them; from Python they work on ints and numpy integers too.
"""

from __future__ import annotations

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
