"""Packed states and their Huffman-style canonical keys (docs/rules.md, "Keys").

The state and key layouts are drawn in :mod:`~dobutsu_tb.tablebase.game.layout`, which also
says where each table lives in the rules array. The kernels are table driven: on boards of up to
:data:`~.layout.MAX_TABLE_FILES` files a rank indexes a table of codes and code lengths, so a
key costs one look-up a rank and one for the hands; wider ranks are coded square by square. A
key is decoded square by square with a table indexed by the next few bits.

They are plain functions of ``(rules, board, hand)``: :class:`~dobutsu_tb.tablebase.game.game.Game`
binds a copy of each to its board's shape, jitted by numba for the builder, or as plain Python for
probing (which never imports numba); ``rules`` is the variant's rules array. Called directly,
they are the standard game's shape.
"""

from __future__ import annotations

from dobutsu_tb.encoding.binding import kernel_options
from dobutsu_tb.tablebase.game.layout import (
    BOARD_CELLS,
    BOARD_MASK,
    BOARD_RANKS,
    CELL_BITS,
    CELL_CODE,
    CELL_CODE_SHIFT,
    CELL_DECODE,
    CELL_MASK,
    CELL_PEEK,
    COUNT_SHIFT,
    EXT,
    EXT_SHIFT,
    H_CODE,
    H_LEN,
    H_SWAP,
    HAND,
    HAND_CODE_BITS,
    HAND_DECODE,
    HAND_FIELDS,
    HAND_MASK,
    KEY_TOP_BIT,
    LEADING_ONES,
    MAX_HAND,
    MIRROR,
    N_CELLS,
    N_FILES,
    N_RANKS,
    N_SLOTS,
    OPPONENT,
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
    RANK_TABLES,
)

__kernels__ = ("cell_at", "with_cell", "rank_word", "with_rank", "hand_index", "rank_codes", "codes", "encode_state",
               "canonical_key", "decode_key", "mirror_rank", "flip_rank", "mirror_state", "flip_state", "board_key",
               "flipped_board_key")

_CODE_MASK = (1 << CELL_CODE_SHIFT) - 1


# --- squares and ranks of the two words -----------------------------------------------------------


def cell_at(board, hand, i):
    """The nibble of square ``i`` of a state (its piece code plus side, 0 if empty)."""
    if EXT and i >= BOARD_CELLS:
        return (hand >> (EXT_SHIFT + CELL_BITS * (i - BOARD_CELLS))) & CELL_MASK
    return (board >> (CELL_BITS * i)) & CELL_MASK


def with_cell(board, hand, i, nibble):
    """The state with square ``i`` set to ``nibble`` (whatever it held before)."""
    if EXT and i >= BOARD_CELLS:
        shift = EXT_SHIFT + CELL_BITS * (i - BOARD_CELLS)
        return board, (hand & ~(CELL_MASK << shift)) | (nibble << shift)
    shift = CELL_BITS * i
    return (board & ~(CELL_MASK << shift)) | (nibble << shift), hand


def rank_word(board, hand, r):
    """The nibbles of rank index ``r`` of a state, file a lowest (RANK_BITS bits)."""
    if EXT and r >= BOARD_RANKS:
        return (hand >> (EXT_SHIFT + RANK_BITS * (r - BOARD_RANKS))) & RANK_MASK
    return (board >> (RANK_BITS * r)) & RANK_MASK


def with_rank(board, hand, r, word):
    """The state with an empty rank index ``r`` set to ``word`` (bits are or-ed in)."""
    if EXT and r >= BOARD_RANKS:
        return board, hand | (word << (EXT_SHIFT + RANK_BITS * (r - BOARD_RANKS)))
    return board | (word << (RANK_BITS * r)), hand


def hand_index(rules, hand):
    """The entry of the hands' table of a hand word (its squares masked off on large boards)."""
    if EXT:
        return HAND + HAND_FIELDS * (hand & rules[HAND_MASK])
    return HAND + HAND_FIELDS * hand


# --- codes ------------------------------------------------------------------------------------------


