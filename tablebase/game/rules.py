"""Dobutsu shogi rules on packed states (SPEC §1.1, §1.2, §1.4).

All kernels take and return normalised packed states (:mod:`dobutsu_tb.tablebase.game.key`):
the side to move plays upwards, towards rank index 0. Making a move returns the child already
normalised for the opponent, i.e. flipped. The kernels are plain functions that numba compiles
(:mod:`dobutsu_tb.tablebase.game.kernels`); they assume a valid state with both lions unless
they say otherwise. The Python API below them (:func:`legal_moves`, :func:`play`,
:func:`perft`) validates its input.

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

from dobutsu_tb.tablebase.game.key import (
    BOARD_MASK,
    CELL_BITS,
    CELL_MASK,
    CHICK,
    COUNT_BITS,
    COUNT_MASK,
    ELEPHANT,
    GIRAFFE,
    HAND_CODE_SWAPPED,
    HAND_LEN,
    HAND_MASK,
    HAND_PIECES,
    HAND_SHIFT,
    HEN,
    LION,
    N_CELLS,
    OPPONENT,
    PIECE_MASK,
    RANK_BITS,
    RANK_MASK,
    RANK_PACKED_FLIPPED,
    flip_state,
    join_codes,
)

NONTERMINAL, CATCH, TRY = 0, 1, 2
#: Upper bound on the moves of one state (checked in the tests).
MAX_MOVES = 80
#: Move layout: from-cell field, to-cell shift, first from-code of a drop, promotion flag.
FROM_MASK = 15
TO_SHIFT = 4
DROP = 12
PROMOTION = 1 << 8
#: Cells of the side to move's far rank (rank index 0, where a chick promotes) and home rank.
FAR_RANK_END = 3
HOME_RANK_START = 9
#: Figures of the standard start (SPEC §1.4).
STANDARD_REACHABLE = 246_803_167
STANDARD_NONTERMINAL = 99_485_568

__kernels__ = ("find_piece", "attacks", "classify", "game_over", "gen_moves", "make_move", "perft_count",
               "attackers_of", "child_keys")
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
#: ``TARGET_LIST[p, i, :TARGET_COUNT[p, i]]``: the cells of ``TARGETS[p, i]``, ascending.
TARGET_COUNT = np.array([[bin(int(TARGETS[p, i])).count("1") for i in range(N_CELLS)] for p in range(16)], np.int64)
TARGET_LIST = np.zeros((16, N_CELLS, 8), np.int64)
for _p in range(16):
    for _i in range(N_CELLS):
        _cells = [j for j in range(N_CELLS) if (TARGETS[_p, _i] >> j) & 1]
        TARGET_LIST[_p, _i, : len(_cells)] = _cells
#: ``ENEMY_TARGETS[p, i]``: the cells an opponent's piece with code p (without its side bit)
#: attacks from cell i, in the side to move's frame (the opponent plays downwards).
ENEMY_TARGETS = np.array([[sum(1 << (N_CELLS - 1 - j) for j in range(N_CELLS) if (TARGETS[p, N_CELLS - 1 - i] >> j) & 1)
                           for i in range(N_CELLS)] for p in range(16)], np.int64)


def find_piece(state, nibble):
    """Cell of the first piece with this nibble (code plus side), or -1."""
    for i in range(N_CELLS):
        if (state >> (CELL_BITS * i)) & CELL_MASK == nibble:
            return i
    return -1


def attacks(state, target):
    """True when a piece of the side to move attacks cell ``target``."""
    for i in range(N_CELLS):
        p = (state >> (CELL_BITS * i)) & CELL_MASK
        if p != 0 and p < OPPONENT and (TARGETS[p, i] >> target) & 1:
            return True
    return False


def classify(state):
    """:data:`CATCH`, :data:`TRY` or :data:`NONTERMINAL` (SPEC §1.4) of a state with both lions."""
    enemy = find_piece(state, LION | OPPONENT)
    if attacks(state, enemy):
        return CATCH
    if enemy >= HOME_RANK_START:
        return TRY
    return NONTERMINAL


def game_over(state):
    """SPEC §1.2's game-over test for move generation and perft: a lion is gone, or an enemy lion
    stands on the side to move's home rank and cannot be captured. Any state is accepted."""
    if find_piece(state, LION) < 0 or find_piece(state, LION | OPPONENT) < 0:
        return True
    enemy = find_piece(state, LION | OPPONENT)
    return enemy >= HOME_RANK_START and not attacks(state, enemy)


