"""Unmoves: the predecessors of a packed state (SPEC §1.4), for the retrograde analysis.

A predecessor is a normalised state from which one move leads to the given state. The kernel is
a plain function that numba compiles (:mod:`dobutsu_tb.tablebase.game.kernels`).
"""

from __future__ import annotations

import numpy as np

from dobutsu_tb.tablebase.game.key import (
    BOARD_MASK,
    CELL_BITS,
    CELL_MASK,
    CHICK,
    COUNT_BITS,
    COUNT_MASK,
    ELEPHANT,
    GIRAFFE,
    HAND_CODE,
    HAND_LEN,
    HAND_MASK,
    HAND_SHIFT,
    HEN,
    LION,
    MAX_IN_HAND,
    N_CELLS,
    OPPONENT,
    RANK_BITS,
    RANK_MASK,
    RANK_PACKED,
    flip_state,
    join_codes,
)
from dobutsu_tb.tablebase.game.rules import (
    FAR_RANK_END,
    HAND_SLOT,
    HOME_RANK_START,
    SLOT_PIECE,
    SOURCES,
    TARGETS,
    check_state,
    find_piece,
)

#: Upper bound on the unmoves of one state (checked in the tests).
MAX_UNMOVES = 320

__kernels__ = ("gen_unmoves", "parent_keys", "_board_key", "_walk_unmoves")


def gen_unmoves(child, out, nonterminal_only):
    """Write the predecessor states of ``child`` into ``out``; return how many (or -1 if ``out``
    is too small).

    A predecessor is a normalised state from which some move leads to ``child``: the child is
    flipped back into the mover's frame and one move of the mover is undone, with or without
    giving back a captured piece from the mover's hand, or a drop is undone. Duplicates and
    positions that cannot occur are not filtered: the caller looks the results up.

    With ``nonterminal_only``, predecessors that are terminal (SPEC §1.4) are left out without
    being generated: the enemy lion is the same before the move, so if it stands on the mover's
    home rank every predecessor is terminal; a predecessor is catch-terminal when a mover's
    piece attacks the enemy lion, which only the piece moved back can change (no piece slides).
    So two attackers in ``child`` mean no non-terminal predecessor, one means only its unmoves
    qualify, and an unmove whose piece would attack the lion from its source is skipped.
    """
    return _walk_unmoves(child, out, nonterminal_only, False)


def parent_keys(child, keys):
    """The canonical keys of the non-terminal predecessors of ``child`` into ``keys``, in the
    order of ``gen_unmoves(child, out, True)``; returns how many (-1 if ``keys`` is too short).
    The same as canonicalising that function's states, faster (the retrograde analysis's inner
    loop): each key is joined from per-rank code tables of the edited board."""
    return _walk_unmoves(child, keys, True, True)


def _board_key(board, hand):
    """The canonical key of a normalised state given as its board and hand fields."""
    return join_codes(RANK_PACKED[board & RANK_MASK], RANK_PACKED[(board >> RANK_BITS) & RANK_MASK],
                      RANK_PACKED[(board >> (2 * RANK_BITS)) & RANK_MASK],
                      RANK_PACKED[(board >> (3 * RANK_BITS)) & RANK_MASK], HAND_CODE[hand], HAND_LEN[hand])


def _walk_unmoves(child, out, nonterminal_only, as_keys):
    """:func:`gen_unmoves` (states) and :func:`parent_keys` (canonical keys, when ``as_keys``)."""
    state = flip_state(child)
    board = state & BOARD_MASK
    hand = (state >> HAND_SHIFT) & HAND_MASK
    n = 0
    cap = out.shape[0]
    attackers = 0
    attacker = -1
    enemy = -1
    if nonterminal_only:
        enemy = find_piece(state, LION | OPPONENT)
        if enemy < 0 or enemy >= HOME_RANK_START:
            return 0
        for i in range(N_CELLS):
            q = (board >> (CELL_BITS * i)) & CELL_MASK
            if q != 0 and q < OPPONENT and (TARGETS[q, i] >> enemy) & 1:
                attackers += 1
                attacker = i
        if attackers >= 2:
            return 0
    for t in range(N_CELLS):
        p = (board >> (CELL_BITS * t)) & CELL_MASK
        if p == 0 or p >= OPPONENT or (attackers == 1 and t != attacker):
            continue  # (with one attacker, another piece moved back would leave it in place)
        lifted = board & ~(np.int64(CELL_MASK) << (CELL_BITS * t))
        if p == CHICK or p == ELEPHANT or p == GIRAFFE:  # undo a drop: back to the mover's hand
            slot = HAND_SLOT[p]
            if (hand >> (COUNT_BITS * slot)) & COUNT_MASK < MAX_IN_HAND:
                if n >= cap:
                    return -1
                h = hand + (1 << (COUNT_BITS * slot))
                out[n] = _board_key(lifted, h) if as_keys else lifted | (h << HAND_SHIFT)
                n += 1
        for kind in range(2):  # undo a board move to an empty source (kind 1: one that promoted)
            if kind == 0:
                if p == CHICK and t < FAR_RANK_END:
                    continue  # a chick moving onto the far rank would have promoted
                srcs = SOURCES[p, t]
                before = p
            else:
                if p != HEN or t >= FAR_RANK_END:
                    continue
                srcs = np.int64(1) << (t + 3)
                before = CHICK
            while srcs:
                f = 0
                while not (srcs >> f) & 1:
                    f += 1
                srcs &= srcs - 1
                if (board >> (CELL_BITS * f)) & CELL_MASK != 0:
                    continue
                if nonterminal_only and (TARGETS[before, f] >> enemy) & 1:
                    continue  # from its source the piece attacks the enemy lion: catch-terminal
                moved = lifted | (before << (CELL_BITS * f))
                if n >= cap:
                    return -1
                out[n] = _board_key(moved, hand) if as_keys else moved | (hand << HAND_SHIFT)
                n += 1
                for slot in range(3):  # ... or undo a capture: an enemy piece stands on t again
                    if (hand >> (COUNT_BITS * slot)) & COUNT_MASK == 0:
                        continue
                    h = hand - (1 << (COUNT_BITS * slot))
                    restored = SLOT_PIECE[slot]
                    for variant in range(2):
                        if variant == 1:
                            if slot != 0:
                                break
                            restored = HEN  # a captured hen comes back as a chick in hand
                        if n >= cap:
                            return -1
                        back = moved | ((restored | OPPONENT) << (CELL_BITS * t))
                        out[n] = _board_key(back, h) if as_keys else back | (h << HAND_SHIFT)
                        n += 1
    return n


def predecessors(state, nonterminal_only: bool = False) -> np.ndarray:
    """Every state from which one move leads to ``state`` (unmoves), duplicates removed.

    Parameters
    ----------
    state : int
        Packed normalised state.
    nonterminal_only : bool, optional
        Leave out terminal predecessors (see :func:`gen_unmoves`).

    Returns
    -------
    numpy.ndarray of int64, shape (n,)
        Sorted packed predecessor states, normalised for the side that moved. Unreachable or
        terminal predecessors are included: the rules do not know the start position.
    """
    from dobutsu_tb.tablebase.game import kernels

    state = check_state(state)
    buf = np.empty(MAX_UNMOVES, np.int64)
    n = kernels.gen_unmoves(state, buf, nonterminal_only)
    if n < 0:
        raise RuntimeError("MAX_UNMOVES is too small")
    return np.unique(buf[:n])
