"""Packed dobutsu shogi states and their Huffman-style 64-bit keys (SPEC §1.3).

Packed state
------------
Inside the kernels a position is one ``int64``, the *state*, always normalised (the side to
move plays as Sente, upwards, towards rank 1)::

    bits 4*i .. 4*i+3   cell i of the board, i = 3*rank + file, rank 0 = rank 1 (top),
                        file 0 = file a; so cells run a1 b1 c1 a2 ... c4
    bits 48 .. 59       hand counts, 2 bits each, in the order: side to move's chick,
                        elephant, giraffe, then the opponent's chick, elephant, giraffe

A cell nibble is ``0`` for an empty square, or a piece code ``1`` elephant, ``2`` giraffe,
``3`` lion, ``4`` chick, ``5`` hen for the side to move, plus ``8`` (:data:`OPPONENT`) for the
opponent's pieces.

Key
---
The Huffman-style bit string of SPEC §1.3 (empty ``0``; elephant ``100s``, giraffe ``101s``,
lion ``110s``, chick ``1110s``, hen ``1111s`` with ``s`` = 1 for the opponent; hand counts
``0``/``10``/``11``), left-aligned so that its first bit is bit 62::

    bit 63              always 0 (keys are positive int64)
    bits 62 .. 19       the code, at most MAX_KEY_BITS = 44 bits, left-aligned
    bits 18 .. 0        always 0 (KEY_SHIFT = 19)

The *canonical* key of a position is the smaller of the keys of the normalised state and of
its mirror image.

The kernels are table driven: a rank (three cells, 12 bits) or the hand field (12 bits) indexes
a 4096-entry table of codes and code lengths, so a key costs five look-ups. They are plain
functions that numba compiles (:mod:`dobutsu_tb.tablebase.game.kernels` holds the jitted
versions); called directly they run as Python, which is how probing uses them without numba.
"""

from __future__ import annotations

import numpy as np

#: Piece codes of the side to move; the opponent's are these plus :data:`OPPONENT`.
EMPTY, ELEPHANT, GIRAFFE, LION, CHICK, HEN = 0, 1, 2, 3, 4, 5
OPPONENT = 8
#: Hand slot order (also the order of the hand counts in a key): chick, elephant, giraffe.
HAND_PIECES = (CHICK, ELEPHANT, GIRAFFE)
N_CELLS = 12
N_RANKS = 4
#: Bits of one cell nibble; the piece code without its side bit.
CELL_BITS = 4
CELL_MASK = (1 << CELL_BITS) - 1
PIECE_MASK = OPPONENT - 1
#: Bits of one hand count, and the most pieces of one kind in one hand.
COUNT_BITS = 2
COUNT_MASK = (1 << COUNT_BITS) - 1
MAX_IN_HAND = 2
#: Bits of one rank (three cell nibbles) and of the board.
RANK_BITS = 12
RANK_MASK = (1 << RANK_BITS) - 1
BOARD_BITS = N_RANKS * RANK_BITS
BOARD_MASK = (1 << BOARD_BITS) - 1
HAND_SHIFT = BOARD_BITS
HAND_MASK = (1 << 12) - 1
#: Largest number of code bits any position needs (SPEC §1.3).
MAX_KEY_BITS = 44
#: The code's first bit is bit 62; bits below KEY_SHIFT are always zero.
KEY_TOP_BIT = 62
KEY_SHIFT = KEY_TOP_BIT + 1 - MAX_KEY_BITS

__kernels__ = ("encode_state", "canonical_key", "decode_key", "mirror_state", "flip_state", "_codes", "join_codes")

_PIECE_CODE = {ELEPHANT: (0b100, 3), GIRAFFE: (0b101, 3), LION: (0b110, 3),
               CHICK: (0b1110, 4), HEN: (0b1111, 4)}