def rank_codes(rules, t):
    """The code of rank word ``t``, the code of its mirror image and their length (0 for a rank
    with a nibble no piece has), square by square (for ranks too wide for tables)."""
    a = 0
    b = 0
    n = 0
    for f in range(N_FILES):
        e = rules[CELL_CODE + ((t >> (CELL_BITS * f)) & CELL_MASK)]
        m = rules[CELL_CODE + ((t >> (CELL_BITS * (N_FILES - 1 - f))) & CELL_MASK)]
        ln = e >> CELL_CODE_SHIFT
        if ln == 0:
            return 0, 0, 0
        a = (a << ln) | (e & _CODE_MASK)
        b = (b << (m >> CELL_CODE_SHIFT)) | (m & _CODE_MASK)
        n += ln
    return a, b, n


def codes(rules, board, hand):
    """The code of a state, the code of its mirror image and their length in bits (a rank's code is
    as long mirrored), or (0, 0, 0) for an invalid state (a bad nibble, a hand count too high)."""
    a = 0
    b = 0
    n = 0
    for r in range(N_RANKS):
        t = rank_word(board, hand, r)
        if RANK_TABLES:
            ln = rules[RANK_LEN + t]
            ca = rules[RANK_CODE + t]
            cb = rules[RANK_CODE_MIRRORED + t]
        else:
            ca, cb, ln = rank_codes(rules, t)
        if ln == 0:
            return 0, 0, 0
        a = (a << ln) | ca
        b = (b << ln) | cb
        n += ln
    h = hand_index(rules, hand)
    ln = rules[h + H_LEN]
    if ln < 0:
        return 0, 0, 0
    return (a << ln) | rules[h + H_CODE], (b << ln) | rules[h + H_CODE], n + ln


def encode_state(rules, board, hand):
    """The key of a state, mirror images not folded; 0 for an invalid state."""
    a, _, n = codes(rules, board, hand)
    return a << (KEY_TOP_BIT + 1 - n) if n else 0


def canonical_key(rules, board, hand):
    """The canonical key of a state: the smaller key of it and of its mirror image (when the
    variant folds mirrors); 0 for an invalid state."""
    a, b, n = codes(rules, board, hand)
    if n == 0:
        return 0
    if rules[MIRROR] and b < a:
        a = b
    return a << (KEY_TOP_BIT + 1 - n)


@kernel_options(inline="always")
def board_key(rules, board, hand):
    """The canonical key of a valid state (no checks; one packed table load a rank)."""
    if not RANK_TABLES:
        return canonical_key(rules, board, hand)
    a = 0
    b = 0
    n = 0
    code_shift = rules[PACK_CODE_SHIFT]
    mirror_shift = rules[PACK_MIRROR_SHIFT]
    code_mask = rules[PACK_CODE_MASK]
    for r in range(N_RANKS):
        p = rules[RANK_PACKED + rank_word(board, hand, r)]
        ln = p & PACK_LEN_MASK
        a = (a << ln) | (p >> code_shift)
        b = (b << ln) | ((p >> mirror_shift) & code_mask)
        n += ln
    h = hand_index(rules, hand)
    ln = rules[h + H_LEN]
    a = (a << ln) | rules[h + H_CODE]
    b = (b << ln) | rules[h + H_CODE]
    if rules[MIRROR] and b < a:
        a = b
    return a << (KEY_TOP_BIT + 1 - n - ln)


@kernel_options(inline="always")
def flipped_board_key(rules, after, hand):
    """The canonical key of the state seen from the other side of board ``after`` and hand word
    ``hand`` (the child of a move: the mover's board turned round, its hands swapped), without
    turning the board: the mover's last rank comes first, read from the flipped tables."""
    if not RANK_TABLES:
        board, h = flip_state(rules, after, hand)
        return canonical_key(rules, board, h)
    a = 0
    b = 0
    n = 0
    code_shift = rules[PACK_CODE_SHIFT]
    mirror_shift = rules[PACK_MIRROR_SHIFT]
    code_mask = rules[PACK_CODE_MASK]
    for r in range(N_RANKS):
        p = rules[RANK_PACKED_FLIPPED + rank_word(after, hand, N_RANKS - 1 - r)]
        ln = p & PACK_LEN_MASK
        a = (a << ln) | (p >> code_shift)
        b = (b << ln) | ((p >> mirror_shift) & code_mask)
        n += ln
    h = HAND + HAND_FIELDS * rules[hand_index(rules, hand) + H_SWAP]
    ln = rules[h + H_LEN]
    a = (a << ln) | rules[h + H_CODE]
    b = (b << ln) | rules[h + H_CODE]
    if rules[MIRROR] and b < a:
        a = b
    return a << (KEY_TOP_BIT + 1 - n - ln)


