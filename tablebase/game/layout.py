"""Every constant and table the game's kernels read, derived from a variant description.

:func:`derive` turns a :class:`~dobutsu_tb.tablebase.game.variant.Variant` into a dictionary of
names; the kernels of :mod:`~dobutsu_tb.tablebase.game.key`, :mod:`~.rules` and
:mod:`~.unmoves` read these names as module globals, and :class:`~.game.Game` binds a copy of
each kernel to the names of its variant (numba compiles the tables into the machine code). The
module-level names below are the standard game's (``dobutsu``), so that the kernels read as
ordinary functions.

Packed state
------------
Inside the kernels a position is two ``int64`` words, ``(board, hand)``, always normalised: the
side to move plays as Sente, upwards, towards rank index 0::

    board   bits 4*i .. 4*i+3   square i = files * rank + file (rank 0 = rank 1, the top;
                                file 0 = file a): 0 empty, else a piece code, plus 8
                                (OPPONENT) for the opponent's pieces
    hand    bits COUNT_BITS*k   hand count of slot k (the kinds of ``hand_order``) of the side
                                to move, for k < N_SLOTS; then the opponent's, slot N_SLOTS + k

A piece code is ``1 + the kind's index`` in the variant's list of pieces (the standard game:
1 elephant, 2 giraffe, 3 lion, 4 chick, 5 hen).

Key
---
The Huffman-style code of the normalised position, square by square from a1 (docs/rules.md):
an empty square ``0``; a piece ``1``, then its kind's code, then ``s`` (1 for the opponent's);
then the hand counts, each ``1`` repeated count times and a closing ``0`` unless the count is
the largest a hand can hold. The kinds' codes form a complete prefix code in the variant's piece
order, the shortest first: for the standard game's five kinds ``00 01 10 110 111``, so elephant
``100s``, giraffe ``101s``, lion ``110s``, chick ``1110s``, hen ``1111s``. The code is
left-aligned in a positive int64, its first bit at bit 62::

    bit 63                  always 0
    bits 62 .. KEY_SHIFT    the code, at most MAX_KEY_BITS bits (44 for dobutsu, 47 for 5x3)
    bits below KEY_SHIFT    always 0

The canonical key is the smaller of the keys of the position and of its mirror image (files
reversed) when the variant is mirror-symmetric, else the key itself.
"""

from __future__ import annotations

from dobutsu_tb.encoding.binding import Grid

#: Bits of a square in the board word, the side bit of a piece code, the piece code without it.
CELL_BITS = 4
CELL_MASK = (1 << CELL_BITS) - 1
OPPONENT = 8
PIECE_MASK = OPPONENT - 1
#: The key's first code bit.
KEY_TOP_BIT = 62
#: The fewest code bits a key is given: the hash structures need at least 2**16 slots and
#: 8 bits of remainder (encoding/compact_layout.py). The code is left-aligned, so a wider code
#: only moves KEY_SHIFT: every key stays the same int64. Only variants with very few pieces
#: (two lions on a 3x3 board: 11 bits) are widened.
MIN_KEY_BITS = 24
#: Terminal classes (docs/rules.md), for the side to move of a normalised state.
NONTERMINAL, CATCH, TRY = 0, 1, 2
#: Width of the length field of a packed rank code (RANK_PACKED).
PACK_LEN_BITS = 5


def _prefix_code_lengths(n: int) -> list[int]:
    """Lengths of a complete prefix code for n symbols, the shorter ones first."""
    if n <= 1:
        return [0] * n
    d = n.bit_length() - 1
    extra = n - (1 << d)
    return [d] * ((1 << d) - extra) + [d + 1] * (2 * extra)


def _canonical_codes(lengths: list[int]) -> list[int]:
    codes, code, prev = [], 0, lengths[0] if lengths else 0
    for ln in lengths:
        code <<= ln - prev
        codes.append(code)
        code += 1
        prev = ln
    return codes


def piece_codes(variant) -> list[tuple[int, int]]:
    """``(code, length)`` of each kind's Huffman-style code without the side bit, in piece order:
    ``1`` then the kind's code in a complete prefix code (module docstring)."""
    lengths = _prefix_code_lengths(len(variant.pieces))
    return [((1 << ln) | c, ln + 1) for c, ln in zip(_canonical_codes(lengths), lengths)]


