"""A set of states known by fingerprints, which several threads fill at once: the depth-first
driver's table of dead nodes (:func:`~dobutsu_tb.encoding.search.depth_first`), for states too
wide to be keys of the shared hash table (Room Sweeper's cleaners and boards).
"""

from __future__ import annotations

import numpy as np

from dobutsu_tb.encoding.atomics import atomic_cas, atomic_sub
from dobutsu_tb.encoding.config import LOAD_FACTOR
from dobutsu_tb.encoding.hashtable import _mix, _probe
from dobutsu_tb.encoding.jit import njit

#: murmur3's fmix64 multipliers (as int64): the second, independent hash of a fingerprint.
_FMIX1 = 0xFF51AFD7ED558CCD - (1 << 64)
_FMIX2 = 0xC4CEB9FE1A85EC53 - (1 << 64)
#: Seeds of the two hashes of a fingerprint.
FINGERPRINT_SEED1 = 0x243F6A8885A308D3
FINGERPRINT_SEED2 = 0x13198A2E03707344
#: Keys keep 62 bits of the first hash (positive and odd, so never 0).
_KEY_BITS = 0x3FFFFFFFFFFFFFFF


@njit
def _fmix(x):
    x ^= (x >> 33) & 0x7FFFFFFF
    x *= _FMIX1
    x ^= (x >> 33) & 0x7FFFFFFF
    x *= _FMIX2
    x ^= (x >> 33) & 0x7FFFFFFF
    return x


@njit
def fingerprint_add(h1, h2, word):
    """Fold one int64 word of a state into its two hashes (start from :data:`FINGERPRINT_SEED1`
    and :data:`FINGERPRINT_SEED2`): ``h1`` by splitmix64's finaliser, ``h2`` by murmur3's fmix64,
    two unrelated bijective mixes chained over the words. Returns the new (h1, h2)."""
    return _mix(h1 ^ word) + word, _fmix(h2 + word * 0x5851F42D4C957F2D)


@njit
def fingerprint_find(keys, checks, h1, h2):
    """True when the state with hashes (h1, h2) is in a :class:`FingerprintSet`'s arrays."""
    key = (h1 & _KEY_BITS) | 1
    s, lo, hi = _probe(key, keys.shape[0], 1)
    for _ in range(keys.shape[0]):
        k = keys[s]
        if k == 0:
            return False
        if k == key and checks[s] == h2:
            return True
        s += 1
        if s == hi:
            s = lo
    return False


@njit
def fingerprint_insert(keys, checks, count, limit, h1, h2):
    """Add the state with hashes (h1, h2) to a :class:`FingerprintSet`'s arrays, unless the set
    holds ``limit`` fingerprints already; safe while other threads insert and look up (a slot is
    claimed by compare-and-swap, its check word written after). Returns True if it was added."""
    if count[0] >= limit:
        return False
    key = (h1 & _KEY_BITS) | 1
    s, lo, hi = _probe(key, keys.shape[0], 1)
    for _ in range(keys.shape[0]):
        k = keys[s]
        if k == 0:
            k = atomic_cas(keys, s, 0, key)
            if k == 0:
                checks[s] = h2
                atomic_sub(count, 0, -1)
                return True
        if k == key and checks[s] == h2:
            return False
        s += 1
        if s == hi:
            s = lo
    return False


class FingerprintSet:
    """States known by a fingerprint of two independent 64-bit hashes, in an open-addressing
    table that several threads fill at once (the puzzles' tables of dead states).

    A state is stored as its first hash (62 bits kept, the key, in the slots of a one-shard
    :class:`HashTable` layout) and its second hash (64 bits, the check word, in a parallel array).
    Two different states are confused only if both hashes agree: with hashes that behave like
    random functions, at most ``lookups * stored / 2**126`` false matches are expected (below
    1e-19 for 1e9 lookups in a set of 1e8). A key whose check word is not yet written reads as
    absent, so a lookup racing an insert errs on the safe side.

    Parameters
    ----------
    capacity : int
        Fingerprints kept at most; the table has ``capacity / load_factor`` slots of 16 bytes.
        Once full, inserts are refused (the search goes on without remembering more).
    load_factor : float, optional

    Raises
    ------
    ValueError
        If ``capacity`` is less than 1 or the load factor is not in (0, 1).

    Attributes
    ----------
    keys, checks : numpy.ndarray of int64, shape (slots,)
        The arrays the kernels take (``fingerprint_find(keys, checks, h1, h2)``).
    count : numpy.ndarray of int64, shape (1,)
        Fingerprints stored.
    limit : int
        ``capacity``.
    """

    def __init__(self, capacity: int, load_factor: float = LOAD_FACTOR):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        if not 0.0 < load_factor < 1.0:
            raise ValueError(f"load factor must be in (0, 1), got {load_factor}")
        slots = int(np.ceil(capacity / load_factor)) + 1
        self.keys = np.zeros(slots, np.int64)
        self.checks = np.zeros(slots, np.int64)
        self.count = np.zeros(1, np.int64)
        self.limit = int(capacity)

    def __len__(self) -> int:
        return int(self.count[0])

    @property
    def nbytes(self) -> int:
        """Memory held, in bytes."""
        return self.keys.nbytes + self.checks.nbytes
