"""Every constant and table the game's kernels read, derived from a variant description.

The kernels are compiled once per board shape (files x ranks), never per variant: a variant's
rules reach them at run time as one ``int64`` array, the *rules array* (:func:`rules_array`),
which every game kernel takes as its first argument, ``rules``. What the shape fixes, the size of
the board and where each table starts in that array, are the *shape constants*
(:func:`shape_names`): module globals that :class:`~.game.Game` binds per shape (numba compiles
them into the code, so loops over squares and ranks have constant bounds, and the paths of boards
larger than one word vanish from the kernels of smaller ones). The module-level values below are
the standard game's shape (3x4), so that the kernels read as ordinary functions.

Packed state
------------
Inside the kernels a position is two ``int64`` words, ``(board, hand)``, always normalised: the
side to move plays as Sente, upwards, towards rank index 0::

    board   bits 4*i .. 4*i+3   square i = files * rank + file (rank 0 = rank 1, the top;
                                file 0 = file a), for the first BOARD_CELLS squares (whole
                                ranks, at most 15 squares: the sign bit stays clear): 0 empty,
                                else a piece code, plus 8 (OPPONENT) for the opponent's pieces
    hand    COUNT_SHIFT[k] ..   hand count of slot k (the kinds of ``hand_order``) of the side
                                to move, for k < N_SLOTS, as wide as the largest count of its
                                kind needs (COUNT_FIELD[k] its mask); then the opponent's, count
                                N_SLOTS + k, in the same order (at most 16 bits: HAND_MASK)
            bits EXT_SHIFT+4*j  on boards of more than 15 squares, square BOARD_CELLS + j, as
                                in the board word (whole ranks too)

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

Rules array
-----------
One int64 array (a list in plain Python), indexed by the names of this module::

    [0, HEADER)                 scalars: ROYAL, MIRROR, N_SLOTS, ... (each name its index)
    [SLOT_PIECE, FIXED_END)     small tables of a fixed size (16 entries a piece code, 8 a hand
                                slot, 64 for CELL_DECODE)
    [TARGETS, HAND)             the tables sized by the shape (shape constants give each start):
                                16 x N_CELLS for the moves, 16 ** N_FILES a rank table
    [HAND, ...)                 the hands' table, 2 ** HAND_BITS entries of HAND_FIELDS values
                                (code, length, the hands swapped, their code), interleaved
    [rules[HAND_DECODE], ...)   the hands' code's next HAND_CODE_BITS bits -> the hand word
                                (2 ** HAND_CODE_BITS entries; none above MAX_HAND_DECODE_BITS)

The rules array is what a build is specialised on at run time: changing a rule, the army or
the start changes the array, never the compiled code.
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
PACK_LEN_MASK = (1 << PACK_LEN_BITS) - 1
#: The most squares the board word holds (60 bits), and where the hand word holds the others.
WORD_CELLS = 15
EXT_SHIFT = 16
#: The widest hand field (a table of 2**bits entries codes it): EXT_SHIFT bits.
MAX_HAND_BITS = EXT_SHIFT
#: Ranks of at most this many files are coded a rank at a time (tables of 16**files entries);
#: wider ranks square by square.
MAX_TABLE_FILES = 4
#: The most squares and files of a board (20 squares: 4x5, 5x4, 6x3, 3x6 ...).
MAX_CELLS = 20
MAX_FILES = 6
#: A build's sort records (tablebase/writer.py) hold a key's code and its value byte in one uint64,
#: ``code << 8 | byte`` (a value of two bytes, for a DTM of 254 plies or more, is the byte LONG and a
#: list of its own). So a code is at most RECORD_BITS - RECORD_VALUE_BITS bits (56).
RECORD_BITS = 64
RECORD_VALUE_BITS = 8
WIDE_VALUE_BITS = 16
#: An entry of the pieces an unmove of a capture may put back (tablebase/game/unmoves.py): the
#: piece's nibble in its low CELL_BITS, what taking it from the hand takes from the hand word above
#: (at most 2**15); RESTORE_WORD of them in an int64, two such words for a position: room for the
#: 6 kinds besides the royal one that MAX_KINDS allows.
RESTORE_ENTRY_BITS = 20
RESTORE_WORD = 3

# --- the rules array: scalars --------------------------------------------------------------------

#: Indices of the scalars (module docstring): the royal kind's piece code; 1 when mirror images
#: are folded; hand slots, the hand field's bits and mask; bits
#: read at once to decode a square; the packed rank code's shifts and mask; the far rank (our
#: royal there, safe, has tried) and our home rank (the enemy royal there has tried) as square
#: masks; the enemy kinds an unmove of a capture can put back; the most moves and unmoves of a
#: position; the key's code bits and shift; the board's files and ranks (checked against the
#: shape the kernels were compiled for).
(ROYAL, MIRROR, N_SLOTS, HAND_BITS, HAND_MASK, CELL_PEEK, PACK_CODE_SHIFT, PACK_MIRROR_SHIFT, PACK_CODE_MASK,
 TRY_ZONE, HOME_ZONE, N_RESTORE, MAX_MOVES, MAX_UNMOVES, MAX_KEY_BITS, KEY_SHIFT, RULES_FILES, RULES_RANKS,
 HAND_CODE_BITS, HAND_DECODE) = range(20)
#: The widest hands' code decoded by a table (HAND_DECODE); a wider one is decoded count by count.
MAX_HAND_DECODE_BITS = 16
HEADER = 32

# --- the rules array: small tables of a fixed size ------------------------------------------------

#: hand slot -> the piece code dropped from it; the most pieces one hand can hold; the squares it
#: may be dropped on (8 entries each)
SLOT_PIECE = HEADER
MAX_HAND = SLOT_PIECE + 8
DROP_CELLS = MAX_HAND + 8
#: count k of the hand word (k < 2 * N_SLOTS: the side to move's slots, then the opponent's) ->
#: its shift and its mask (16 entries each)
COUNT_SHIFT = DROP_CELLS + 8
COUNT_FIELD = COUNT_SHIFT + 16
#: nibble -> the captor's hand slot of a captured piece, or -1; nibble -> the slot a piece of this
#: code on the board came from by a drop, or -1 (16 entries each)
HAND_SLOT = COUNT_FIELD + 16
DROPPED_SLOT = HAND_SLOT + 16
#: piece code -> its unpromoted kind's code; unpromoted piece code -> the most pieces of it in a
#: position; piece code -> the code it promotes to (or 0), the squares where a move promotes it;
#: promoted code -> the code that promotes to it (or 0)
BASE = DROPPED_SLOT + 16
ARMY = BASE + 16
PROMOTES = ARMY + 16
PROMO_ZONE = PROMOTES + 16
DEMOTED = PROMO_ZONE + 16
#: k < N_RESTORE -> the piece code an unmove of a capture puts back, the mover's hand slot it is
#: taken from (-1: it had left the game) and what taking it changes in the hand word
RESTORE_CODE = DEMOTED + 16
RESTORE_SLOT = RESTORE_CODE + 16
RESTORE_DELTA = RESTORE_SLOT + 16
#: CELL_PEEK bits of a key -> nibble | code length << 4 (64 entries)
CELL_DECODE = RESTORE_DELTA + 16
#: nibble -> its code | code length << CELL_CODE_SHIFT (length 0: an invalid nibble), for ranks
#: coded square by square
CELL_CODE = CELL_DECODE + 64
CELL_CODE_SHIFT = 16
#: an 8-bit window -> its leading one bits (256 entries): a hand count's code is that many ones
LEADING_ONES = CELL_CODE + 16
FIXED_END = LEADING_ONES + 256
#: Fields of an entry of the hands' table (HAND + HAND_FIELDS * hand word + field): the code, its
#: length (-1 for a count above the largest hand), the hand word with the hands swapped, its code.
HAND_FIELDS = 4
H_CODE, H_LEN, H_SWAP, H_SWAPPED_CODE = range(HAND_FIELDS)


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


def max_key_bits(variant) -> int:
    """The longest code of any position of the variant, in bits: every way of sharing each kind's
    pieces between the board and the two hands (pieces out of the game only shorten it)."""
    codes = piece_codes(variant)
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


def count_widths(variant) -> list[int]:
    """The bits of each hand slot's count field (a hand holds up to the army of its kind)."""
    return [max(1, variant.army[s].bit_length()) for s in variant.hand_order]