def count_code(count: int, most: int) -> tuple[int, int]:
    """``(code, length)`` of a hand count: ``1`` count times, then ``0`` unless count is ``most``."""
    if count < most:
        return ((1 << count) - 1) << 1, count + 1
    return (1 << count) - 1, count


def _max_key_bits(variant, codes) -> int:
    """The longest code of any position of the variant: every way of sharing each kind's pieces
    between the board and the two hands (pieces out of the game only shorten it)."""
    index = {p.letter: k for k, p in enumerate(variant.pieces)}
    slots = variant.hand_order
    army = variant.army
    best_board = {}  # per base kind: the longest extra bits of n pieces on the board
    for p in variant.pieces:
        if variant.base_of[p.letter] != p.letter:
            continue
        forms = [p.letter] + ([p.promotes_to] if p.promotes_to else [])
        best_board[p.letter] = max(codes[index[f]][1] + 1 for f in forms) - 1  # code + side bit, less the empty 0
    total = variant.cells
    for letter, n in army.items():
        most = n
        options = []
        for on_board in range(n + 1):
            rest = n - on_board
            if letter in slots:
                hand = max(count_code(s, most)[1] + count_code(rest - s, most)[1] for s in range(rest + 1))
                hand -= 2 * count_code(0, most)[1]
            else:
                hand = 0
            options.append(on_board * best_board[letter] + hand)
        total += max(options)
    for letter in slots:
        total += 2 * count_code(0, army[letter])[1]
    return total


def derive(variant) -> dict:
    """The constants and tables of a variant's kernels, by name (the names of this module).

    Parameters
    ----------
    variant : Variant

    Returns
    -------
    dict of str to int, bool, list of int or Grid
        One-dimensional tables are lists, two- and three-dimensional ones
        :class:`~dobutsu_tb.encoding.binding.Grid` tables (plain Python indexes both fastest;
        the jitted binding turns them into int64 arrays). No numpy: probing imports none. The
        same dictionary for variants with equal rules (made once; do not change it).
    """
    known = _DERIVED.get(variant.canonical_json)
    if known is not None:
        return known
    t = _DERIVED[variant.canonical_json] = _derive(variant)
    return t


#: derive()'s tables by variant (canonical JSON): made once per process.
_DERIVED: dict = {}


