"""The game's kernels, compiled by numba: the jitted versions of the plain kernels of
:mod:`~dobutsu_tb.tablebase.game.key`, :mod:`~dobutsu_tb.tablebase.game.rules` and
:mod:`~dobutsu_tb.tablebase.game.unmoves` (documented there), and parallel array kernels.

Kernels of other modules call these; Python code that needs one position at a time (probing,
notation) calls the plain versions and never imports numba.
"""

from __future__ import annotations

from dobutsu_tb.encoding.jit import jit_kernels, njit, prange
from dobutsu_tb.tablebase.game import key, rules, unmoves

_JITTED = jit_kernels(key, rules, unmoves)

encode_state = _JITTED["encode_state"]
canonical_key = _JITTED["canonical_key"]
decode_key = _JITTED["decode_key"]
mirror_state = _JITTED["mirror_state"]
flip_state = _JITTED["flip_state"]
find_piece = _JITTED["find_piece"]
attacks = _JITTED["attacks"]
classify = _JITTED["classify"]
game_over = _JITTED["game_over"]
gen_moves = _JITTED["gen_moves"]
make_move = _JITTED["make_move"]
perft_count = _JITTED["perft_count"]
attackers_of = _JITTED["attackers_of"]
child_keys = _JITTED["child_keys"]
gen_unmoves = _JITTED["gen_unmoves"]
parent_keys = _JITTED["parent_keys"]


@njit(parallel=True)
def encode_many(states, out, fold_mirror):
    """``out[i]`` = the key (canonical key if ``fold_mirror``) of ``states[i]``, 0 if invalid."""
    for i in prange(states.shape[0]):
        out[i] = canonical_key(states[i]) if fold_mirror else encode_state(states[i])


@njit(parallel=True)
def decode_many(keys, out):
    """``out[i]`` = the packed state of ``keys[i]``."""
    for i in prange(keys.shape[0]):
        out[i] = decode_key(keys[i])
