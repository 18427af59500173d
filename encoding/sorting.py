"""Sorting 64-bit integers in place by radix, run by run on every thread.

The builder sorts three kinds of arrays: the positions of each window of the enumeration by key
(2 M at a time, a run a thread), those of each window of the analysis (4 M), and every position's
sort record before the write (a key range at a time: 50 M a thread in the standard game).
numpy's sort of int64 took 54-81 ns an item on the AMD EPYC host of 2026-12-07 (its SIMD sort
took 10 ns on an Intel Xeon host: docs/experiments.md), about 9 s of the standard build there.

A run of at most :data:`_LSD_ITEMS` items (256 K) is sorted least significant digit first, through a
scratch buffer of its size: one pass counts every 8-bit digit, then one stable scatter pass per
digit in which the items differ, low to high (a window's keys: 6 to 8 passes). A longer run is
first split in place on its highest differing digit (McIlroy, Bostic and McIlroy, "Engineering
radix sort", Computing Systems 6(1), 1993: the American flag sort), again and again, until each
bucket fits the buffer; runs and buckets of at most :data:`_SMALL` items by insertion. So a
thread takes at most 2 MiB beside its run. The result is numpy's: the same values in
ascending order. :func:`sort_runs` uses whichever of the two sorts is faster on the host
(:func:`sort_method`).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from dobutsu_tb.encoding import config
from dobutsu_tb.encoding.jit import njit, prange

#: The sort this process uses (:func:`sort_method`): None until its first call times both.
METHOD: str | None = None
#: Random keys that :func:`sort_method` sorts both ways.
_CALIBRATION = 1 << 17
#: Runs of at most this many items are finished by an insertion sort.
_SMALL = 32
#: Most segments waiting on a thread's stack: 256 a level, at most 8 levels below the first.
_STACK = 9 * 256 + 1
#: Runs and buckets of at most this many items are sorted least significant digit first, through
#: a buffer of their size (2 MiB a thread), in digits of _LSD_BITS bits. A bigger buffer gained
#: little (2 M keys a thread: 20.9 ns a key through 16 MiB, 22.0 through 2 MiB, 21.6 through
#: 512 KiB) and its memory took a build within `--max-memory 1.0G` 31 MiB over its budget.
_LSD_ITEMS = 1 << 18
#: The most scratch space a sort takes a thread, in bytes (its buffer: 2 MiB).
SCRATCH_BYTES = 8 * _LSD_ITEMS
_LSD_BITS = 8
_LSD_BUCKETS = 1 << _LSD_BITS
_LSD_MAX = -(-64 // _LSD_BITS)


@njit(inline="always")
def _less(x, y, flip):
    return (x ^ flip) < (y ^ flip)


@njit
def lower_bound(a, x):
    """``np.searchsorted(a, x)`` for compiled code, whose numba version compiles comparisons for
    every numeric type, complex ones included (0.4 s a signature): a binary search.

    Parameters
    ----------
    a : numpy.ndarray of int64 or uint64, shape (n,)
        Ascending (repeats allowed).
    x : int64 or uint64
        The item looked for, of ``a``'s type.

    Returns
    -------
    int
        The first index i with ``a[i] >= x``; n if there is none.
    """
    return lower_bound_in(a, x, 0, a.shape[0])


@njit(inline="always")
def lower_bound_in(a, x, lo, hi):
    """:func:`lower_bound` within ``a[lo:hi]`` (ascending there): the first index i of
    ``lo .. hi - 1`` with ``a[i] >= x``, ``hi`` if there is none; ``lo``, ``hi`` int64."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit
def _insertion_sort(a, lo, hi, flip):
    for i in range(lo + 1, hi):
        v = a[i]
        j = i - 1
        while j >= lo and _less(v, a[j], flip):
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = v


@njit
def _differing_bits(a, lo, hi):
    """The bits in which the items of ``a[lo:hi]`` (a non-empty run) differ, as a mask (the same
    compared as ``x ^ flip``: a flip cancels in the ``^``)."""
    first = a[lo]
    diff = np.uint64(0)
    for i in range(lo + 1, hi):
        diff |= a[i] ^ first
    return diff


@njit
def _top_shift(a, lo, hi):
    """The shift of the first 8-bit digit: the one whose highest bit is the highest bit in which
    the items of ``a[lo:hi]`` differ; -1 when they are all equal."""
    diff = _differing_bits(a, lo, hi)
    if diff == 0:
        return -1
    top = 63
    while (diff >> np.uint64(top)) == 0:
        top -= 1
    return max(0, top - 7)


