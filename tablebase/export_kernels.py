"""The kernels of the Parquet export (:mod:`~dobutsu_tb.tablebase.export`), one row group at a time.

For the stored positions of a block (``rows``, indices into the file's sorted keys):

1. :func:`_decode_and_count` decodes each key into its normalised state and counts its legal
   moves (the list offsets of the block follow from the counts);
2. :func:`_children` writes, per move in generation order, the canonical key of the child (-1
   for a terminal child: terminal positions are never stored), its terminal class and the
   move's text code (:func:`~dobutsu_tb.tablebase.game.notation.text_code`);
3. the children's keys are looked up in the file's sorted keys (:func:`_lookup`, through a
   directory of their top bits: :func:`~dobutsu_tb.tablebase.lookup.key_directory`);
4. :func:`_order_moves` turns them into each move's value for its player (docs/rules.md §7),
   sorts each position's moves best first (stably, as ``Tablebase.probe_moves``) and counts the
   best ones, those whose value is the position's;
5. :func:`_texts` writes the positions' texts (ours and Fairy-Stockfish's FEN) as Arrow string
   buffers, and :func:`_best_prefix` the best moves' list.

Only :func:`_decode_and_count` and :func:`_children` call the game's kernels: they are plain
kernels listed in ``__kernels__``, compiled per board shape by ``Game.jitted(notation, module)``,
and take the variant's rules array. The others take everything they need of the variant as
arrays (:func:`text_tables`).
"""

from __future__ import annotations

import numpy as np

from dobutsu_tb.encoding.jit import njit, prange
from dobutsu_tb.encoding.sorting import lower_bound_in
from dobutsu_tb.tablebase.game.key import decode_key
from dobutsu_tb.tablebase.game.layout import CATCH, EXT_SHIFT, NONTERMINAL, TRY
from dobutsu_tb.tablebase.game.notation import text_code
from dobutsu_tb.tablebase.game.rules import child_keys, gen_moves
from dobutsu_tb.tablebase.values import DRAW, LOSS, RANK_SCALE, WIN

#: The plain kernels bound to each board shape (``Game.jitted(notation, module)``).
__kernels__ = ("_decode_and_count", "_children")

#: ``status`` of a row (:func:`_order_moves`): all is well; a non-terminal child is not stored;
#: the moves' values do not give the position's stored value (the file is damaged); a move has no
#: entry in the UCI dictionary (a bug).
ROW_OK, ROW_MISSING_CHILD, ROW_INCONSISTENT, ROW_NO_TEXT = 0, 1, 2, 3

#: The text code of a move is below this (notation.py: 15 bits).
TEXT_CODES = 1 << 15

_SENTE = 0  # the stored positions are normalised: Sente to move
_SLASH, _DASH, _OPEN, _CLOSE, _SPACE, _ZERO = ord("/"), ord("-"), ord("["), ord("]"), ord(" "), ord("0")
_LETTER_S, _LETTER_W = ord("S"), ord("w")


# --- the two kernels that call the game's ---------------------------------------------------------


def _decode_and_count(rules, keys, rows, boards, hands, counts, moves):
    """``boards[i], hands[i]`` = the normalised state of ``keys[rows[i]]`` and ``counts[i]`` its
    number of legal moves; ``moves`` is a scratch buffer of shape (threads, MAX_MOVES)."""
    n_threads = moves.shape[0]
    m = rows.shape[0]
    per = (m + n_threads - 1) // n_threads
    for t in prange(n_threads):
        buf = moves[t]
        for i in range(t * per, min(m, (t + 1) * per)):
            board, hand = decode_key(rules, keys[rows[i]])
            boards[i] = board
            hands[i] = hand
            counts[i] = gen_moves(rules, board, hand, buf)


