"""Batch lookups of canonical keys in a tablebase (``Tablebase.probe_many``).

In memory, a kernel searches ``/index`` (the first key of each chunk: small enough to stay in
cache) and then the one chunk of keys that can hold each key, in parallel. Lazily, the keys are
sorted and each chunk of ``/keys`` that holds some of them is read once.
"""

from __future__ import annotations

import numpy as np


def probe_keys(tb, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The value bytes of ``keys`` in ``tb`` and whether each was found.

    Parameters
    ----------
    tb : Tablebase
    keys : numpy.ndarray of int64, shape (n,)
        Canonical keys, in any order, repeats allowed.

    Returns
    -------
    codes : numpy.ndarray of uint8, shape (n,)
        Value bytes (:mod:`~dobutsu_tb.tablebase.values`); 0 where not found.
    found : numpy.ndarray of bool, shape (n,)

    Raises
    ------
    TablebaseFileError
        If a chunk read is damaged.
    """
    codes = np.zeros(keys.shape[0], tb._file.value_dtype)
    found = np.zeros(keys.shape[0], np.bool_)
    if tb._all is not None:
        stored, values = tb._all
        _find_in_memory(stored, values, tb._file.index, tb._file.key_chunk, keys, codes, found)
        return codes, found
    if keys.shape[0] == 0:
        return codes, found
    tb._file.check_index()  # (what a key not found relies on)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    f = tb._file
    chunk_ids = np.searchsorted(f.index, sorted_keys, side="right") - 1
    bounds = np.flatnonzero(np.diff(chunk_ids)) + 1
    for lo, hi in zip(np.concatenate([[0], bounds]), np.concatenate([bounds, [sorted_keys.shape[0]]])):
        c = int(chunk_ids[lo])
        if c < 0 or lo == hi:
            continue
        keys = f.keys_of_planes(c, tb._planes(c))  # (the probes' cache)
        f.check_order(c, keys)  # (the cache holds chunks whose order only probes' finds checked)
        chunk_keys = np.frombuffer(keys, np.int64)
        part = sorted_keys[lo:hi]
        i = np.searchsorted(chunk_keys, part)
        inside = i < chunk_keys.shape[0]
        hit = np.zeros(part.shape[0], np.bool_)
        hit[inside] = chunk_keys[i[inside]] == part[inside]
        where = order[lo:hi]
        found[where] = hit
        for entry, dest in zip((c * f.key_chunk + i[hit]).tolist(), where[hit].tolist()):
            codes[dest] = tb._value_byte(entry)
    return codes, found


def _find_in_memory(stored, values, index, chunk, keys, codes, found):
    from dobutsu_tb.tablebase.lookup_kernels import find_sorted

    find_sorted(stored, values, index, chunk, keys, codes, found)


def key_directory(keys: np.ndarray, bits: int) -> tuple[np.ndarray, int]:
    """Where each run of sorted keys sharing their top ``bits`` bits starts (``verify`` and ``export``
    narrow each binary search to one run).

    Parameters
    ----------
    keys : numpy.ndarray of int64, shape (n,)
        Non-negative, ascending.
    bits : int
        Bits of the directory (it has ``2**bits + 1`` entries).

    Returns
    -------
    directory : numpy.ndarray of int64, shape (2**bits + 1,)
        Keys with top bits ``b`` (``key >> shift == b``) are ``keys[directory[b]:directory[b + 1]]``.
    shift : int
    """
    top = int(keys[-1]).bit_length() if keys.shape[0] else 1
    shift = max(0, top - bits)
    bounds = np.arange(1 << bits, dtype=np.int64) << shift  # each below 2**top, so no overflow
    directory = np.empty((1 << bits) + 1, np.int64)
    directory[:-1] = np.searchsorted(keys, bounds)
    directory[-1] = keys.shape[0]  # (the bound 2**top itself would not fit an int64 when top is 63)
    return directory, shift