@njit
def _lsd_sort(a, lo, hi, flip, buf):
    """Sort ``a[lo:hi]`` (at most ``buf``'s length) by its least significant digits first, through
    ``buf``: a counting pass for every digit in which the items differ, then a stable scatter
    pass for each of those digits, low to high."""
    n = hi - lo
    assert n <= buf.shape[0]
    diff = _differing_bits(a, lo, hi)
    digits = 0
    while digits < _LSD_MAX and (diff >> np.uint64(digits * _LSD_BITS)) != 0:
        digits += 1
    mask = np.uint64(_LSD_BUCKETS - 1)
    count = np.zeros((digits, _LSD_BUCKETS), np.int64)
    for i in range(lo, hi):
        v = a[i] ^ flip
        for d in range(digits):
            count[d, np.int64((v >> np.uint64(d * _LSD_BITS)) & mask)] += 1
    src, dst = a[lo:hi], buf[:n]
    for d in range(digits):
        if (diff >> np.uint64(d * _LSD_BITS)) & mask == 0:
            continue  # every item has the same digit here
        at = 0
        for b in range(_LSD_BUCKETS):
            c = count[d, b]
            count[d, b] = at
            at += c
        sh = np.uint64(d * _LSD_BITS)
        for i in range(n):
            v = src[i]
            b = np.int64(((v ^ flip) >> sh) & mask)
            dst[count[d, b]] = v
            count[d, b] += 1
        src, dst = dst, src
    if src.ctypes.data != a[lo:hi].ctypes.data:
        for i in range(n):  # (a loop: an array assigned to a slice compiles numba's shape-error message, 1.7 s)
            a[lo + i] = src[i]


@njit
def _flag_sort(a, lo, hi, flip, buf):
    """Sort ``a[lo:hi]`` (uint64; compared as ``x ^ flip``) in place: the American flag sort, its
    buckets of at most ``buf``'s length (and a run that short) least significant digit first."""
    seg_lo = np.empty(_STACK, np.int64)
    seg_hi = np.empty(_STACK, np.int64)
    seg_shift = np.empty(_STACK, np.int64)
    count = np.empty(256, np.int64)
    heads = np.empty(256, np.int64)
    tails = np.empty(256, np.int64)
    seg_lo[0], seg_hi[0], seg_shift[0] = lo, hi, -1  # (the run's first digit: found when needed)
    top = 1
    mask = np.uint64(255)
    while top > 0:
        top -= 1
        s_lo, s_hi, shift = seg_lo[top], seg_hi[top], seg_shift[top]
        if s_hi - s_lo <= _SMALL:
            _insertion_sort(a, s_lo, s_hi, flip)
            continue
        if s_hi - s_lo <= buf.shape[0]:
            _lsd_sort(a, s_lo, s_hi, flip, buf)
            continue
        if shift < 0:
            shift = _top_shift(a, s_lo, s_hi)
            if shift < 0:
                continue  # every item alike
        sh = np.uint64(shift)
        count[:] = 0
        for i in range(s_lo, s_hi):
            count[np.int64(((a[i] ^ flip) >> sh) & mask)] += 1
        at = s_lo
        for b in range(256):
            heads[b] = at
            at += count[b]
            tails[b] = at
        if count[np.int64(((a[s_lo] ^ flip) >> sh) & mask)] != s_hi - s_lo:  # (else already in its one bucket)
            for b in range(256):
                while heads[b] < tails[b]:
                    v = a[heads[b]]
                    d = np.int64(((v ^ flip) >> sh) & mask)
                    while d != b:
                        k = heads[d]
                        w = a[k]
                        a[k] = v
                        heads[d] = k + 1
                        v = w
                        d = np.int64(((v ^ flip) >> sh) & mask)
                    a[heads[b]] = v
                    heads[b] += 1
        if sh == 0:
            continue  # every bit compared: the buckets hold equal items
        below = max(np.int64(sh) - 8, 0)
        at = s_lo
        for b in range(256):
            if count[b] > 1:
                seg_lo[top], seg_hi[top], seg_shift[top] = at, at + count[b], below
                top += 1
            at += count[b]


@njit(parallel=True)
def _sort_runs(a, starts, flip, scratch):
    """Sort the runs of ``a`` (:func:`sort_runs`): row t of ``scratch`` serves the runs t, t + T,
    t + 2T ... (T its rows), one after another."""
    rows = scratch.shape[0]
    for t in prange(rows):
        for r in range(t, starts.shape[0] - 1, rows):
            _flag_sort(a, starts[r], starts[r + 1], flip, scratch[t])


