"""Batch expansion shared by the breadth-first drivers: successors in parallel, then insertion
into a sharded hash table with one thread per shard (no atomics).

``kids`` is a (batch, max_moves) int64 buffer: row i holds the successors of the batch's state i
(``n_kids[i]`` of them), folded to their symmetry class's representative, and ``shards`` (int8,
same shape) the hash table shard of each.
"""

from __future__ import annotations

import numpy as np

from dobutsu_tb.encoding.hashtable import HashTable, shard_of
from dobutsu_tb.encoding.jit import njit, njit_driver, prange


@njit
def identity(state, params):
    """The ``canonical`` of a puzzle whose symmetries are not folded: the state itself."""
    return state


@njit_driver(parallel=True)
def _expand_batch(states, expand, canonical, params, n_shards, kids, n_kids, shards):
    bad = 0  # a sum reduction: numba makes plain assignments inside prange thread-private
    for i in prange(states.shape[0]):
        n = expand(states[i], kids[i], params)
        if n < 0 or n > kids.shape[1]:
            bad += 1
            n = 0
        for k in range(n):
            c = canonical(kids[i, k], params)
            kids[i, k] = c
            shards[i, k] = shard_of(c, n_shards)
        n_kids[i] = n
    return bad == 0


class Batches:
    """Buffers for expanding states a batch at a time.

    Parameters
    ----------
    expand, canonical : numba-jitted functions
        As in :mod:`dobutsu_tb.encoding.search` (``canonical`` may be :func:`identity`).
    params : numpy.ndarray of int64
        Passed to them.
    max_moves : int
        Most successors of one state (the width of a row).
    batch : int
        Most states expanded at once.

    Attributes
    ----------
    kids : numpy.ndarray of int64, shape (batch, max_moves)
    n_kids : numpy.ndarray of int64, shape (batch,)
    shards : numpy.ndarray of int8, shape (batch, max_moves)
    """

    def __init__(self, expand, canonical, params, max_moves: int, batch: int):
        self._kernel = _expand_batch
        self._expand, self._canonical, self._params = expand, canonical, params
        self.max_moves = int(max_moves)
        self.kids = np.empty((batch, max_moves), np.int64)
        self.n_kids = np.empty(batch, np.int64)
        self.shards = np.empty((batch, max_moves), np.int8)

    def expand(self, states: np.ndarray, n_shards: int) -> int:
        """Fill the buffers' first ``len(states)`` rows with the successors of ``states``
        (folded) and their shards among ``n_shards``.

        Returns
        -------
        int
            The number of successors (with repeats).

        Raises
        ------
        ValueError
            If a state has more than ``max_moves`` successors.
        """
        n = states.shape[0]
        if not self._kernel(states, self._expand, self._canonical, self._params, n_shards, self.kids[:n],
                            self.n_kids[:n], self.shards[:n]):
            raise ValueError(f"a state has more than max_moves = {self.max_moves} successors")
        return int(self.n_kids[:n].sum())


def make_room(table: HashTable, need: int):
    """Grow ``table`` unless every shard has room for ``need`` more keys (so that a batch's
    successors fit even if they all fall in one shard).

    Returns
    -------
    numpy.ndarray of int64 or None
        :meth:`HashTable.grow`'s map from old to new slots, or None when the table did not grow.
    """
    if table.room() >= need:
        return None
    return table.grow(table.n_shards * (int(table.counts.max()) + need) + 2 * len(table))
