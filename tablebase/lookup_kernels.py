"""The kernel of in-memory batch lookups (kept apart so that lazy probing never imports numba)."""

from __future__ import annotations

import numpy as np

from dobutsu_tb.encoding.atomics import prefetch
from dobutsu_tb.encoding.jit import njit, prange


@njit
def _first_above(a, lo, hi, key):
    """The first index in [lo, hi) with ``a[index] > key`` (``a`` ascending), or ``hi``."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] <= key:
            lo = mid + 1
        else:
            hi = mid
    return lo


#: Entries of ``/index`` under one entry of the top level (small enough to stay in cache), and
#: keys searched in lockstep.
_FANOUT = 64
_GROUP = 32


@njit
def _find_group(stored, values, index, top, chunk, keys, g0, g1, codes, found, lo, hi):
    """:func:`find_sorted` for ``keys[g0:g1]``: the searches inside chunks run in lockstep, each
    step prefetching every key's next probe, so their cache misses overlap."""
    n = stored.shape[0]
    for k in range(g1 - g0):
        key = keys[g0 + k]
        t = _first_above(top, 0, top.shape[0], key) - 1
        c = -1 if t < 0 else _first_above(index, t * _FANOUT, min(index.shape[0], (t + 1) * _FANOUT), key) - 1
        lo[k] = c * chunk if c >= 0 else 0
        hi[k] = min(n, lo[k] + chunk) if c >= 0 else 0
    busy = True
    while busy:
        busy = False
        for k in range(g1 - g0):
            if lo[k] < hi[k]:
                prefetch(stored, (lo[k] + hi[k]) >> 1)
                busy = True
        for k in range(g1 - g0):
            if lo[k] < hi[k]:
                mid = (lo[k] + hi[k]) >> 1
                if stored[mid] <= keys[g0 + k]:
                    lo[k] = mid + 1
                else:
                    hi[k] = mid
    for k in range(g1 - g0):
        j = lo[k] - 1
        if j >= 0 and stored[j] == keys[g0 + k]:
            found[g0 + k] = True
            codes[g0 + k] = values[j]


@njit(parallel=True)
def find_sorted(stored, values, index, chunk, keys, codes, found):
    """For each ``keys[i]``: ``found[i]`` whether it is in ``stored`` (ascending int64, whose
    ``index`` holds every ``chunk``-th key) and ``codes[i]`` its entry of ``values``.

    The index is searched through a top level (every 64th entry, a few KiB, in cache); the
    searches inside chunks run in groups (:func:`_find_group`)."""
    top = index[::_FANOUT].copy()
    n_groups = (keys.shape[0] + _GROUP - 1) // _GROUP
    for g in prange(n_groups):
        lo = np.empty(_GROUP, np.int64)
        hi = np.empty(_GROUP, np.int64)
        _find_group(stored, values, index, top, chunk, keys, g * _GROUP, min(keys.shape[0], (g + 1) * _GROUP),
                    codes, found, lo, hi)