def _time_sorts(n: int = _CALIBRATION) -> tuple[float, float]:
    """Seconds (the best of three) of numpy's sort and of this module's on ``n`` random keys."""
    keys = np.random.default_rng(0).integers(0, 1 << 62, n, dtype=np.int64)
    starts = np.array([0, n], np.int64)
    scratch = np.empty((1, n), np.uint64)
    best = [float("inf"), float("inf")]
    for _ in range(3):
        for k in range(2):
            a = keys.copy()
            t = time.perf_counter()
            if k == 0:
                a.sort()
            else:
                _sort_runs(a.view(np.uint64), starts, np.uint64(1 << 63), scratch)
            best[k] = min(best[k], time.perf_counter() - t)
    return best[0], best[1]


def sort_method() -> str:
    """The sort this process uses: the faster of the two on :data:`_CALIBRATION` random keys,
    timed at its first call (numpy's without numba's JIT, ``NUMBA_DISABLE_JIT=1``). numpy's sort
    of int64 is a SIMD sort on some hosts (10 ns an item on the Intel Xeon host of 2026-11-26) and
    a slow one on others (54-81 ns on the AMD EPYC host of 2026-12-07, where the radix sort takes
    20-30 ns): the results are the same, only the time differs.

    Returns
    -------
    str
        ``'radix'`` or ``'numpy'``.
    """
    global METHOD
    if METHOD is None:
        import numba

        if numba.config.DISABLE_JIT:
            METHOD = "numpy"
        else:
            numpy_s, radix_s = _time_sorts()
            METHOD = "radix" if radix_s < numpy_s else "numpy"
    return METHOD


def sort_runs(a: np.ndarray, starts: np.ndarray) -> None:
    """Sort each run ``a[starts[r]:starts[r + 1]]`` of ``a`` in place, the runs on every thread,
    by this module's radix sort or by numpy's, whichever is faster on this host
    (:func:`sort_method`).

    Parameters
    ----------
    a : numpy.ndarray of int64 or uint64, shape (n,), C-contiguous
        The items; the result is ``np.sort``'s, run by run.
    starts : array_like of int64, shape (runs + 1,)
        Non-decreasing, from 0 to ``n``.

    Raises
    ------
    ValueError
        If ``a`` is not a contiguous one-dimensional array of 64-bit integers, or ``starts`` does
        not cut it into runs.
    """
    if not isinstance(a, np.ndarray) or a.ndim != 1 or a.dtype not in (np.int64, np.uint64) \
            or not a.flags.c_contiguous or not a.flags.writeable:
        raise ValueError("sort_runs sorts a writable contiguous one-dimensional array of int64 or uint64")
    given = np.asarray(starts)
    if given.size and not np.issubdtype(given.dtype, np.integer):
        raise ValueError(f"the runs' starts must be integers, not {given.dtype}")
    starts = np.ascontiguousarray(given, np.int64)
    if starts.ndim != 1 or starts.shape[0] < 1 or starts[0] != 0 or starts[-1] != a.shape[0] \
            or np.any(np.diff(starts) < 0):
        raise ValueError(f"the runs' starts must ascend from 0 to {a.shape[0]}")
    runs = starts.shape[0] - 1
    if runs == 0 or a.shape[0] == 0:
        return
    if sort_method() == "numpy":  # (numpy sorts without the GIL: a run a thread)
        parts = [a[starts[r]:starts[r + 1]] for r in range(runs)]
        with ThreadPoolExecutor(max(1, min(runs, config.THREADS))) as pool:
            list(pool.map(np.ndarray.sort, parts))
        return
    rows = max(1, min(runs, config.THREADS))  # (a row a thread: SCRATCH_BYTES each at most)
    scratch = np.empty((rows, max(1, min(int(np.diff(starts).max()), _LSD_ITEMS))), np.uint64)
    flip = np.uint64(1 << 63) if a.dtype == np.int64 else np.uint64(0)  # (int64: the sign bit ordered first)
    _sort_runs(a.view(np.uint64), starts, flip, scratch)


def even_starts(n: int, parts: int) -> np.ndarray:
    """The starts of ``parts`` runs of ``n`` items, equal but the last: ``ceil(n / parts)`` items
    each, as the kernels that take a share of a list each cut it.

    Returns
    -------
    numpy.ndarray of int64, shape (parts + 1,)
    """
    per = -(-n // max(1, parts))
    return np.minimum(np.arange(max(1, parts) + 1, dtype=np.int64) * per, n)