def _derive(variant) -> dict:
    files, ranks, cells = variant.files, variant.ranks, variant.cells
    kinds = variant.pieces
    n_kinds = len(kinds)
    index = {p.letter: k + 1 for k, p in enumerate(kinds)}  # letter -> piece code
    codes = piece_codes(variant)
    slots = variant.hand_order
    n_slots = len(slots)
    army = variant.army
    max_hand = [army[s] for s in slots]
    count_bits = max(1, max(max_hand, default=1).bit_length())
    hand_bits = 2 * n_slots * count_bits
    t = {}
    t["N_FILES"], t["N_RANKS"], t["N_CELLS"], t["N_KINDS"] = files, ranks, cells, n_kinds
    t["RANK_BITS"] = CELL_BITS * files
    t["RANK_MASK"] = (1 << t["RANK_BITS"]) - 1
    t["BOARD_BITS"] = CELL_BITS * cells
    t["BOARD_MASK"] = (1 << t["BOARD_BITS"]) - 1
    t["ROYAL"] = index[variant.royal.letter]
    t["MIRROR"] = bool(variant.mirror_symmetric)
    t["DROPS"] = bool(n_slots)

    # --- hands ------------------------------------------------------------------------------
    t["N_SLOTS"], t["COUNT_BITS"], t["COUNT_MASK"] = n_slots, count_bits, (1 << count_bits) - 1
    t["HAND_BITS"], t["HAND_MASK"] = hand_bits, (1 << hand_bits) - 1
    t["SLOT_PIECE"] = [index[s] for s in slots] or [0]
    t["MAX_HAND"] = max_hand or [0]
    hand_slot = [-1] * 16  # a captured piece's slot in the captor's hand (its base kind), or -1
    dropped_slot = [-1] * 16  # the slot a piece of this code on the board came from by a drop, or -1
    for p in kinds:
        base = variant.base_of[p.letter]
        for side in (0, OPPONENT):
            if base in slots:
                hand_slot[index[p.letter] | side] = slots.index(base)
            if p.letter in slots:
                dropped_slot[index[p.letter] | side] = slots.index(p.letter)
    t["HAND_SLOT"], t["DROPPED_SLOT"] = hand_slot, dropped_slot
    t["BASE"] = [index[variant.base_of[p.letter]] for p in kinds]
    t["BASE"] = [0] + t["BASE"] + [0] * (16 - 1 - n_kinds)
    #: The most pieces of each base kind (by code) in any position, for unmoves of captures that
    #: leave the game.
    army_by_code = [0] * 16
    for letter, n in army.items():
        army_by_code[index[letter]] = n
    t["ARMY"] = army_by_code

    # --- key codes ----------------------------------------------------------------------------
    cell_code = [(0, 1)] + [(0, 0)] * 15  # (code, length) per nibble; length 0 = invalid
    for k in range(n_kinds):
        c, ln = codes[k]
        cell_code[k + 1] = (c << 1, ln + 1)
        cell_code[(k + 1) | OPPONENT] = ((c << 1) | 1, ln + 1)
    cell_peek = max(ln for _, ln in cell_code)
    decode = [0] * (1 << cell_peek)
    for nib, (c, ln) in enumerate(cell_code):
        if ln:
            for low in range(1 << (cell_peek - ln)):
                decode[(c << (cell_peek - ln)) | low] = nib | (ln << CELL_BITS)
    t["CELL_PEEK"], t["CELL_DECODE"] = cell_peek, decode
    most_count = max(max_hand, default=0)
    count_peek = max(1, most_count)
    count_decode = []
    for m in range(most_count + 1):  # per largest count m of a slot: peek -> count | length << 4
        row = [0] * (1 << count_peek)
        for c in range(m + 1):
            code, ln = count_code(c, m)
            for low in range(1 << (count_peek - ln)):
                row[(code << (count_peek - ln)) | low] = c | (ln << 4)
        count_decode.append(row)
    t["COUNT_PEEK"] = count_peek
    t["COUNT_DECODE"] = Grid(count_decode)
    t["MAX_KEY_BITS"] = max(_max_key_bits(variant, codes), MIN_KEY_BITS)
    t["KEY_SHIFT"] = KEY_TOP_BIT + 1 - t["MAX_KEY_BITS"]

    # --- a rank's code, its mirror image and its flip, for every rank word -----------------------
    # Built a file at a time: adding file k (the word's next nibble n above the first k files,
    # whose code comes after theirs) takes entry r of the first k files to n * 16**k + r.
    code, length, valid, mirror, flip = [0], [0], [True], [0], [0]
    for _ in range(files):
        code = [(c << cell_code[n][1]) | cell_code[n][0] for n in range(16) for c in code]
        length = [ln + cell_code[n][1] for n in range(16) for ln in length]
        valid = [ok and cell_code[n][1] > 0 for n in range(16) for ok in valid]
        mirror = [(m << CELL_BITS) | n for n in range(16) for m in mirror]
        flip = [(m << CELL_BITS) | (n ^ OPPONENT if n else 0) for n in range(16) for m in flip]
    code = [c if ok else 0 for c, ok in zip(code, valid)]
    length = [ln if ok else 0 for ln, ok in zip(length, valid)]
    code_mirrored = [code[m] for m in mirror]
    rank_code_bits = files * cell_peek
    pack_mirror_shift = PACK_LEN_BITS
    pack_code_shift = PACK_LEN_BITS + rank_code_bits
    packed = [(c << pack_code_shift) | (cm << pack_mirror_shift) | ln
              for c, cm, ln in zip(code, code_mirrored, length)]
    t["RANK_CODE"], t["RANK_LEN"] = code, length
    t["RANK_MIRROR"], t["RANK_FLIP"] = mirror, flip
    t["RANK_CODE_MIRRORED"] = code_mirrored
    t["PACK_CODE_SHIFT"], t["PACK_MIRROR_SHIFT"] = pack_code_shift, pack_mirror_shift
    t["PACK_CODE_MASK"], t["PACK_LEN_MASK"] = (1 << rank_code_bits) - 1, (1 << PACK_LEN_BITS) - 1
    t["RANK_PACKED"] = packed
    t["RANK_PACKED_FLIPPED"] = [packed[f] for f in flip]

    # --- the hands' code, for every hand word: a slot at a time, as the ranks' -----------------------
    hcode, hlen = [0], [0]
    for k in range(2 * n_slots):
        m = max_hand[k % n_slots]
        table = [count_code(c, m) if c <= m else (0, -1) for c in range(1 << count_bits)]
        hcode = [(h << ln) | c if ln >= 0 else 0 for c, ln in table for h in hcode]
        hlen = [h + ln if ln >= 0 and h >= 0 else -1 for _, ln in table for h in hlen]
    hcode = [c if ln >= 0 else 0 for c, ln in zip(hcode, hlen)]
    half = n_slots * count_bits
    low = (1 << half) - 1
    hswap = [(h >> half) | ((h & low) << half) for h in range(1 << hand_bits)]
    t["HAND_CODE"] = hcode
    t["HAND_LEN"] = hlen  # -1: a count above the largest hand
    t["HAND_SWAP"] = hswap
    t["HAND_CODE_SWAPPED"] = [hcode[h] for h in hswap]

    # --- moves --------------------------------------------------------------------------------
    targets = [[0] * cells for _ in range(16)]
    sources = [[0] * cells for _ in range(16)]
    for p in kinds:
        c = index[p.letter]
        for i in range(cells):
            rk, fl = divmod(i, files)
            for df, dr in p.steps:
                rr, ff = rk - dr, fl + df  # forward (+rank offset) is towards rank index 0
                if 0 <= rr < ranks and 0 <= ff < files:
                    j = files * rr + ff
                    targets[c][i] |= 1 << j
                    sources[c][j] |= 1 << i
    count = [[bin(targets[p][i]).count("1") for i in range(cells)] for p in range(16)]
    max_targets = max(1, max(max(row) for row in count))
    target_list = [[[j for j in range(cells) if (targets[p][i] >> j) & 1] for i in range(cells)] for p in range(16)]
    target_list = [[js + [0] * (max_targets - len(js)) for js in row] for row in target_list]
    enemy = [[0] * cells for _ in range(16)]
    for p in range(16):
        for i in range(cells):
            for j in range(cells):
                if (targets[p][cells - 1 - i] >> j) & 1:
                    enemy[p][i] |= 1 << (cells - 1 - j)
    t["TARGETS"], t["SOURCES"], t["ENEMY_TARGETS"] = Grid(targets), Grid(sources), Grid(enemy)
    t["TARGET_COUNT"], t["TARGET_LIST"], t["MAX_TARGETS"] = Grid(count), Grid(target_list), max_targets
    far = [sum(1 << (files * rk + f) for rk in range(n) for f in range(files)) for n in range(ranks + 1)]
    promotes, zone = [0] * 16, [0] * 16
    for p in kinds:
        if p.promotes_to:
            promotes[index[p.letter]] = index[p.promotes_to]
            zone[index[p.letter]] = far[p.promotion_ranks]
    t["PROMOTES"], t["PROMO_ZONE"] = promotes, zone
    #: Promoted code -> the code that promotes to it (0 for kinds that are no promotion).
    demoted = [0] * 16
    for c, q in enumerate(promotes):
        if q:
            demoted[q] = c
    t["DEMOTED"] = demoted
    # The enemy pieces an unmove of a capture can put back, in order: per hand slot its kind and
    # that kind's promotion (the captor's hand gave it back), then the kinds whose captures leave
    # the game (their slot -1: put back only while the position holds fewer than the army).
    restore = []
    for s in slots:
        restore.append((index[s], slots.index(s)))
        if variant.kind(s).promotes_to:
            restore.append((index[variant.kind(s).promotes_to], slots.index(s)))
    for p in kinds:
        if not p.royal and variant.base_of[p.letter] not in slots:
            restore.append((index[p.letter], -1))
    t["N_RESTORE"] = len(restore)
    t["RESTORE_CODE"] = [c for c, _ in restore] or [0]
    t["RESTORE_SLOT"] = [s for _, s in restore] or [0]
    drop_cells = []
    all_cells = (1 << cells) - 1
    for s in slots:
        forbidden = sum(far[r] ^ far[r - 1] for r in variant.kind(s).forbidden_drop_ranks)
        drop_cells.append(all_cells & ~forbidden)
    t["DROP_CELLS"] = drop_cells or [0]
    t["TRY_ZONE"] = far[1] if variant.try_rule else 0  # our royal there, safe: we win (a try)
    t["HOME_ZONE"] = (all_cells ^ far[ranks - 1]) if variant.try_rule else 0  # the enemy royal there: they tried
    t["MIRROR_CELL"] = [files * (i // files) + files - 1 - i % files for i in range(cells)]
    own_max = sum(army.values()) - 1  # every piece but the enemy royal
    t["MAX_MOVES"] = max(1, own_max * max_targets + n_slots * cells)
    t["MAX_UNMOVES"] = max(1, own_max * (1 + 2 * max_targets * (1 + len(restore))))
    return t


def check_layout(variant) -> None:
    """Refuse a variant whose key or hand field does not fit the kernels.

    Raises
    ------
    VariantError
        If the key needs more than ``63 - CELL_PEEK`` bits, or the hand field more than 16.
    """
    from dobutsu_tb.tablebase.game.variant import MAX_HAND_BITS, VariantError

    codes = piece_codes(variant)
    slots = variant.hand_order
    most = max((variant.army[s] for s in slots), default=1)
    peek = max(max(ln for _, ln in codes) + 1, most)  # the bits decode_key reads at once
    hand_bits = 2 * len(slots) * max(1, most.bit_length())
    if hand_bits > MAX_HAND_BITS:
        raise VariantError(f"hand_order: {len(slots)} kinds in hand with up to {most} each need a {hand_bits}-bit "
                           f"hand field; at most {MAX_HAND_BITS} bits are supported")
    bits = _max_key_bits(variant, codes)
    if bits > KEY_TOP_BIT + 1 - peek:
        raise VariantError(f"pieces: a position's key needs up to {bits} bits; at most {KEY_TOP_BIT + 1 - peek} fit "
                           f"a 64-bit key with this piece set")


def _standard() -> dict:
    from dobutsu_tb.tablebase.game.variant import standard_variant

    return derive(standard_variant())


# The standard game's names (the kernels' defaults; each variant binds its own: module docstring).
_S = _standard()
N_FILES: int = _S["N_FILES"]  #: files (3)
N_RANKS: int = _S["N_RANKS"]  #: ranks (4)
N_CELLS: int = _S["N_CELLS"]  #: squares (12)
N_KINDS: int = _S["N_KINDS"]  #: piece kinds, promoted ones included (5)
RANK_BITS: int = _S["RANK_BITS"]  #: bits of one rank of the board word
RANK_MASK: int = _S["RANK_MASK"]
BOARD_BITS: int = _S["BOARD_BITS"]
BOARD_MASK: int = _S["BOARD_MASK"]
ROYAL: int = _S["ROYAL"]  #: the royal kind's piece code (the lion, 3)
MIRROR: bool = _S["MIRROR"]  #: fold mirror images (the variant is mirror-symmetric)
DROPS: bool = _S["DROPS"]  #: captured pieces go to hand
N_SLOTS: int = _S["N_SLOTS"]  #: kinds that can be in hand (3: chick, elephant, giraffe)
COUNT_BITS: int = _S["COUNT_BITS"]  #: bits of one hand count
COUNT_MASK: int = _S["COUNT_MASK"]
HAND_BITS: int = _S["HAND_BITS"]  #: bits of the hand word (both hands)
HAND_MASK: int = _S["HAND_MASK"]
SLOT_PIECE: list = _S["SLOT_PIECE"]  #: hand slot -> the piece code dropped from it
MAX_HAND: list = _S["MAX_HAND"]  #: hand slot -> the most pieces one hand can hold
HAND_SLOT: list = _S["HAND_SLOT"]  #: nibble -> the captor's hand slot of a captured piece, or -1
DROPPED_SLOT: list = _S["DROPPED_SLOT"]  #: nibble -> the slot a piece comes from when dropped, or -1
BASE: list = _S["BASE"]  #: piece code -> its unpromoted kind's code
ARMY: list = _S["ARMY"]  #: unpromoted piece code -> the most pieces of it in a position
CELL_PEEK: int = _S["CELL_PEEK"]  #: bits read at once to decode one square
CELL_DECODE: list = _S["CELL_DECODE"]  #: CELL_PEEK bits -> nibble | code length << 4
COUNT_PEEK: int = _S["COUNT_PEEK"]  #: bits read at once to decode one hand count
COUNT_DECODE: Grid = _S["COUNT_DECODE"]  #: [largest count, COUNT_PEEK bits] -> count | length << 4
MAX_KEY_BITS: int = _S["MAX_KEY_BITS"]  #: the longest code of any position (44)
KEY_SHIFT: int = _S["KEY_SHIFT"]  #: bits below the code in a key (19)
RANK_CODE: list = _S["RANK_CODE"]  #: rank bits -> code (0 for an invalid rank)
RANK_LEN: list = _S["RANK_LEN"]  #: rank bits -> code length (0 for an invalid rank)
RANK_MIRROR: list = _S["RANK_MIRROR"]  #: rank bits -> the rank mirrored
RANK_FLIP: list = _S["RANK_FLIP"]  #: rank bits -> the rank seen from the other side (mirrored, colours swapped)
RANK_CODE_MIRRORED: list = _S["RANK_CODE_MIRRORED"]  #: rank bits -> its mirror image's code
PACK_CODE_SHIFT: int = _S["PACK_CODE_SHIFT"]  #: RANK_PACKED: code << PACK_CODE_SHIFT | mirrored code
PACK_MIRROR_SHIFT: int = _S["PACK_MIRROR_SHIFT"]  #: ... << PACK_MIRROR_SHIFT | length
PACK_CODE_MASK: int = _S["PACK_CODE_MASK"]
PACK_LEN_MASK: int = _S["PACK_LEN_MASK"]
RANK_PACKED: list = _S["RANK_PACKED"]  #: rank bits -> code, mirrored code and length in one int64
RANK_PACKED_FLIPPED: list = _S["RANK_PACKED_FLIPPED"]  #: the same for the rank turned for the other side
HAND_CODE: list = _S["HAND_CODE"]  #: hand word -> code
HAND_LEN: list = _S["HAND_LEN"]  #: hand word -> code length (-1 for a count above the largest hand)
HAND_SWAP: list = _S["HAND_SWAP"]  #: hand word -> the hands swapped
HAND_CODE_SWAPPED: list = _S["HAND_CODE_SWAPPED"]  #: hand word -> the code of the hands swapped
TARGETS: Grid = _S["TARGETS"]  #: [piece code, square] -> squares it reaches (bit mask)
SOURCES: Grid = _S["SOURCES"]  #: [piece code, square] -> squares from which it reaches there
ENEMY_TARGETS: Grid = _S["ENEMY_TARGETS"]  #: the same for an opponent's piece, which plays downwards
TARGET_COUNT: Grid = _S["TARGET_COUNT"]  #: [piece code, square] -> number of TARGETS
TARGET_LIST: Grid = _S["TARGET_LIST"]  #: [piece code, square, k] -> the k-th target, ascending
MAX_TARGETS: int = _S["MAX_TARGETS"]
PROMOTES: list = _S["PROMOTES"]  #: piece code -> the code it promotes to, or 0
PROMO_ZONE: list = _S["PROMO_ZONE"]  #: piece code -> squares where a move promotes it
DEMOTED: list = _S["DEMOTED"]  #: promoted code -> the code that promotes to it, or 0
DROP_CELLS: list = _S["DROP_CELLS"]  #: hand slot -> squares it may be dropped on
TRY_ZONE: int = _S["TRY_ZONE"]  #: squares where our royal, safe from capture, has tried (the far rank)
HOME_ZONE: int = _S["HOME_ZONE"]  #: squares where the enemy royal has tried (our home rank)
MIRROR_CELL: list = _S["MIRROR_CELL"]  #: square -> its mirror image
N_RESTORE: int = _S["N_RESTORE"]  #: enemy kinds an unmove of a capture can put back
RESTORE_CODE: list = _S["RESTORE_CODE"]  #: k -> the piece code put back
RESTORE_SLOT: list = _S["RESTORE_SLOT"]  #: k -> the mover's hand slot it is taken from, or -1 (it had left the game)
MAX_MOVES: int = _S["MAX_MOVES"]  #: most moves of one position
MAX_UNMOVES: int = _S["MAX_UNMOVES"]  #: most unmoves of one position
del _S