@kernel_options(inline="always")
def decode_key(rules, key):
    """The state ``(board, hand)`` of a key (the inverse of :func:`encode_state` on valid keys)."""
    pos = KEY_TOP_BIT + 1  # bits above pos are read
    peek = rules[CELL_PEEK]
    peek_mask = (1 << peek) - 1
    board = key & 0  # (not the literal 0: numba would compile each caller for it first, then for int64)
    ext = 0
    for i in range(N_CELLS):
        e = rules[CELL_DECODE + ((key >> (pos - peek)) & peek_mask)]
        if EXT and i >= BOARD_CELLS:
            ext |= (e & CELL_MASK) << (CELL_BITS * (i - BOARD_CELLS))
        else:
            board |= (e & CELL_MASK) << (CELL_BITS * i)
        pos -= e >> CELL_BITS
    table = rules[HAND_DECODE]
    if table >= 0:  # the hands' code by one look-up of its next HAND_CODE_BITS bits
        width = rules[HAND_CODE_BITS]
        window = key >> (pos - width) if pos >= width else key << (width - pos)
        hand = rules[table + (window & ((1 << width) - 1))]
        if EXT:
            hand |= ext << EXT_SHIFT
        return board, hand
    hand = 0
    slots = rules[N_SLOTS]
    for k in range(2 * slots):
        most = rules[MAX_HAND + (k - slots if k >= slots else k)]
        if most <= 8:  # the leading ones of the next ``most`` bits, by a table of 8-bit windows
            c = min(most, rules[LEADING_ONES + (((key >> (pos - most)) << (8 - most)) & 255)])
        else:
            c = 0
            while c < most and (key >> (pos - 1 - c)) & 1:
                c += 1
        pos -= c + 1 if c < most else c
        hand |= c << rules[COUNT_SHIFT + k]
    if EXT:
        hand |= ext << EXT_SHIFT
    return board, hand


# --- mirror images and the other side's view ---------------------------------------------------------


def mirror_rank(rules, t):
    """Rank word ``t`` with its files reversed."""
    if RANK_TABLES:
        return rules[RANK_MIRROR + t]
    out = 0
    for f in range(N_FILES):
        out |= ((t >> (CELL_BITS * f)) & CELL_MASK) << (CELL_BITS * (N_FILES - 1 - f))
    return out


def flip_rank(rules, t):
    """Rank word ``t`` seen from the other side: files reversed, colours swapped."""
    if RANK_TABLES:
        return rules[RANK_FLIP + t]
    out = 0
    for f in range(N_FILES):
        n = (t >> (CELL_BITS * f)) & CELL_MASK
        if n:
            n ^= OPPONENT
        out |= n << (CELL_BITS * (N_FILES - 1 - f))
    return out


def mirror_state(rules, board, hand):
    """The left-right mirror image (files reversed) of a state."""
    out = board & ~BOARD_MASK
    h = hand & rules[HAND_MASK] if EXT else hand
    for r in range(N_RANKS):
        out, h = with_rank(out, h, r, mirror_rank(rules, rank_word(board, hand, r)))
    return out, h


def flip_state(rules, board, hand):
    """The same position seen from the other side: the board turned by 180°, colours and hands
    swapped."""
    out = 0
    h = rules[hand_index(rules, hand) + H_SWAP]
    for r in range(N_RANKS):
        out, h = with_rank(out, h, N_RANKS - 1 - r, flip_rank(rules, rank_word(board, hand, r)))
    return out, h


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
