"""Packed states and their Huffman-style canonical keys (docs/rules.md, "Keys").

The state and key layouts are drawn in :mod:`~dobutsu_tb.tablebase.game.layout`, which also
holds every table read here. The kernels are table driven: a rank indexes a table of codes and
code lengths, so a key costs one look-up a rank and one for the hands; a key is decoded square
by square with a table indexed by the next few bits.

They are plain functions of ``(board, hand)`` words: :class:`~dobutsu_tb.tablebase.game.game.Game`
binds a copy of each to its variant's tables, jitted by numba for the builder, or as plain
Python for probing (which never imports numba). Called directly, they are the standard game's.
"""

from __future__ import annotations

from dobutsu_tb.tablebase.game.layout import (
    BOARD_MASK,
    CELL_BITS,
    CELL_DECODE,
    CELL_MASK,
    CELL_PEEK,
    COUNT_BITS,
    COUNT_DECODE,
    COUNT_PEEK,
    HAND_CODE,
    HAND_LEN,
    HAND_SWAP,
    KEY_TOP_BIT,
    MAX_HAND,
    MIRROR,
    N_CELLS,
    N_RANKS,
    N_SLOTS,
    PACK_CODE_MASK,
    PACK_CODE_SHIFT,
    PACK_LEN_MASK,
    PACK_MIRROR_SHIFT,
    RANK_BITS,
    RANK_CODE,
    RANK_CODE_MIRRORED,
    RANK_FLIP,
    RANK_LEN,
    RANK_MASK,
    RANK_MIRROR,
    RANK_PACKED,
    RANK_PACKED_FLIPPED,
)

__kernels__ = ("codes", "encode_state", "canonical_key", "decode_key", "mirror_state", "flip_state", "board_key",
               "flipped_board_key")


def codes(board, hand):
    """The code of a state, the code of its mirror image and their length in bits (a rank's code is
    as long mirrored), or (0, 0, 0) for an invalid state (a bad nibble, a hand count too high)."""
    a = 0
    b = 0
    n = 0
    for r in range(N_RANKS):
        t = (board >> (RANK_BITS * r)) & RANK_MASK
        ln = RANK_LEN[t]
        if ln == 0:
            return 0, 0, 0
        a = (a << ln) | RANK_CODE[t]
        b = (b << ln) | RANK_CODE_MIRRORED[t]
        n += ln
    ln = HAND_LEN[hand]
    if ln < 0:
        return 0, 0, 0
    return (a << ln) | HAND_CODE[hand], (b << ln) | HAND_CODE[hand], n + ln


def encode_state(board, hand):
    """The key of a state, mirror images not folded; 0 for an invalid state."""
    a, _, n = codes(board, hand)
    return a << (KEY_TOP_BIT + 1 - n) if n else 0


def canonical_key(board, hand):
    """The canonical key of a state: the smaller key of it and of its mirror image (when the
    variant folds mirrors); 0 for an invalid state."""
    a, b, n = codes(board, hand)
    if n == 0:
        return 0
    if MIRROR and b < a:
        a = b
    return a << (KEY_TOP_BIT + 1 - n)


def board_key(board, hand):
    """The canonical key of a valid state (no checks; one packed table load a rank)."""
    a = 0
    b = 0
    n = 0
    for r in range(N_RANKS):
        p = RANK_PACKED[(board >> (RANK_BITS * r)) & RANK_MASK]
        ln = p & PACK_LEN_MASK
        a = (a << ln) | (p >> PACK_CODE_SHIFT)
        b = (b << ln) | ((p >> PACK_MIRROR_SHIFT) & PACK_CODE_MASK)
        n += ln
    ln = HAND_LEN[hand]
    a = (a << ln) | HAND_CODE[hand]
    b = (b << ln) | HAND_CODE[hand]
    if MIRROR and b < a:
        a = b
    return a << (KEY_TOP_BIT + 1 - n - ln)


def flipped_board_key(after, hand):
    """The canonical key of the state seen from the other side of board ``after`` and hand word
    ``hand`` (the child of a move: the mover's board turned round, its hands swapped), without
    turning the board: the mover's last rank comes first, read from the flipped tables."""
    a = 0
    b = 0
    n = 0
    for r in range(N_RANKS):
        p = RANK_PACKED_FLIPPED[(after >> (RANK_BITS * (N_RANKS - 1 - r))) & RANK_MASK]
        ln = p & PACK_LEN_MASK
        a = (a << ln) | (p >> PACK_CODE_SHIFT)
        b = (b << ln) | ((p >> PACK_MIRROR_SHIFT) & PACK_CODE_MASK)
        n += ln
    h = HAND_SWAP[hand]
    ln = HAND_LEN[h]
    a = (a << ln) | HAND_CODE[h]
    b = (b << ln) | HAND_CODE[h]
    if MIRROR and b < a:
        a = b
    return a << (KEY_TOP_BIT + 1 - n - ln)


def decode_key(key):
    """The state ``(board, hand)`` of a key (the inverse of :func:`encode_state` on valid keys)."""
    pos = KEY_TOP_BIT + 1  # bits above pos are read
    board = 0
    for i in range(N_CELLS):
        e = CELL_DECODE[(key >> (pos - CELL_PEEK)) & ((1 << CELL_PEEK) - 1)]
        board |= (e & CELL_MASK) << (CELL_BITS * i)
        pos -= e >> CELL_BITS
    hand = 0
    for k in range(2 * N_SLOTS):
        e = COUNT_DECODE[MAX_HAND[k % N_SLOTS], (key >> (pos - COUNT_PEEK)) & ((1 << COUNT_PEEK) - 1)]
        hand |= (e & 15) << (COUNT_BITS * k)
        pos -= e >> 4
    return board, hand


def mirror_state(board, hand):
    """The left-right mirror image (files reversed) of a state."""
    out = board & ~BOARD_MASK
    for r in range(N_RANKS):
        t = (board >> (RANK_BITS * r)) & RANK_MASK
        out |= RANK_MIRROR[t] << (RANK_BITS * r)
    return out, hand


def flip_state(board, hand):
    """The same position seen from the other side: the board turned by 180°, colours and hands
    swapped."""
    out = 0
    for r in range(N_RANKS):
        t = (board >> (RANK_BITS * r)) & RANK_MASK
        out |= RANK_FLIP[t] << (RANK_BITS * (N_RANKS - 1 - r))
    return out, HAND_SWAP[hand]


# --- array API (the jitted kernels, in parallel) ---------------------------------------------


def as_int64_array(values, name: str):
    """``values`` as a contiguous one-dimensional int64 array (numpy.ndarray; numpy is imported
    here, not with the module: probing never needs it).

    Raises
    ------
    ValueError
        If ``values`` is not one-dimensional or holds anything but non-negative 64-bit integers.
    """
    import numpy as np

    arr = np.ascontiguousarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype != np.int64:
        if arr.size and (not np.issubdtype(arr.dtype, np.integer) or arr.min() < 0
                         or arr.max() > np.iinfo(np.int64).max):
            raise ValueError(f"{name} must hold non-negative 64-bit integers")
        arr = arr.astype(np.int64)
    return arr