def _cell_code(nibble: int) -> tuple[int, int]:
    """Return ``(code, length)`` of one cell nibble, or ``(0, 0)`` for an invalid nibble."""
    if nibble == EMPTY:
        return 0, 1
    piece, side = nibble & 7, nibble >> 3
    if piece not in _PIECE_CODE:
        return 0, 0
    code, length = _PIECE_CODE[piece]
    return (code << 1) | side, length + 1


def _rank_tables():
    """Code, code length, mirror image and flipped rank of every 12-bit rank (numpy, vectorised
    over the 4096 ranks: this runs at every import)."""
    cell = np.array([_cell_code(nib) for nib in range(16)], np.int64)  # (code, length) per nibble
    t = np.arange(4096, dtype=np.int64)
    cells = [(t >> (CELL_BITS * f)) & CELL_MASK for f in range(3)]
    code = np.zeros(4096, np.int64)
    length = np.zeros(4096, np.int64)
    for nib in cells:
        code = (code << cell[nib, 1]) | cell[nib, 0]
        length += cell[nib, 1]
    valid = np.all([cell[nib, 1] > 0 for nib in cells], axis=0)
    code, length = np.where(valid, code, 0), np.where(valid, length, 0)
    mirror = cells[2] | cells[1] << 4 | cells[0] << 8
    swapped = [np.where(nib != 0, nib ^ OPPONENT, 0) for nib in cells]
    flip = swapped[2] | swapped[1] << 4 | swapped[0] << 8
    return code, length, mirror, flip


def _hand_tables():
    """Code, code length and swapped hands of every 12-bit hand field (vectorised)."""
    h = np.arange(4096, dtype=np.int64)
    counts = [(h >> (COUNT_BITS * k)) & COUNT_MASK for k in range(6)]
    count_code = np.array([0, 0b10, 0b11, 0], np.int64)
    count_len = np.array([1, 2, 2, 0], np.int64)
    code = np.zeros(4096, np.int64)
    length = np.zeros(4096, np.int64)
    for k in counts:
        code = (code << count_len[k]) | count_code[k]
        length += count_len[k]
    valid = np.all([k != 3 for k in counts], axis=0)
    swap = (h >> 6) | ((h & 63) << 6)
    return np.where(valid, code, 0), np.where(valid, length, 0), swap


_RANK = _rank_tables()
_HAND = _hand_tables()
_RANK_CODE_MIRRORED = _RANK[0][_RANK[2]]  # a rank's code length is the same mirrored
_RANK_PACKED = (_RANK[0] << 19) | (_RANK_CODE_MIRRORED << 4) | _RANK[1]

# The tables below are Python lists: the kernels index them fast when they run as plain Python
# (probing), and jit_kernels hands numba int64 arrays of them.

#: Per 12-bit rank: its code and code length (0 for an invalid rank), its mirror image, and
#: the rank seen from the other side (cells reversed, colours swapped).
RANK_CODE, RANK_LEN, RANK_MIRROR, RANK_FLIP = (t.tolist() for t in _RANK)
#: Per 12-bit hand field: its code and code length (0 for a count of 3), and the hands swapped.
HAND_CODE, HAND_LEN, HAND_SWAP = (t.tolist() for t in _HAND)
#: The code of a rank's mirror image.
RANK_CODE_MIRRORED = _RANK_CODE_MIRRORED.tolist()
#: A rank's code, its mirror image's code and its length in one int64 (one table load), for
#: keys joined from ranks (:func:`join_codes`)::
#:
#:     bits 33 .. 19   code          bits 18 .. 4   mirrored code          bits 3 .. 0   length
PACK_CODE_SHIFT, PACK_MIRROR_SHIFT, PACK_CODE_MASK, PACK_LEN_MASK = 19, 4, (1 << 15) - 1, 15
RANK_PACKED = _RANK_PACKED.tolist()
#: The same after the board is turned for the other side (what a move's child, which is
#: flipped, shows of the mover's rank); lengths do not change.
RANK_PACKED_FLIPPED = _RANK_PACKED[_RANK[3]].tolist()
#: The code of a hand field once the hands are swapped.
HAND_CODE_SWAPPED = _HAND[0][_HAND[2]].tolist()


