"""Dobutsu shogi rules on packed states (SPEC §1.1, §1.2, §1.4).

All kernels take and return normalised packed states (:mod:`encoding.key`): the side to move
plays upwards, towards rank index 0. Making a move returns the child already normalised for the
opponent, i.e. flipped.

Move layout
-----------
A move is a small ``int``, in the frame of the normalised state it is played from::

    bits 0..3   from-cell 0..11 for a board move, or 12 + hand slot for a drop
                (12 chick, 13 elephant, 14 giraffe)
    bits 4..7   to-cell 0..11
    bit  8      promotion (a chick reaching rank index 0)

Terminal classes (SPEC §1.4), for the side to move of a normalised state:
:data:`CATCH` it can capture the enemy lion; :data:`TRY` otherwise, the enemy lion stands on its
home rank (rank index 3); :data:`NONTERMINAL` otherwise.
"""

from __future__ import annotations

import numpy as np

from dobutsu_tb.encoding.jit import njit
from dobutsu_tb.tablebase.game.key import (
    CHICK,
    ELEPHANT,
    GIRAFFE,
    HAND_PIECES,
    HAND_SHIFT,
    HEN,
    LION,
    N_CELLS,
    OPPONENT,
    _flip,
)

NONTERMINAL, CATCH, TRY = 0, 1, 2
#: Upper bounds on the moves and unmoves of one state (checked in the tests).
MAX_MOVES = 80
MAX_UNMOVES = 320
DROP = 12
PROMOTION = 1 << 8
#: Hand slot of each piece code (chick 0, elephant 1, giraffe 2), -1 for pieces never in hand.
HAND_SLOT = np.array([-1, 1, 2, -1, 0, 0, -1, -1] * 2, np.int64)
#: Piece code dropped from each hand slot.
SLOT_PIECE = np.array(HAND_PIECES, np.int64)

_STEPS = {
    LION: [(-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, -1), (1, 0), (1, 1)],
    GIRAFFE: [(-1, 0), (1, 0), (0, -1), (0, 1)],
    ELEPHANT: [(-1, -1), (-1, 1), (1, -1), (1, 1)],
    CHICK: [(-1, 0)],
    HEN: [(-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, 0)],
}


def _geometry():
    """``TARGETS[p, i]``: bit mask of cells a piece of the side to move with code p reaches from i;
    ``SOURCES[p, i]``: the cells from which such a piece reaches i."""
    targets = np.zeros((16, N_CELLS), np.int64)
    sources = np.zeros((16, N_CELLS), np.int64)
    for piece, steps in _STEPS.items():
        for i in range(N_CELLS):
            r, f = divmod(i, 3)
            for dr, df in steps:
                rr, ff = r + dr, f + df
                if 0 <= rr < 4 and 0 <= ff < 3:
                    j = 3 * rr + ff
                    targets[piece, i] |= 1 << j
                    sources[piece, j] |= 1 << i
    return targets, sources


TARGETS, SOURCES = _geometry()


@njit
def _find_piece(state, nibble):
    for i in range(N_CELLS):
        if (state >> (4 * i)) & 15 == nibble:
            return i
    return -1


@njit
def _attacks(state, target):
    """True when a piece of the side to move attacks cell ``target``."""
    for i in range(N_CELLS):
        p = (state >> (4 * i)) & 15
        if p != 0 and p < OPPONENT and (TARGETS[p, i] >> target) & 1:
            return True
    return False


@njit
def _classify(state):
    """:data:`CATCH`, :data:`TRY` or :data:`NONTERMINAL` (SPEC §1.4) of a state with both lions."""
    enemy = _find_piece(state, LION | OPPONENT)
    if _attacks(state, enemy):
        return CATCH
    if enemy >= 9:
        return TRY
    return NONTERMINAL