def _cell_codes(variant) -> list[tuple[int, int]]:
    """``(code, length)`` per nibble (length 0: no piece has this nibble)."""
    codes = piece_codes(variant)
    cell_code = [(0, 1)] + [(0, 0)] * 15
    for k in range(len(variant.pieces)):
        c, ln = codes[k]
        cell_code[k + 1] = (c << 1, ln + 1)
        cell_code[(k + 1) | OPPONENT] = ((c << 1) | 1, ln + 1)
    return cell_code


def peek_bits(variant) -> int:
    """The bits decode_key reads at once for a square: the longest square code."""
    return max(ln for _, ln in _cell_codes(variant))


# --- the shape -----------------------------------------------------------------------------------


def shape_names(files: int, ranks: int) -> dict:
    """The shape constants of a board of ``files`` x ``ranks``, by name: what the kernels compiled
    for that shape hold as constants (module docstring).

    Returns
    -------
    dict of str to int or bool
        ``N_FILES``, ``N_RANKS``, ``N_CELLS``; ``RANK_BITS``, ``RANK_MASK`` (a rank in a word);
        ``BOARD_RANKS``, ``BOARD_CELLS``, ``BOARD_MASK`` (what the board word holds) and ``EXT``
        (whether the hand word holds more squares); ``RANK_TABLES`` (ranks coded by tables of
        16**files entries); and the start of each table of the rules array that the shape sizes
        (``TARGETS`` ... ``HAND``: module docstring).
    """
    cells = files * ranks
    board_ranks = min(ranks, WORD_CELLS // files)
    t = {"N_FILES": files, "N_RANKS": ranks, "N_CELLS": cells, "RANK_BITS": CELL_BITS * files,
         "RANK_MASK": (1 << (CELL_BITS * files)) - 1, "BOARD_RANKS": board_ranks,
         "BOARD_CELLS": files * board_ranks, "BOARD_MASK": (1 << (CELL_BITS * files * board_ranks)) - 1,
         "EXT": board_ranks < ranks, "RANK_TABLES": files <= MAX_TABLE_FILES}
    at = FIXED_END
    for name, size in (("TARGETS", 16 * cells), ("SOURCES", 16 * cells), ("ENEMY_TARGETS", 16 * cells),
                       ("TARGET_COUNT", 16 * cells), ("TARGET_LIST", 16 * cells * cells), ("MIRROR_CELL", cells)):
        t[name] = at
        at += size
    rank_entries = 16 ** files if t["RANK_TABLES"] else 0
    for name in ("RANK_CODE", "RANK_LEN", "RANK_CODE_MIRRORED", "RANK_MIRROR", "RANK_FLIP", "RANK_PACKED",
                 "RANK_PACKED_FLIPPED"):
        t[name] = at
        at += rank_entries
    t["HAND"] = at
    return t


#: The names :func:`shape_names` gives (what a kernel bound to a shape replaces).
SHAPE_NAMES = tuple(shape_names(3, 4))


# --- the rules array ------------------------------------------------------------------------------


def derive(variant) -> dict:
    """The rules of a variant, by name: its board's size (``N_FILES``, ``N_CELLS``, ``BOARD_CELLS``
    ...), its scalars and tables as values, for Python code (``layout["ROYAL"]`` is the royal kind's
    piece code, ``layout["TARGETS"][p, i]`` a move mask), and ``"RULES"``, the rules array that the
    kernels read (a list of int: :func:`rules_array`; the tables' starts in it are the shape's,
    :func:`shape_names`).

    Parameters
    ----------
    variant : Variant

    Returns
    -------
    dict of str to int, bool, list of int or Grid
        The same dictionary for variants with equal rules (made once; do not change it). No numpy:
        probing imports none.
    """
    known = _DERIVED.get(variant.canonical_json)
    if known is not None:
        return known
    t = _DERIVED[variant.canonical_json] = _derive(variant)
    return t


#: derive()'s tables by variant (canonical JSON): made once per process.
_DERIVED: dict = {}


def rules_array(variant) -> list:
    """The rules array of a variant (module docstring): list of int, the same list each call."""
    return derive(variant)["RULES"]


def _derive(variant) -> dict:
    files, ranks, cells = variant.files, variant.ranks, variant.cells
    kinds = variant.pieces
    n_kinds = len(kinds)
    index = {p.letter: k + 1 for k, p in enumerate(kinds)}  # letter -> piece code
    slots = variant.hand_order
    n_slots = len(slots)
    army = variant.army
    max_hand = [army[s] for s in slots]
    widths = count_widths(variant)
    hand_bits = 2 * sum(widths)
    shape = shape_names(files, ranks)
    t = {name: shape[name] for name in ("N_FILES", "N_RANKS", "N_CELLS", "RANK_BITS", "RANK_MASK", "BOARD_RANKS",
                                        "BOARD_CELLS", "BOARD_MASK", "EXT", "RANK_TABLES")}
    t["N_KINDS"] = n_kinds
    t["ROYAL"] = index[variant.royal.letter]
    t["MIRROR"] = bool(variant.mirror_symmetric)
    t["DROPS"] = bool(n_slots)

    # --- hands ------------------------------------------------------------------------------
    t["N_SLOTS"], t["HAND_BITS"], t["HAND_MASK"] = n_slots, hand_bits, (1 << hand_bits) - 1
    t["COUNT_SHIFT"] = [sum(widths[:k]) for k in range(n_slots)] + [hand_bits // 2 + sum(widths[:k])
                                                                    for k in range(n_slots)]
    t["COUNT_FIELD"] = [(1 << w) - 1 for w in widths] * 2
    t["SLOT_PIECE"] = [index[s] for s in slots]
    t["MAX_HAND"] = max_hand
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
    t["BASE"] = [0] + [index[variant.base_of[p.letter]] for p in kinds] + [0] * (16 - 1 - n_kinds)
    army_by_code = [0] * 16  # the most pieces of each base kind (by code) in any position
    for letter, n in army.items():
        army_by_code[index[letter]] = n
    t["ARMY"] = army_by_code

    # --- key codes ----------------------------------------------------------------------------
    cell_code = _cell_codes(variant)
    cell_peek = max(ln for _, ln in cell_code)
    decode = [0] * (1 << cell_peek)
    for nib, (c, ln) in enumerate(cell_code):
        if ln:
            for low in range(1 << (cell_peek - ln)):
                decode[(c << (cell_peek - ln)) | low] = nib | (ln << CELL_BITS)
    t["CELL_PEEK"], t["CELL_DECODE"] = cell_peek, decode
    t["CELL_CODE"] = [c | (ln << CELL_CODE_SHIFT) for c, ln in cell_code]
    t["MAX_KEY_BITS"] = max(max_key_bits(variant), MIN_KEY_BITS)
    t["KEY_SHIFT"] = KEY_TOP_BIT + 1 - t["MAX_KEY_BITS"]

    # --- a rank's code, its mirror image and its flip, for every rank word (narrow boards) ---------
    # Built a file at a time: adding file k (the word's next nibble n above the first k files,
    # whose code comes after theirs) takes entry r of the first k files to n * 16**k + r.
    rank_code_bits = files * cell_peek
    t["PACK_MIRROR_SHIFT"] = PACK_LEN_BITS
    t["PACK_CODE_SHIFT"] = PACK_LEN_BITS + rank_code_bits
    t["PACK_CODE_MASK"] = (1 << rank_code_bits) - 1
    if t["RANK_TABLES"]:
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
        packed = [(c << t["PACK_CODE_SHIFT"]) | (cm << t["PACK_MIRROR_SHIFT"]) | ln
                  for c, cm, ln in zip(code, code_mirrored, length)]
        t["RANK_CODE"], t["RANK_LEN"] = code, length
        t["RANK_MIRROR"], t["RANK_FLIP"] = mirror, flip
        t["RANK_CODE_MIRRORED"] = code_mirrored
        t["RANK_PACKED"] = packed
        t["RANK_PACKED_FLIPPED"] = [packed[f] for f in flip]

    # --- the hands' code, for every hand word: a slot at a time, as the ranks' -----------------------
    hcode, hlen = [0], [0]
    for k in range(2 * n_slots):
        m = max_hand[k % n_slots]
        table = [count_code(c, m) if c <= m else (0, -1) for c in range(1 << widths[k % n_slots])]
        hcode = [(h << ln) | c if ln >= 0 else 0 for c, ln in table for h in hcode]
        hlen = [h + ln if ln >= 0 and h >= 0 else -1 for _, ln in table for h in hlen]
    hcode = [c if ln >= 0 else 0 for c, ln in zip(hcode, hlen)]
    half = hand_bits // 2
    low = (1 << half) - 1
    hswap = [(h >> half) | ((h & low) << half) for h in range(1 << hand_bits)]
    t["HAND_CODE"] = hcode
    t["HAND_LEN"] = hlen  # -1: a count above the largest hand
    code_bits = max(hlen)  # the longest hands' code, and a table from its next bits to the hand word
    t["HAND_CODE_BITS"] = code_bits
    if code_bits <= MAX_HAND_DECODE_BITS:
        decode = [0] * (1 << code_bits)
        for h, (c, ln) in enumerate(zip(hcode, hlen)):
            if ln >= 0:
                for low in range(1 << (code_bits - ln)):
                    decode[(c << (code_bits - ln)) | low] = h
        t["HAND_DECODE_TABLE"] = decode
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
    target_list = [[[j for j in range(cells) if (targets[p][i] >> j) & 1] for i in range(cells)] for p in range(16)]
    target_list = [[js + [0] * (cells - len(js)) for js in row] for row in target_list]
    enemy = [[0] * cells for _ in range(16)]
    for p in range(16):
        for i in range(cells):
            for j in range(cells):
                if (targets[p][cells - 1 - i] >> j) & 1:
                    enemy[p][i] |= 1 << (cells - 1 - j)
    t["TARGETS"], t["SOURCES"], t["ENEMY_TARGETS"] = Grid(targets), Grid(sources), Grid(enemy)
    t["TARGET_COUNT"], t["TARGET_LIST"] = Grid(count), Grid(target_list)
    far = [sum(1 << (files * rk + f) for rk in range(n) for f in range(files)) for n in range(ranks + 1)]
    promotes, zone = [0] * 16, [0] * 16
    for p in kinds:
        if p.promotes_to:
            promotes[index[p.letter]] = index[p.promotes_to]
            zone[index[p.letter]] = far[p.promotion_ranks]
    t["PROMOTES"], t["PROMO_ZONE"] = promotes, zone
    demoted = [0] * 16  # promoted code -> the code that promotes to it (0 for kinds that are no promotion)
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
    if len(restore) > 2 * RESTORE_WORD:  # (each kind but the royal one at most once)
        raise AssertionError(f"{len(restore)} kinds an unmove may put back: at most {2 * RESTORE_WORD}")
    t["N_RESTORE"] = len(restore)
    t["RESTORE_CODE"] = [c for c, _ in restore]
    t["RESTORE_SLOT"] = [s for _, s in restore]
    t["RESTORE_DELTA"] = [1 << t["COUNT_SHIFT"][s] if s >= 0 else 0 for _, s in restore]
    drop_cells = []
    all_cells = (1 << cells) - 1
    for s in slots:
        forbidden = sum(far[r] ^ far[r - 1] for r in variant.kind(s).forbidden_drop_ranks)
        drop_cells.append(all_cells & ~forbidden)
    t["DROP_CELLS"] = drop_cells
    t["TRY_ZONE"] = far[1] if variant.try_rule else 0  # our royal there, safe: we win (a try)
    t["HOME_ZONE"] = (all_cells ^ far[ranks - 1]) if variant.try_rule else 0  # the enemy royal there: they tried
    t["MIRROR_CELL"] = [files * (i // files) + files - 1 - i % files for i in range(cells)]
    own_max = sum(army.values()) - 1  # every piece but the enemy royal
    max_targets = max(1, max(max(row) for row in count))
    t["MAX_TARGETS"] = max_targets
    t["MAX_MOVES"] = max(1, own_max * max_targets + n_slots * cells)
    t["MAX_UNMOVES"] = max(1, own_max * (1 + 2 * max_targets * (1 + len(restore))))
    t["RULES"] = _pack(t, shape)
    return t


def _pack(t: dict, shape: dict) -> list:
    """The rules array of the derived tables ``t`` on a board of ``shape`` (module docstring)."""
    cells, files = t["N_CELLS"], t["N_FILES"]
    size = shape["HAND"] + HAND_FIELDS * (1 << t["HAND_BITS"])
    decode = t.get("HAND_DECODE_TABLE", [])
    r = [0] * (size + len(decode))
    r[HAND_DECODE] = size if decode else -1
    r[size:] = decode
    for name in ("ROYAL", "N_SLOTS", "HAND_BITS", "HAND_MASK", "CELL_PEEK", "HAND_CODE_BITS",
                 "PACK_CODE_SHIFT", "PACK_MIRROR_SHIFT", "PACK_CODE_MASK", "TRY_ZONE", "HOME_ZONE", "N_RESTORE",
                 "MAX_MOVES", "MAX_UNMOVES", "MAX_KEY_BITS", "KEY_SHIFT"):
        r[globals()[name]] = int(t[name])
    r[MIRROR] = int(t["MIRROR"])
    r[RULES_FILES], r[RULES_RANKS] = files, t["N_RANKS"]

    def put(at, values, most):
        if len(values) > most:  # pragma: no cover - the variant's limits keep them in
            raise ValueError(f"a table of {len(values)} entries where {most} fit")
        r[at:at + len(values)] = values

    for name, most in (("SLOT_PIECE", 8), ("MAX_HAND", 8), ("DROP_CELLS", 8), ("COUNT_SHIFT", 16),
                       ("COUNT_FIELD", 16), ("HAND_SLOT", 16),
                       ("DROPPED_SLOT", 16), ("BASE", 16), ("ARMY", 16), ("PROMOTES", 16), ("PROMO_ZONE", 16),
                       ("DEMOTED", 16), ("RESTORE_CODE", 16), ("RESTORE_SLOT", 16), ("RESTORE_DELTA", 16),
                       ("CELL_DECODE", 64),
                       ("CELL_CODE", 16)):
        put(globals()[name], t[name], most)
    put(LEADING_ONES, [8 - (~w & 255).bit_length() for w in range(256)], 256)
    for name in ("TARGETS", "SOURCES", "ENEMY_TARGETS", "TARGET_COUNT"):
        grid = t[name].rows
        put(shape[name], [grid[p][i] for p in range(16) for i in range(cells)], 16 * cells)
    grid = t["TARGET_LIST"].rows
    put(shape["TARGET_LIST"], [grid[p][i][k] for p in range(16) for i in range(cells) for k in range(cells)],
        16 * cells * cells)
    put(shape["MIRROR_CELL"], t["MIRROR_CELL"], cells)
    if t["RANK_TABLES"]:
        for name in ("RANK_CODE", "RANK_LEN", "RANK_CODE_MIRRORED", "RANK_MIRROR", "RANK_FLIP", "RANK_PACKED",
                     "RANK_PACKED_FLIPPED"):
            put(shape[name], t[name], 16 ** files)
    hand = shape["HAND"]
    for h in range(1 << t["HAND_BITS"]):
        at = hand + HAND_FIELDS * h
        r[at + H_CODE] = t["HAND_CODE"][h]
        r[at + H_LEN] = t["HAND_LEN"][h]
        r[at + H_SWAP] = t["HAND_SWAP"][h]
        r[at + H_SWAPPED_CODE] = t["HAND_CODE_SWAPPED"][h]
    return r


def check_layout(variant) -> None:
    """Refuse a variant whose hand field does not fit the kernels (its keys may be too wide to
    build: :func:`key_width_problem`, asked where keys are made).

    Raises
    ------
    VariantError
        If the hand field needs more than 16 bits.
    """
    from dobutsu_tb.tablebase.game.variant import VariantError

    slots = variant.hand_order
    hand_bits = 2 * sum(count_widths(variant))
    if hand_bits > MAX_HAND_BITS:
        counts = ", ".join(f"{variant.army[s]} {s}" for s in slots)
        raise VariantError(f"hand_order: {len(slots)} kinds in hand (at most {counts}) need a {hand_bits}-bit "
                           f"hand field; at most {MAX_HAND_BITS} bits are supported")


def key_room(variant) -> int:
    """The widest key code a variant's positions may have, in bits: ``63 - CELL_PEEK`` (a code is
    decoded by peeking a few bits past it) and at most what a sort record holds beside a one-byte
    value (``RECORD_BITS - RECORD_VALUE_BITS``, 56)."""
    return min(KEY_TOP_BIT + 1 - peek_bits(variant), RECORD_BITS - RECORD_VALUE_BITS)


def key_width_problem(variant) -> str | None:
    """Why no key of this variant can be made, or None when its keys fit (:func:`key_room`).

    A variant whose key is wider (a big army on a board of 20 squares, say) is still listed,
    drawn and estimated; only what makes keys refuses it (a build, a tablebase file, a key).
    """
    bits, room = max_key_bits(variant), key_room(variant)
    if bits <= room:
        return None
    return (f"pieces: a position's key needs up to {bits} bits; at most {room} fit a 64-bit key with this piece set "
            f"(wider keys are not supported yet)")


# The standard game's shape (the kernels' defaults; each shape binds its own: module docstring).
_S = shape_names(3, 4)
N_FILES: int = _S["N_FILES"]  #: files (3)
N_RANKS: int = _S["N_RANKS"]  #: ranks (4)
N_CELLS: int = _S["N_CELLS"]  #: squares (12)
RANK_BITS: int = _S["RANK_BITS"]  #: bits of one rank of a word
RANK_MASK: int = _S["RANK_MASK"]
BOARD_RANKS: int = _S["BOARD_RANKS"]  #: the ranks the board word holds (all of them up to 15 squares)
BOARD_CELLS: int = _S["BOARD_CELLS"]  #: the squares the board word holds
BOARD_MASK: int = _S["BOARD_MASK"]  #: their bits
EXT: bool = _S["EXT"]  #: the hand word holds the other squares (module docstring)
RANK_TABLES: bool = _S["RANK_TABLES"]  #: ranks are coded by tables (at most MAX_TABLE_FILES files)
TARGETS: int = _S["TARGETS"]  #: [piece code, square] -> squares it reaches (bit mask)
SOURCES: int = _S["SOURCES"]  #: [piece code, square] -> squares from which it reaches there
ENEMY_TARGETS: int = _S["ENEMY_TARGETS"]  #: the same for an opponent's piece, which plays downwards
TARGET_COUNT: int = _S["TARGET_COUNT"]  #: [piece code, square] -> number of TARGETS
TARGET_LIST: int = _S["TARGET_LIST"]  #: [piece code, square, k] -> the k-th target, ascending
MIRROR_CELL: int = _S["MIRROR_CELL"]  #: square -> its mirror image
RANK_CODE: int = _S["RANK_CODE"]  #: rank bits -> code (0 for an invalid rank)
RANK_LEN: int = _S["RANK_LEN"]  #: rank bits -> code length (0 for an invalid rank)
RANK_CODE_MIRRORED: int = _S["RANK_CODE_MIRRORED"]  #: rank bits -> its mirror image's code
RANK_MIRROR: int = _S["RANK_MIRROR"]  #: rank bits -> the rank mirrored
RANK_FLIP: int = _S["RANK_FLIP"]  #: rank bits -> the rank seen from the other side (mirrored, colours swapped)
RANK_PACKED: int = _S["RANK_PACKED"]  #: rank bits -> code << PACK_CODE_SHIFT | mirrored code << ... | length
RANK_PACKED_FLIPPED: int = _S["RANK_PACKED_FLIPPED"]  #: the same for the rank turned for the other side
HAND: int = _S["HAND"]  #: hand word -> HAND_FIELDS values (H_CODE, H_LEN, H_SWAP, H_SWAPPED_CODE)
del _S
