"""Unmoves: the predecessors of a packed state, for the retrograde analysis (docs/rules.md).

A predecessor is a normalised state from which one move leads to the given state. Like the
kernels of :mod:`~dobutsu_tb.tablebase.game.key`, these are plain functions bound to a variant's
tables (:mod:`~dobutsu_tb.tablebase.game.layout`).
"""

from __future__ import annotations

from dobutsu_tb.tablebase.game.key import board_key, flip_state
from dobutsu_tb.tablebase.game.layout import (
    ARMY,
    BASE,
    CELL_BITS,
    CELL_MASK,
    COUNT_BITS,
    COUNT_MASK,
    DEMOTED,
    DROP_CELLS,
    DROPPED_SLOT,
    HOME_ZONE,
    MAX_HAND,
    N_CELLS,
    N_RESTORE,
    OPPONENT,
    PIECE_MASK,
    PROMO_ZONE,
    PROMOTES,
    RESTORE_CODE,
    RESTORE_SLOT,
    ROYAL,
    SOURCES,
    TARGETS,
)
from dobutsu_tb.tablebase.game.rules import find_piece

__kernels__ = ("gen_unmoves", "parent_keys", "material", "walk_unmoves")


def gen_unmoves(board, hand, boards, hands, nonterminal_only):
    """Write the predecessor states of a state into ``boards`` and ``hands``; return how many (or
    -1 if the arrays are too short).

    The state is flipped back into the mover's frame and one of the mover's moves is undone: a
    drop (the piece goes back to the hand), or a board move, with or without putting back a
    piece it captured (taken from the mover's hand, or, for a capture whose piece left the game,
    while the position holds fewer pieces of its kind than the variant's army). Duplicates and
    positions that cannot occur are not filtered: the caller looks the results up.

    With ``nonterminal_only``, predecessors that are terminal are left out without being
    generated: the enemy royal is the same before the move, so if it stands on the mover's home
    rank every predecessor is terminal; a predecessor is catch-terminal when a mover's piece
    attacks the enemy royal, which only the piece moved back can change (no piece slides). So
    two attackers mean no non-terminal predecessor, one means only its unmoves qualify, and an
    unmove whose piece would attack the royal from its source is skipped.
    """
    return walk_unmoves(board, hand, boards, hands, nonterminal_only, False)


def parent_keys(board, hand, keys):
    """The canonical keys of the non-terminal predecessors of a state into ``keys``, in the order
    of ``gen_unmoves(..., True)``; returns how many (-1 if ``keys`` is too short). The same as
    canonicalising that function's states, faster (the retrograde analysis's inner loop)."""
    return walk_unmoves(board, hand, keys, keys, True, True)


def material(board, base):
    """Pieces on the board (either side, promoted ones included) of unpromoted kind code ``base``:
    all there are of a kind that is never in hand."""
    n = 0
    for i in range(N_CELLS):
        p = (board >> (CELL_BITS * i)) & PIECE_MASK
        if p != 0 and BASE[p] == base:
            n += 1
    return n


def walk_unmoves(child_board, child_hand, out, out_hands, nonterminal_only, as_keys):
    """:func:`gen_unmoves` (states into ``out`` and ``out_hands``) and :func:`parent_keys`
    (canonical keys into ``out``, when ``as_keys``)."""
    board, hand = flip_state(child_board, child_hand)
    n = 0
    cap = out.shape[0]
    attackers = 0
    attacker = -1
    enemy = -1
    if nonterminal_only:
        enemy = find_piece(board, ROYAL | OPPONENT)
        if enemy < 0 or (HOME_ZONE >> enemy) & 1:
            return 0
    empty = 0
    for i in range(N_CELLS):
        q = (board >> (CELL_BITS * i)) & CELL_MASK
        if q == 0:
            empty |= 1 << i
        elif nonterminal_only and q < OPPONENT and (TARGETS[q, i] >> enemy) & 1:
            attackers += 1
            attacker = i
    if attackers >= 2:
        return 0
    for t in range(N_CELLS):
        p = (board >> (CELL_BITS * t)) & CELL_MASK
        if p == 0 or p >= OPPONENT or (attackers == 1 and t != attacker):
            continue  # (with one attacker, another piece moved back would leave it in place)
        lifted = board & ~(CELL_MASK << (CELL_BITS * t))
        slot = DROPPED_SLOT[p]
        if slot >= 0 and (DROP_CELLS[slot] >> t) & 1 and (hand >> (COUNT_BITS * slot)) & COUNT_MASK < MAX_HAND[slot]:
            if n >= cap:  # undo a drop: back to the mover's hand
                return -1
            h = hand + (1 << (COUNT_BITS * slot))
            if as_keys:
                out[n] = board_key(lifted, h)
            else:
                out[n] = lifted
                out_hands[n] = h
            n += 1
        for kind in range(2):  # undo a board move to an empty source (kind 1: one that promoted)
            if kind == 0:
                before = p
                if PROMOTES[p] != 0 and (PROMO_ZONE[p] >> t) & 1:
                    continue  # a move into the zone would have promoted it
            else:
                before = DEMOTED[p]
                if before == 0 or not (PROMO_ZONE[before] >> t) & 1:
                    continue
            srcs = SOURCES[before, t] & empty  # the empty squares it can have come from
            if nonterminal_only:  # less those from which it attacks the enemy royal (catch-terminal)
                srcs &= ~SOURCES[before, enemy]
            f = -1
            while srcs:  # the set bits of srcs, ascending
                f += 1
                bit = srcs & 1
                srcs >>= 1
                if not bit:
                    continue
                moved = lifted | (before << (CELL_BITS * f))
                if n >= cap:
                    return -1
                if as_keys:
                    out[n] = board_key(moved, hand)
                else:
                    out[n] = moved
                    out_hands[n] = hand
                n += 1
                for k in range(N_RESTORE):  # ... or undo a capture: an enemy piece stands on t again
                    restored = RESTORE_CODE[k]
                    s = RESTORE_SLOT[k]
                    if s >= 0:
                        if (hand >> (COUNT_BITS * s)) & COUNT_MASK == 0:
                            continue
                        h = hand - (1 << (COUNT_BITS * s))
                    else:
                        if material(moved, BASE[restored]) >= ARMY[BASE[restored]]:
                            continue
                        h = hand
                    if n >= cap:
                        return -1
                    back = moved | ((restored | OPPONENT) << (CELL_BITS * t))
                    if as_keys:
                        out[n] = board_key(back, h)
                    else:
                        out[n] = back
                        out_hands[n] = h
                    n += 1
    return n