def _codes(state):
    """The code of ``state``, the code of its mirror image and their length in bits (a rank's
    code is as long mirrored), or (0, 0, 0) for an invalid state."""
    a = 0
    b = 0
    n = 0
    for r in range(N_RANKS):
        t = (state >> (RANK_BITS * r)) & RANK_MASK
        ln = RANK_LEN[t]
        if ln == 0:
            return 0, 0, 0
        a = (a << ln) | RANK_CODE[t]
        b = (b << ln) | RANK_CODE_MIRRORED[t]
        n += ln
    h = (state >> HAND_SHIFT) & HAND_MASK
    ln = HAND_LEN[h]
    if ln == 0:
        return 0, 0, 0
    return (a << ln) | HAND_CODE[h], (b << ln) | HAND_CODE[h], n + ln


def join_codes(p0, p1, p2, p3, hand_code, hand_len):
    """The canonical key of four packed ranks (:data:`RANK_PACKED`), in key order, followed by a
    hand code: the smaller of the key and of its mirror image's key, left-aligned."""
    l1, l2, l3 = p1 & PACK_LEN_MASK, p2 & PACK_LEN_MASK, p3 & PACK_LEN_MASK
    a = p0 >> PACK_CODE_SHIFT
    a = (a << l1) | (p1 >> PACK_CODE_SHIFT)
    a = (a << l2) | (p2 >> PACK_CODE_SHIFT)
    a = (a << l3) | (p3 >> PACK_CODE_SHIFT)
    b = (p0 >> PACK_MIRROR_SHIFT) & PACK_CODE_MASK
    b = (b << l1) | ((p1 >> PACK_MIRROR_SHIFT) & PACK_CODE_MASK)
    b = (b << l2) | ((p2 >> PACK_MIRROR_SHIFT) & PACK_CODE_MASK)
    b = (b << l3) | ((p3 >> PACK_MIRROR_SHIFT) & PACK_CODE_MASK)
    a = (a << hand_len) | hand_code
    b = (b << hand_len) | hand_code
    n = (p0 & PACK_LEN_MASK) + l1 + l2 + l3 + hand_len
    return (b if b < a else a) << (KEY_TOP_BIT + 1 - n)


def encode_state(state):
    """Key of a packed state (no mirror folding); 0 if the state has an invalid nibble/count."""
    a, _, n = _codes(state)
    return a << (KEY_TOP_BIT + 1 - n) if n else 0


def canonical_key(state):
    """Canonical key of a packed state: the smaller key of it and of its mirror image (0 if invalid)."""
    a, b, n = _codes(state)
    return (b if b < a else a) << (KEY_TOP_BIT + 1 - n) if n else 0


def decode_key(key):
    """Packed state of a key (the inverse of :func:`encode_state` on valid keys)."""
    pos = KEY_TOP_BIT
    state = 0
    for i in range(N_CELLS):
        if (key >> pos) & 1 == 0:
            pos -= 1
            continue
        b1 = (key >> (pos - 1)) & 1
        b2 = (key >> (pos - 2)) & 1
        if b1 == 0:
            piece = ELEPHANT + b2
            pos -= 3
        elif b2 == 0:
            piece = LION
            pos -= 3
        else:
            piece = CHICK + ((key >> (pos - 3)) & 1)
            pos -= 4
        side = (key >> pos) & 1
        pos -= 1
        state |= (piece | (side * OPPONENT)) << (CELL_BITS * i)
    for k in range(6):
        if (key >> pos) & 1 == 0:
            pos -= 1
        else:
            count = 1 + ((key >> (pos - 1)) & 1)
            pos -= 2
            state |= count << (HAND_SHIFT + COUNT_BITS * k)
    return state