def _children(rules, boards, hands, offsets, out_keys, out_classes, out_texts, bad, moves, ckeys, cclasses):
    """For the moves of position i, in generation order, at ``offsets[i]`` to ``offsets[i + 1]``:
    the child's canonical key (-1 when it is terminal), its class (NONTERMINAL, CATCH or TRY) and
    the move's text code. ``bad[i]`` is 1 when the moves are not ``offsets``' count (else 0);
    ``moves``, ``ckeys`` and ``cclasses`` are scratch buffers of shape (threads, MAX_MOVES)."""
    n_threads = moves.shape[0]
    m = boards.shape[0]
    per = (m + n_threads - 1) // n_threads
    for t in prange(n_threads):
        buf, kbuf, cbuf = moves[t], ckeys[t], cclasses[t]
        for i in range(t * per, min(m, (t + 1) * per)):
            board = boards[i]
            n = child_keys(rules, board, hands[i], buf, kbuf, cbuf)
            at = offsets[i]
            if n != offsets[i + 1] - at:
                bad[i] = 1
                continue
            bad[i] = 0
            for k in range(n):
                out_keys[at + k] = kbuf[k] if cbuf[k] == NONTERMINAL else -1
                out_classes[at + k] = cbuf[k]
                out_texts[at + k] = text_code(rules, board, hands[i], _SENTE, buf[k])


# --- the children's values ------------------------------------------------------------------------


@njit(parallel=True)
def _lookup(stored, values, directory, shift, keys, codes, found):
    """For each ``keys[i]`` >= 0: ``found[i]`` whether it is in ``stored`` (ascending) and
    ``codes[i]`` its entry of ``values``; a negative key (a terminal child) is skipped. The
    directory (:func:`~dobutsu_tb.tablebase.lookup.key_directory`) narrows each search to the keys
    of its top bits: with a few keys a bucket, about one cache miss in the directory and one or two in the keys."""
    last = directory.shape[0] - 1
    for i in prange(keys.shape[0]):
        key = keys[i]
        if key < 0:
            continue
        b = key >> shift
        if b >= last:
            continue
        lo = lower_bound_in(stored, key, directory[b], directory[b + 1])
        if lo < directory[b + 1] and stored[lo] == key:
            found[i] = True
            codes[i] = values[lo]


# --- values, order, best moves ------------------------------------------------------------------


@njit
def _value_of_code(code):
    """(WDL, signed DTM in plies) of a value code (values.py: 0 a draw, else DTM + 1)."""
    if code == 0:
        return DRAW, 0
    d = np.int64(code) - 1
    if d % 2 == 1:
        return WIN, d
    return LOSS, -d


@njit
def _rank(wdl, dtm):
    """values.move_rank of a known value: wins fastest first, then draws, then losses slowest."""
    if wdl == WIN:
        return dtm
    if wdl == DRAW:
        return RANK_SCALE
    return 3 * RANK_SCALE - 1 + dtm


@njit(parallel=True)
def _order_moves(row_codes, offsets, classes, codes, found, texts, uci_index, ranks,
                 wdl, dtm, move_dtm, move_uci, n_best, status):
    """Each position's value and its moves' values, best first.

    Parameters
    ----------
    row_codes : numpy.ndarray of uint8 or uint16, shape (m,)
        The positions' stored value codes.
    offsets : numpy.ndarray of int32, shape (m + 1,)
        Position i's moves are ``offsets[i]`` to ``offsets[i + 1]`` in the flat arrays.
    classes, codes, found, texts : numpy.ndarray, shape (total,)
        Per move in generation order: the child's class, its value code and whether it was
        found (for non-terminal children), the move's text code.
    uci_index : numpy.ndarray of int16, shape (TEXT_CODES,)
        The entry of the UCI dictionary of each text code (-1: none).
    ranks : numpy.ndarray of int64, shape (total,)
        Scratch.

    Writes ``wdl`` (int8) and ``dtm`` (int16, signed plies) per position, ``move_dtm`` (int16,
    signed plies for the mover) and ``move_uci`` (int16, dictionary entries) per move, each
    position's moves sorted best first (a stable sort: ties as
    :func:`~dobutsu_tb.tablebase.values.move_tie`, then in generation order), ``n_best`` the
    number of leading moves whose value is the position's, and ``status`` (ROW_OK,
    ROW_MISSING_CHILD, ROW_INCONSISTENT or ROW_NO_TEXT).
    """
    for i in prange(row_codes.shape[0]):
        pw, pd = _value_of_code(row_codes[i])
        wdl[i] = pw
        dtm[i] = pd
        lo, hi = offsets[i], offsets[i + 1]
        st = ROW_OK
        for j in range(lo, hi):
            c = classes[j]
            if c == CATCH:  # the child wins in 1 by the capture
                mw, md = LOSS, -2
            elif c == TRY:  # the child has lost in 0: the try succeeds
                mw, md = WIN, 1
            elif not found[j]:
                st = ROW_MISSING_CHILD
                mw, md = DRAW, 0
            else:
                cw, cd = _value_of_code(codes[j])
                if cw == WIN:
                    mw, md = LOSS, -(cd + 1)
                elif cw == LOSS:
                    mw, md = WIN, 1 - cd
                else:
                    mw, md = DRAW, 0
            # (the one tie-break of every surface, values.move_tie: among equally long losses, a move
            # that leaves the lion to be captured last; a stored position has no capture of the lion)
            ranks[j] = 2 * _rank(mw, md) + (1 if c == CATCH else 0)
            move_dtm[j] = md
            move_uci[j] = uci_index[texts[j]]
            if move_uci[j] < 0:
                st = ROW_NO_TEXT
        for j in range(lo + 1, hi):  # insertion sort by rank, stable
            r, d, u = ranks[j], move_dtm[j], move_uci[j]
            k = j - 1
            while k >= lo and ranks[k] > r:
                ranks[k + 1], move_dtm[k + 1], move_uci[k + 1] = ranks[k], move_dtm[k], move_uci[k]
                k -= 1
            ranks[k + 1], move_dtm[k + 1], move_uci[k + 1] = r, d, u
        own = _rank(pw, pd)
        nb = 0
        while lo + nb < hi and ranks[lo + nb] >> 1 == own:
            nb += 1
        if hi > lo and nb == 0 or hi == lo and not (pw == LOSS and pd == 0):
            if st == ROW_OK:
                st = ROW_INCONSISTENT
        n_best[i] = nb
        status[i] = st


