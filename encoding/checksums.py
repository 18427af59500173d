"""HDF5's Fletcher-32 checksum, as its fletcher32 filter computes it, for many chunks at once.

HDF5 (``H5_checksum_fletcher32``) sums 16-bit big-endian words in 32-bit unsigned arithmetic,
folding the high half into the low one every 360 words; an odd last byte counts as the high
byte of a word. The filter appends the checksum to a chunk, little-endian. Readers also accept
the checksum's bytes reversed (files from old HDF5 versions).
"""

from __future__ import annotations

import numpy as np

from dobutsu_tb.encoding.jit import njit, prange

#: Words summed between two folds.
BLOCK_WORDS = 360
_U32 = 0xFFFFFFFF


@njit
def fletcher32(buf, lo, hi):
    """The checksum of ``buf[lo:hi]`` (a uint8 array)."""
    words = (hi - lo) // 2
    s1 = np.int64(0)
    s2 = np.int64(0)
    i = lo
    while words:
        tlen = min(BLOCK_WORDS, words)
        words -= tlen
        for _ in range(tlen):
            s1 += (np.int64(buf[i]) << 8) | buf[i + 1]
            s2 += s1
            i += 2
        s2 &= _U32  # 32-bit wrap-around, as in C
        s1 = (s1 & 0xFFFF) + (s1 >> 16)
        s2 = (s2 & 0xFFFF) + (s2 >> 16)
    if (hi - lo) % 2:
        s1 += np.int64(buf[hi - 1]) << 8
        s2 += s1
        s1 = (s1 & 0xFFFF) + (s1 >> 16)
        s2 = (s2 & 0xFFFF) + (s2 >> 16)
    s1 = (s1 & 0xFFFF) + (s1 >> 16)
    s2 = (s2 & 0xFFFF) + (s2 >> 16)
    return (s2 << 16) | s1


@njit(parallel=True)
def fletcher32_many(buf, offsets, out):
    """``out[k]`` = the checksum of ``buf[offsets[k]:offsets[k + 1]]`` (offsets: int64, n + 1)."""
    for k in prange(out.shape[0]):
        out[k] = fletcher32(buf, offsets[k], offsets[k + 1])


def checksums(chunks) -> np.ndarray:
    """The checksums (int64, shape (n,)) of a list of bytes-like chunks."""
    offsets = np.zeros(len(chunks) + 1, np.int64)
    offsets[1:] = np.cumsum([len(c) for c in chunks])
    buf = np.frombuffer(b"".join(chunks), np.uint8)
    out = np.empty(len(chunks), np.int64)
    if len(chunks):
        fletcher32_many(buf, offsets, out)
    return out