@njit
def _game_over(state):
    """SPEC §1.2's game-over test for move generation and perft."""
    if _find_piece(state, LION) < 0 or _find_piece(state, LION | OPPONENT) < 0:
        return True
    enemy = _find_piece(state, LION | OPPONENT)
    return enemy >= 9 and not _attacks(state, enemy)


@njit
def _gen_moves(state, moves):
    """Write the moves of ``state`` into ``moves``; return how many. Game-over states are not
    checked here: the caller asks :func:`_game_over` first."""
    n = 0
    empty = 0
    for i in range(N_CELLS):
        p = (state >> (4 * i)) & 15
        if p == 0:
            empty |= 1 << i
            continue
        if p >= OPPONENT:
            continue
        m = TARGETS[p, i]
        while m:
            j = 0
            while not (m >> j) & 1:
                j += 1
            m &= m - 1
            q = (state >> (4 * j)) & 15
            if q != 0 and q < OPPONENT:
                continue
            move = i | (j << 4)
            if p == CHICK and j < 3:
                move |= PROMOTION
            moves[n] = move
            n += 1
    for slot in range(3):
        if (state >> (HAND_SHIFT + 2 * slot)) & 3:
            m = empty
            while m:
                j = 0
                while not (m >> j) & 1:
                    j += 1
                m &= m - 1
                moves[n] = (DROP + slot) | (j << 4)
                n += 1
    return n


@njit
def _make_move(state, move):
    """The child of ``state`` after ``move``, normalised for the opponent (flipped)."""
    src = move & 15
    dst = (move >> 4) & 15
    if src >= DROP:
        slot = src - DROP
        state -= np.int64(1) << (HAND_SHIFT + 2 * slot)
        state |= SLOT_PIECE[slot] << (4 * dst)
        return _flip(state)
    p = (state >> (4 * src)) & 15
    q = (state >> (4 * dst)) & 15
    if q != 0:
        slot = HAND_SLOT[q]
        if slot >= 0:
            state += np.int64(1) << (HAND_SHIFT + 2 * slot)
    if move & PROMOTION:
        p = HEN
    state &= ~((np.int64(15) << (4 * src)) | (np.int64(15) << (4 * dst)))
    state |= p << (4 * dst)
    return _flip(state)


@njit
def _gen_unmoves(child, out):
    """Write every predecessor state of ``child`` into ``out``; return how many (or -1 if ``out``
    is too small).

    A predecessor is a normalised state from which some move leads to ``child``: the child is
    flipped back into the mover's frame and one move of the mover is undone, with or without
    giving back a captured piece from the mover's hand, or a drop is undone. Duplicates and
    positions that cannot occur are not filtered: the caller looks the results up.
    """
    state = _flip(child)
    n = 0
    cap = out.shape[0]
    for t in range(N_CELLS):
        p = (state >> (4 * t)) & 15
        if p == 0 or p >= OPPONENT:
            continue
        cleared = state & ~(np.int64(15) << (4 * t))
        # Undo a drop: the piece goes back to the mover's hand.
        if p == CHICK or p == ELEPHANT or p == GIRAFFE:
            slot = HAND_SLOT[p]
            if (state >> (HAND_SHIFT + 2 * slot)) & 3 < 2:
                if n >= cap:
                    return -1
                out[n] = cleared + (np.int64(1) << (HAND_SHIFT + 2 * slot))
                n += 1
        # Undo a board move: the piece goes back to an empty source cell.
        for kind in range(2):
            if kind == 0:
                if p == CHICK and t < 3:
                    continue  # a chick moving onto the far rank would have promoted
                srcs = SOURCES[p, t]
                before = p
            else:
                if p != HEN or t >= 3:
                    continue  # promotion: a chick stepped up onto the far rank
                srcs = np.int64(1) << (t + 3)
                before = CHICK
            while srcs:
                f = 0
                while not (srcs >> f) & 1:
                    f += 1
                srcs &= srcs - 1
                if (state >> (4 * f)) & 15 != 0:
                    continue
                moved = cleared | (before << (4 * f))
                if n >= cap:
                    return -1
                out[n] = moved
                n += 1
                # ... or undo a capture: an enemy piece from the mover's hand stands on t again.
                for slot in range(3):
                    if (state >> (HAND_SHIFT + 2 * slot)) & 3 == 0:
                        continue
                    base = moved - (np.int64(1) << (HAND_SHIFT + 2 * slot))
                    restored = SLOT_PIECE[slot]
                    for variant in range(2):
                        if variant == 1:
                            if slot != 0:
                                break
                            restored = HEN  # a captured hen comes back as a chick in hand
                        if n >= cap:
                            return -1
                        out[n] = base | ((restored | OPPONENT) << (4 * t))
                        n += 1
    return n