@njit(parallel=True)
def _best_prefix(offsets, n_best, move_uci, best_offsets, best_uci):
    """The first ``n_best[i]`` moves of each position into ``best_uci`` at ``best_offsets[i]``."""
    for i in prange(n_best.shape[0]):
        src, dst = offsets[i], best_offsets[i]
        for k in range(n_best[i]):
            best_uci[dst + k] = move_uci[src + k]


# --- position texts -------------------------------------------------------------------------------


@njit
def _put(out, at, byte, write):
    if write:
        out[at] = byte
    return at + 1


@njit
def _cell(board, hand, split, i):
    """The nibble of square ``i`` of a state whose board word holds ``split`` squares (layout.py)."""
    if i < split:
        return (board >> (4 * i)) & 15
    return (hand >> (EXT_SHIFT + 4 * (i - split))) & 15


@njit
def _hand_text(hand, counts, hand_letters, out, at, write):
    """Our hand field: the side to move's pieces in hand, then the opponent's, or ``-``;
    ``counts[0, k]`` and ``counts[1, k]`` are the shift and mask of count k (layout.py)."""
    start = at
    for k in range(hand_letters.shape[0]):
        for _ in range((hand >> counts[0, k]) & counts[1, k]):
            at = _put(out, at, hand_letters[k], write)
    if at == start:
        at = _put(out, at, _DASH, write)
    return at


@njit
def _position_text(board, hand, files, ranks, split, counts, cell_letters, hand_letters, out, at, write):
    """Our text of a normalised state, Sente to move (docs/rules.md §8): ``S/gle/-c-/-C-/ELG/-``."""
    at = _put(out, at, _LETTER_S, write)
    for r in range(ranks):
        at = _put(out, at, _SLASH, write)
        for f in range(files):
            at = _put(out, at, cell_letters[_cell(board, hand, split, r * files + f)], write)
    at = _put(out, at, _SLASH, write)
    return _hand_text(hand, counts, hand_letters, out, at, write)


@njit
def _fen_text(board, hand, files, ranks, split, counts, fen_prefix, cell_letters, hand_letters, out, at, write):
    """Fairy-Stockfish's FEN of a normalised state, Sente (white) to move:
    ``gle/1c1/1C1/ELG[-] w 0 1`` (a promoted piece is ``+`` and its unpromoted letter)."""
    for r in range(ranks):
        if r:
            at = _put(out, at, _SLASH, write)
        gap = 0
        for f in range(files):
            c = _cell(board, hand, split, r * files + f)
            if c == 0:
                gap += 1
                continue
            if gap:
                at = _put(out, at, _ZERO + gap, write)  # (files <= 6: one digit)
                gap = 0
            if fen_prefix[c]:
                at = _put(out, at, fen_prefix[c], write)
            at = _put(out, at, cell_letters[c], write)
        if gap:
            at = _put(out, at, _ZERO + gap, write)
    at = _put(out, at, _OPEN, write)
    at = _hand_text(hand, counts, hand_letters, out, at, write)
    at = _put(out, at, _CLOSE, write)
    for byte in (_SPACE, _LETTER_W, _SPACE, _ZERO, _SPACE, _ZERO + 1):
        at = _put(out, at, byte, write)
    return at