def gen_moves(state, moves):
    """Write the moves of ``state`` into ``moves`` (at least :data:`MAX_MOVES` long); return how
    many. Game-over states are not checked here: the caller asks :func:`game_over` first."""
    n = 0
    empty = 0
    for i in range(N_CELLS):
        p = (state >> (CELL_BITS * i)) & CELL_MASK
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
            q = (state >> (CELL_BITS * j)) & CELL_MASK
            if q != 0 and q < OPPONENT:
                continue
            move = i | (j << TO_SHIFT)
            if p == CHICK and j < FAR_RANK_END:
                move |= PROMOTION
            moves[n] = move
            n += 1
    for slot in range(3):
        if (state >> (HAND_SHIFT + COUNT_BITS * slot)) & COUNT_MASK:
            m = empty
            while m:
                j = 0
                while not (m >> j) & 1:
                    j += 1
                m &= m - 1
                moves[n] = (DROP + slot) | (j << TO_SHIFT)
                n += 1
    return n


def make_move(state, move):
    """The child of ``state`` after ``move``, normalised for the opponent (flipped). The move is
    not checked (:func:`play` checks it)."""
    src = move & FROM_MASK
    dst = (move >> TO_SHIFT) & FROM_MASK
    if src >= DROP:
        slot = src - DROP
        state -= np.int64(1) << (HAND_SHIFT + COUNT_BITS * slot)
        state |= SLOT_PIECE[slot] << (CELL_BITS * dst)
        return flip_state(state)
    p = (state >> (CELL_BITS * src)) & CELL_MASK
    q = (state >> (CELL_BITS * dst)) & CELL_MASK
    if q != 0:
        slot = HAND_SLOT[q]
        if slot >= 0:
            state += np.int64(1) << (HAND_SHIFT + COUNT_BITS * slot)
    if move & PROMOTION:
        p = HEN
    state &= ~((np.int64(CELL_MASK) << (CELL_BITS * src)) | (np.int64(CELL_MASK) << (CELL_BITS * dst)))
    state |= p << (CELL_BITS * dst)
    return flip_state(state)


def attackers_of(state, target):
    """Cells (bit mask) of the opponent's pieces that attack cell ``target``."""
    mask = 0
    for i in range(N_CELLS):
        p = (state >> (CELL_BITS * i)) & CELL_MASK
        if p >= OPPONENT and (ENEMY_TARGETS[p & PIECE_MASK, i] >> target) & 1:
            mask |= 1 << i
    return mask