@njit
def _perft(state, depth, moves_buf):
    if depth == 0:
        return np.int64(1)
    if _game_over(state):
        return np.int64(0)
    moves = moves_buf[depth]
    n = _gen_moves(state, moves)
    if depth == 1:
        return np.int64(n)
    total = np.int64(0)
    for k in range(n):
        total += _perft(_make_move(state, moves[k]), depth - 1, moves_buf)
    return total


def _check_state(state) -> np.int64:
    state = int(state)
    if state < 0 or state >> 60:
        raise ValueError(f"{state:#x} is not a packed state")
    return np.int64(state)


def legal_moves(state) -> np.ndarray:
    """Legal moves of a normalised state, in generation order.

    Parameters
    ----------
    state : int
        Packed normalised state.

    Returns
    -------
    numpy.ndarray of int64, shape (n,)
        Moves (layout in the module docstring); empty when the game is over (SPEC §1.2).
    """
    state = _check_state(state)
    if _game_over(state):
        return np.empty(0, np.int64)
    buf = np.empty(MAX_MOVES, np.int64)
    return buf[: _gen_moves(state, buf)].copy()


def make_move(state, move) -> int:
    """The child state after ``move``, normalised for the opponent.

    Raises
    ------
    ValueError
        If ``move`` is not a legal move of ``state``.
    """
    state = _check_state(state)
    if int(move) not in set(legal_moves(state).tolist()):
        raise ValueError(f"move {int(move):#x} is not legal here")
    return int(_make_move(state, np.int64(move)))


def predecessors(state) -> np.ndarray:
    """Every state from which one move leads to ``state`` (unmoves), duplicates removed.

    Parameters
    ----------
    state : int
        Packed normalised state.

    Returns
    -------
    numpy.ndarray of int64, shape (n,)
        Sorted packed predecessor states, normalised for the side that moved. Unreachable or
        terminal predecessors are included: the rules do not know the start position.
    """
    state = _check_state(state)
    buf = np.empty(MAX_UNMOVES, np.int64)
    n = _gen_unmoves(state, buf)
    if n < 0:
        raise RuntimeError("MAX_UNMOVES is too small")
    return np.unique(buf[:n])


def classify(state) -> int:
    """Terminal class of a state with both lions: :data:`NONTERMINAL`, :data:`CATCH` or :data:`TRY`."""
    return int(_classify(_check_state(state)))


def game_over(state) -> bool:
    """True when the game is over in ``state`` (a lion is gone, or an enemy lion stands on the
    side to move's home rank and cannot be captured; SPEC §1.2)."""
    return bool(_game_over(_check_state(state)))


def perft(state, depth: int) -> int:
    """Number of move sequences of ``depth`` plies from ``state`` (SPEC §1.2).

    Game-over positions are leaves: moves that end the game are counted but not expanded.

    Raises
    ------
    ValueError
        If ``depth`` is negative.
    """
    if depth < 0:
        raise ValueError(f"perft depth must be >= 0, got {depth}")
    buf = np.empty((depth + 1, MAX_MOVES), np.int64)
    return int(_perft(_check_state(state), depth, buf))