@njit(parallel=True)
def _texts(boards, hands, files, ranks, split, counts, cell_letters, fen_prefix, fen_letters, hand_letters,
           pos_offsets, pos_bytes, fen_offsets, fen_bytes, write):
    """The positions' texts: with ``write`` false, each text's length into ``pos_offsets[i + 1]``
    and ``fen_offsets[i + 1]`` (the caller sums them into offsets); with ``write`` true, the
    texts' bytes at those offsets into ``pos_bytes`` and ``fen_bytes``.

    Parameters
    ----------
    boards, hands : numpy.ndarray of int64, shape (m,)
        Normalised packed states.
    files, ranks, split : int
        The board's size and the squares its board word holds (``BOARD_CELLS``: layout.py).
    counts : numpy.ndarray of int64, shape (2, 2 * slots)
        Each hand count's shift and mask (``COUNT_SHIFT``, ``COUNT_FIELD``).
    cell_letters, fen_prefix, fen_letters : numpy.ndarray of uint8, shape (16,)
        Per cell code: our letter (``-`` for an empty square); the FEN's ``+`` before a promoted
        piece (0: none) and its letter (text_tables).
    hand_letters : numpy.ndarray of uint8, shape (2 * slots,)
        The letter of each hand count: the side to move's slots (upper case), then the opponent's.
    """
    for i in prange(boards.shape[0]):
        if write:
            _position_text(boards[i], hands[i], files, ranks, split, counts, cell_letters, hand_letters,
                           pos_bytes, pos_offsets[i], True)
            _fen_text(boards[i], hands[i], files, ranks, split, counts, fen_prefix, fen_letters, hand_letters,
                      fen_bytes, fen_offsets[i], True)
        else:
            pos_offsets[i + 1] = _position_text(boards[i], hands[i], files, ranks, split, counts, cell_letters,
                                                hand_letters, pos_bytes, 0, False)
            fen_offsets[i + 1] = _fen_text(boards[i], hands[i], files, ranks, split, counts, fen_prefix,
                                           fen_letters, hand_letters, fen_bytes, 0, False)


def text_tables(variant) -> dict:
    """The letters :func:`_texts` writes, as arrays, from a variant (Position.text and .fen).

    Returns
    -------
    dict
        ``cell_letters``, ``fen_prefix``, ``fen_letters`` (numpy.ndarray of uint8, shape (16,)),
        ``hand_letters`` (uint8, shape (2 * len(hand_order),)), ``files``, ``ranks``, ``split``
        (the squares of the board word) and ``counts`` (int64, shape (2, 2 * len(hand_order)): each
        hand count's shift and mask).
    """
    from dobutsu_tb.tablebase.game.game import game_of

    layout = game_of(variant).layout
    cell = np.full(16, ord("?"), np.uint8)
    prefix = np.zeros(16, np.uint8)
    fen = np.full(16, ord("?"), np.uint8)
    cell[0] = fen[0] = ord("-")
    for k, piece in enumerate(variant.pieces):
        base = variant.base_of[piece.letter]
        for side in (0, 8):
            code = (k + 1) | side
            cell[code] = ord(piece.letter.lower() if side else piece.letter)
            fen[code] = ord(base.lower() if side else base)
            prefix[code] = ord("+") if base != piece.letter else 0
    order = variant.hand_order
    hand = np.array([ord(c) for c in order] + [ord(c.lower()) for c in order], np.uint8)
    counts = np.array([layout["COUNT_SHIFT"], layout["COUNT_FIELD"]], np.int64).reshape(2, -1)
    return {"cell_letters": cell, "fen_prefix": prefix, "fen_letters": fen, "hand_letters": hand,
            "files": variant.files, "ranks": variant.ranks, "split": layout["BOARD_CELLS"], "counts": counts}
