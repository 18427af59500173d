"""Unmoves: the predecessors of a packed state, for the retrograde analysis (docs/rules.md).

A predecessor is a normalised state from which one move leads to the given state. Like the
kernels of :mod:`~dobutsu_tb.tablebase.game.key`, these are plain functions bound to a board's
shape that read the variant's rules array ``rules`` (:mod:`~dobutsu_tb.tablebase.game.layout`).
"""

from __future__ import annotations

from dobutsu_tb.encoding.binding import kernel_options
from dobutsu_tb.tablebase.game.key import board_key, cell_at, flip_state, with_cell
from dobutsu_tb.tablebase.game.layout import (
    ARMY,
    BASE,
    CELL_BITS,
    CELL_MASK,
    COUNT_FIELD,
    COUNT_SHIFT,
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
    RESTORE_DELTA,
    RESTORE_ENTRY_BITS,
    RESTORE_SLOT,
    RESTORE_WORD,
    ROYAL,
    SOURCES,
    TARGETS,
)
from dobutsu_tb.tablebase.game.rules import find_piece

__kernels__ = ("gen_unmoves", "parent_keys", "material", "walk_unmoves")

#: An entry's bits (:data:`~dobutsu_tb.tablebase.game.layout.RESTORE_ENTRY_BITS`).
RESTORE_ENTRY_MASK = (1 << RESTORE_ENTRY_BITS) - 1


def gen_unmoves(rules, board, hand, boards, hands, nonterminal_only):
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
    return walk_unmoves(rules, board, hand, boards, hands, nonterminal_only, False)


def parent_keys(rules, board, hand, keys):
    """The canonical keys of the non-terminal predecessors of a state into ``keys``, in the order
    of ``gen_unmoves(..., True)``; returns how many (-1 if ``keys`` is too short). The same as
    canonicalising that function's states, faster (the retrograde analysis's inner loop)."""
    return walk_unmoves(rules, board, hand, keys, keys, True, True)


def material(rules, board, hand, base):
    """Pieces on the board (either side, promoted ones included) of unpromoted kind code ``base``:
    all there are of a kind that is never in hand."""
    n = 0
    for i in range(N_CELLS):
        p = cell_at(board, hand, i) & PIECE_MASK
        if p != 0 and rules[BASE + p] == base:
            n += 1
    return n


@kernel_options(inline="always")
def walk_unmoves(rules, child_board, child_hand, out, out_hands, nonterminal_only, as_keys):
    """:func:`gen_unmoves` (states into ``out`` and ``out_hands``) and :func:`parent_keys`
    (canonical keys into ``out``, when ``as_keys``)."""
    board, hand = flip_state(rules, child_board, child_hand)
    n = 0
    cap = out.shape[0]
    attackers = 0
    attacker = -1
    enemy = -1
    if nonterminal_only:
        enemy = find_piece(board, hand, rules[ROYAL] | OPPONENT)
        if enemy < 0 or (rules[HOME_ZONE] >> enemy) & 1:
            return 0
    empty = 0
    for i in range(N_CELLS):
        q = cell_at(board, hand, i)
        if q == 0:
            empty |= 1 << i
        elif nonterminal_only and q < OPPONENT and (rules[TARGETS + N_CELLS * q + i] >> enemy) & 1:
            attackers += 1
            attacker = i
    if attackers >= 2:
        return 0
    n_restore = rules[N_RESTORE]
    # The pieces an unmove of a capture may put back (its hand has one, or the board holds fewer
    # than its army: an unmove only moves a piece, which keeps the material), each as an entry of
    # RESTORE_ENTRY_BITS (the piece's nibble, and what it takes from the hand above it): the first
    # RESTORE_WORD of them in ``restore0``, the others in ``restore1`` (a variant has at most
    # 2 * RESTORE_WORD: layout.py checks it).
    restore0 = 0
    restore1 = 0
    listed = 0
    for k in range(n_restore):
        s = rules[RESTORE_SLOT + k]
        if s >= 0:
            if (hand >> rules[COUNT_SHIFT + s]) & rules[COUNT_FIELD + s] == 0:
                continue
        else:
            base = rules[BASE + rules[RESTORE_CODE + k]]
            if material(rules, board, hand, base) >= rules[ARMY + base]:
                continue
        entry = (rules[RESTORE_CODE + k] | OPPONENT) | (rules[RESTORE_DELTA + k] << CELL_BITS)
        if listed < RESTORE_WORD:
            restore0 |= entry << (RESTORE_ENTRY_BITS * listed)
        else:
            restore1 |= entry << (RESTORE_ENTRY_BITS * (listed - RESTORE_WORD))
        listed += 1
    for t in range(N_CELLS):
        p = cell_at(board, hand, t)
        if p == 0 or p >= OPPONENT or (attackers == 1 and t != attacker):
            continue  # (with one attacker, another piece moved back would leave it in place)
        lifted, lifted_hand = with_cell(board, hand, t, 0)
        slot = rules[DROPPED_SLOT + p]
        if (slot >= 0 and (rules[DROP_CELLS + slot] >> t) & 1
                and (hand >> rules[COUNT_SHIFT + slot]) & rules[COUNT_FIELD + slot] < rules[MAX_HAND + slot]):
            if n >= cap:  # undo a drop: back to the mover's hand
                return -1
            h = lifted_hand + (1 << rules[COUNT_SHIFT + slot])
            if as_keys:
                out[n] = board_key(rules, lifted, h)
            else:
                out[n] = lifted
                out_hands[n] = h
            n += 1
        for kind in range(2):  # undo a board move to an empty source (kind 1: one that promoted)
            if kind == 0:
                before = p
                if rules[PROMOTES + p] != 0 and (rules[PROMO_ZONE + p] >> t) & 1:
                    continue  # a move into the zone would have promoted it
            else:
                before = rules[DEMOTED + p]
                if before == 0 or not (rules[PROMO_ZONE + before] >> t) & 1:
                    continue
            srcs = rules[SOURCES + N_CELLS * before + t] & empty  # the empty squares it can have come from
            if nonterminal_only:  # less those from which it attacks the enemy royal (catch-terminal)
                srcs &= ~rules[SOURCES + N_CELLS * before + enemy]
            f = -1
            while srcs:  # the set bits of srcs, ascending
                f += 1
                bit = srcs & 1
                srcs >>= 1
                if not bit:
                    continue
                moved, moved_hand = with_cell(lifted, lifted_hand, f, before)
                if n >= cap:
                    return -1
                if as_keys:
                    out[n] = board_key(rules, moved, moved_hand)
                else:
                    out[n] = moved
                    out_hands[n] = moved_hand
                n += 1
                entries = restore0  # ... or undo a capture: an enemy piece stands on t again
                for word in range(2):
                    while entries:
                        if n >= cap:
                            return -1
                        entry = entries & RESTORE_ENTRY_MASK
                        entries >>= RESTORE_ENTRY_BITS
                        back, back_hand = with_cell(moved, moved_hand - (entry >> CELL_BITS), t, entry & CELL_MASK)
                        if as_keys:
                            out[n] = board_key(rules, back, back_hand)
                        else:
                            out[n] = back
                            out_hands[n] = back_hand
                        n += 1
                    entries = restore1
    return n