def child_keys(state, moves, keys, classes):
    """The moves of ``state`` (into ``moves``, in :func:`gen_moves`' order), the canonical key of
    each child (``keys``) and its terminal class (``classes``: :data:`NONTERMINAL`, :data:`CATCH`
    or :data:`TRY`, as :func:`classify` of the child); returns how many. ``state`` must be
    non-terminal. The same as :func:`gen_moves`, :func:`make_move`, ``canonical_key`` and
    :func:`classify`, faster (the builder's inner loop):

    - the class comes from the parent's attack map in O(1) a child: no piece slides, so after a
      move the opponent attacks our lion's square with the pieces that attacked it before, less
      the one just captured; a child is a try (for us) when our lion stands on the far rank
      unattacked;
    - the child's key is joined from per-rank code tables (the child is the mover's board turned
      round, so the mover's rank 3 comes first in its key)."""
    lion = find_piece(state, LION)
    attacked = 0  # squares the opponent attacks
    on_lion = 0  # the opponent's pieces that attack our lion
    for i in range(N_CELLS):
        p = (state >> (CELL_BITS * i)) & CELL_MASK
        if p >= OPPONENT:
            reach = ENEMY_TARGETS[p & PIECE_MASK, i]
            attacked |= reach
            if (reach >> lion) & 1:
                on_lion |= 1 << i
    board = state & BOARD_MASK
    hand = (state >> HAND_SHIFT) & HAND_MASK
    empty = 0
    n = 0
    for i in range(N_CELLS + len(HAND_PIECES)):
        if i < N_CELLS:
            p = (board >> (CELL_BITS * i)) & CELL_MASK
            if p == 0:
                empty |= 1 << i
                continue
            if p >= OPPONENT:
                continue
            count = TARGET_COUNT[p, i]
            lifted = board & ~(CELL_MASK << (CELL_BITS * i))
        else:
            slot = i - N_CELLS
            if (hand >> (COUNT_BITS * slot)) & COUNT_MASK == 0:
                continue
            p = SLOT_PIECE[slot]
            count = N_CELLS
            lifted = board
        for k in range(count):
            if i < N_CELLS:
                j = TARGET_LIST[p, i, k]
                q = (board >> (CELL_BITS * j)) & CELL_MASK
                if q != 0 and q < OPPONENT:
                    continue
                move = i | (j << TO_SHIFT)
                placed = p
                if p == CHICK and j < FAR_RANK_END:
                    move |= PROMOTION
                    placed = HEN
                h = hand
                if q != 0:
                    h += 1 << (COUNT_BITS * HAND_SLOT[q])
            else:
                j = k
                if not (empty >> j) & 1:
                    continue
                move = (DROP + slot) | (j << TO_SHIFT)
                placed = p
                q = 0
                h = hand - (1 << (COUNT_BITS * slot))
            after = (lifted & ~(CELL_MASK << (CELL_BITS * j))) | (placed << (CELL_BITS * j))
            keys[n] = join_codes(RANK_PACKED_FLIPPED[(after >> (3 * RANK_BITS)) & RANK_MASK],
                                 RANK_PACKED_FLIPPED[(after >> (2 * RANK_BITS)) & RANK_MASK],
                                 RANK_PACKED_FLIPPED[(after >> RANK_BITS) & RANK_MASK],
                                 RANK_PACKED_FLIPPED[after & RANK_MASK], HAND_CODE_SWAPPED[h], HAND_LEN[h])
            if i == lion:
                caught = (attacked >> j) & 1  # a piece never attacks its own square
                square = j
            else:
                caught = (on_lion & ~(1 << j)) != 0  # a captured attacker attacks no more
                square = lion
            if caught:
                classes[n] = CATCH
            elif square < FAR_RANK_END:
                classes[n] = TRY
            else:
                classes[n] = NONTERMINAL
            moves[n] = move
            n += 1
    return n


def perft_count(state, depth, moves_buf):
    """Move sequences of ``depth`` plies from ``state``; ``moves_buf`` is (depth + 1, MAX_MOVES)."""
    if depth == 0:
        return np.int64(1)
    if game_over(state):
        return np.int64(0)
    moves = moves_buf[depth]
    n = gen_moves(state, moves)
    if depth == 1:
        return np.int64(n)
    total = np.int64(0)
    for k in range(n):
        total += perft_count(make_move(state, moves[k]), depth - 1, moves_buf)
    return total


# --- the Python API (validates its input) -----------------------------------------------------


def check_state(state) -> np.int64:
    """``state`` as an int64 after a range check.

    Raises
    ------
    ValueError
        If ``state`` is negative or uses bits above the hand field.
    """
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
    state = check_state(state)
    if game_over(state):
        return np.empty(0, np.int64)
    buf = np.empty(MAX_MOVES, np.int64)
    return buf[: gen_moves(state, buf)].copy()


def play(state, move) -> int:
    """The child state after ``move``, normalised for the opponent.

    Raises
    ------
    ValueError
        If ``move`` is not a legal move of ``state``.
    """
    state = check_state(state)
    if int(move) not in set(legal_moves(state).tolist()):
        raise ValueError(f"move {int(move):#x} is not legal here")
    return int(make_move(state, np.int64(move)))


def perft(state, depth: int) -> int:
    """Number of move sequences of ``depth`` plies from ``state`` (SPEC §1.2).

    Game-over positions are leaves: moves that end the game are counted but not expanded.

    Raises
    ------
    ValueError
        If ``depth`` is negative.
    """
    from dobutsu_tb.tablebase.game import kernels

    if depth < 0:
        raise ValueError(f"perft depth must be >= 0, got {depth}")
    buf = np.empty((depth + 1, MAX_MOVES), np.int64)
    return int(kernels.perft_count(check_state(state), depth, buf))