def mirror_state(state):
    """Left-right mirror image (files a and c swapped) of a packed state."""
    out = state & ~BOARD_MASK
    for r in range(N_RANKS):
        t = (state >> (RANK_BITS * r)) & RANK_MASK
        out |= RANK_MIRROR[t] << (RANK_BITS * r)
    return out


def flip_state(state):
    """The same position seen from the other side: board rotated by 180°, colours and hands swapped."""
    out = HAND_SWAP[(state >> HAND_SHIFT) & HAND_MASK] << HAND_SHIFT
    for r in range(N_RANKS):
        t = (state >> (RANK_BITS * r)) & RANK_MASK
        out |= RANK_FLIP[t] << (RANK_BITS * (N_RANKS - 1 - r))
    return out


# --- array API (the jitted kernels, in parallel) ---------------------------------------------


def as_int64_array(values, name: str) -> np.ndarray:
    """``values`` as a contiguous one-dimensional int64 array.

    Raises
    ------
    ValueError
        If ``values`` is not one-dimensional or holds anything but non-negative 64-bit integers.
    """
    arr = np.ascontiguousarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype != np.int64:
        if arr.size and (not np.issubdtype(arr.dtype, np.integer) or arr.min() < 0
                         or arr.max() > np.iinfo(np.int64).max):
            raise ValueError(f"{name} must hold non-negative 64-bit integers")
        arr = arr.astype(np.int64)
    return arr


def encode(states) -> np.ndarray:
    """Keys of packed states, without mirror folding.

    Parameters
    ----------
    states : array_like of int64, shape (n,)
        Packed normalised states (layout in the module docstring).

    Returns
    -------
    numpy.ndarray of int64, shape (n,)
        The keys (SPEC §1.3).

    Raises
    ------
    ValueError
        If a state holds an invalid cell nibble or a hand count of 3.
    """
    return _keys_of(states, False)


def canonical(states) -> np.ndarray:
    """Canonical keys of packed states: the smaller key of a state and of its mirror image.

    Parameters
    ----------
    states : array_like of int64, shape (n,)
        Packed normalised states.

    Returns
    -------
    numpy.ndarray of int64, shape (n,)

    Raises
    ------
    ValueError
        If a state holds an invalid cell nibble or a hand count of 3.
    """
    return _keys_of(states, True)


def _keys_of(states, fold_mirror: bool) -> np.ndarray:
    from dobutsu_tb.tablebase.game import kernels

    states = as_int64_array(states, "states")
    out = np.empty(states.shape[0], np.int64)
    kernels.encode_many(states, out, fold_mirror)
    if out.size and out.min() == 0:
        raise ValueError(f"invalid packed state {int(states[np.argmin(out)]):#x}")
    return out


def decode(keys) -> np.ndarray:
    """Packed states of keys (the inverse of :func:`encode`).

    Parameters
    ----------
    keys : array_like of int64, shape (n,)

    Returns
    -------
    numpy.ndarray of int64, shape (n,)

    Raises
    ------
    ValueError
        If a key is not the key of any state (checked by encoding the result again).
    """
    from dobutsu_tb.tablebase.game import kernels

    keys = as_int64_array(keys, "keys")
    out = np.empty(keys.shape[0], np.int64)
    kernels.decode_many(keys, out)
    back = np.empty_like(out)
    kernels.encode_many(out, back, False)
    bad = np.flatnonzero(back != keys)
    if bad.size:
        raise ValueError(f"{int(keys[bad[0]]):#x} is not a valid position key")
    return out


def mirror(states) -> np.ndarray:
    """Mirror images (files a and c swapped) of packed states; shape and dtype as the input."""
    states = as_int64_array(states, "states")
    return np.array([mirror_state(s) for s in states], np.int64)


def flip(states) -> np.ndarray:
    """Packed states seen from the other side (rotated 180°, colours and hands swapped)."""
    states = as_int64_array(states, "states")
    return np.array([flip_state(s) for s in states], np.int64)
