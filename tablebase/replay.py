"""Replaying many games against a tablebase at once: the arithmetic of ``verify-line --file``.

:meth:`Tablebase.probe_moves` judges one position at a time in Python (tens of microseconds a
move, more when chunks must be inflated). Here the games are replayed by jitted kernels in
two passes over a block of games:

1. :func:`_collect` replays every game and writes the canonical key of each position before a
   move and of each non-terminal child (terminal positions are never stored) into one array,
   each game in its own stretch of ``plies * (MAX_MOVES + 1)`` slots;
2. the keys are looked up in one batch (:meth:`Tablebase.probe_many`, in memory for a big
   input), and :func:`_judge` replays the games again, reading the values in the same order,
   and writes per ply the value before the move, the played move's value and its rank among
   the moves (the sort key of :meth:`MoveValue.sort_key`, as one integer), the best moves'
   texts when it is not one of them, and why a game stops early.

The cost per ply is linear (one move generation and a constant number of lookups per move);
the Python work left per ply is formatting. :func:`replay_games` is the driver, block by
block; ``analysis.lines.verify_games`` turns its arrays into line reports.

Move texts travel as small integers (:func:`move_text_of`)::

    bits 0..2    piece code (1 + the kind's index in the variant; a drop's piece)
    bits 3..7    from-square 0..14 (absolute, as Sente sees the board), TEXT_DROP for a drop
    bits 8..11   to-square 0..14 (absolute)
    bit  12      a capture ('x')
    bit  13      a promotion ('+')

A move as the player wrote it (:func:`move_spec`) has the same layout without the capture bit,
which is not compared: as :func:`~dobutsu_tb.tablebase.game.notation.parse_move`, a capture
written with ``-`` or a move written with ``x`` is accepted.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from dobutsu_tb.encoding.binding import kernel_options
from dobutsu_tb.encoding.jit import njit, prange
from dobutsu_tb.tablebase.game.key import canonical_key
from dobutsu_tb.tablebase.game.layout import (
    CATCH,
    CELL_BITS,
    CELL_MASK,
    MAX_MOVES,
    N_CELLS,
    NONTERMINAL,
    PIECE_MASK,
    ROYAL,
    SLOT_PIECE,
    TRY,
)
from dobutsu_tb.tablebase.game.notation import move_pattern
from dobutsu_tb.tablebase.game.position import GOTE, parse_square, square_name
from dobutsu_tb.tablebase.game.rules import (
    DROP,
    FROM_MASK,
    PROMOTION,
    TO_MASK,
    TO_SHIFT,
    classify,
    find_piece,
    game_over,
    gen_moves,
    make_move,
)
from dobutsu_tb.tablebase.values import DRAW, LOSS, WIN

#: Move text layout (module docstring).
TEXT_FROM_SHIFT, TEXT_TO_SHIFT, TEXT_CAPTURE, TEXT_PROMOTION = 3, 8, 1 << 12, 1 << 13
TEXT_DROP = DROP
#: :func:`move_spec` of a text that is not a move.
NOT_A_MOVE = -1

#: The kernels bound to each variant's tables (Game.jitted).
__kernels__ = ("text_code", "_child_class", "_played", "_collect", "_judge")
#: Plies replayed per block (the key array of a block is MAX_MOVES + 1 times as long).
BLOCK_PLIES = 1 << 15

# Terminal class of a move's child as :class:`MoveValue` says it, for ``terminal``.
TERM_NONE, TERM_CATCH, TERM_TRY, TERM_CAPTURED = 0, 1, 2, 3
#: ``terminal`` texts of MoveValue, by the codes above.
TERMINAL_NAMES = (None, "catch", "try", "lion captured")

# Why a ply was not judged (``status``); OK plies were.
OK, OVER, ILLEGAL, MISSING_BEFORE, MISSING_CHILD, SKIPPED = 0, 1, 2, 3, 4, 5

# Rank of a move, best first, as one integer: the sort key (a, b) of MoveValue.sort_key is
# a * RANK_SCALE + b + RANK_BIAS (a: 0 loss of the child, 1 draw, 2 win of the child, 3 unknown).
RANK_SCALE, RANK_BIAS = 1024, 512
#: WDL of a child the tablebase does not cover (``None`` in MoveValue).
UNKNOWN_WDL = -2


def move_spec(text: str, variant) -> int:
    """A move as written, in the text layout without the capture bit, or :data:`NOT_A_MOVE`."""
    m = move_pattern(variant).fullmatch(text.strip())
    if not m:
        return NOT_A_MOVE
    letter, src, _, _, dst, plus = m.groups()
    try:
        to = parse_square(dst, variant)
        frm = TEXT_DROP if src is None else parse_square(src, variant)
    except ValueError:
        return NOT_A_MOVE
    piece = 1 + [p.letter for p in variant.pieces].index(letter)
    return piece | (to << TEXT_TO_SHIFT) | (TEXT_PROMOTION if plus else 0) | (frm << TEXT_FROM_SHIFT)


def mover_value_of_rank(rank: int) -> tuple:
    """(WDL, unsigned DTM) of playing a move, for its player, from its rank (as
    ``analysis.lines.mover_value`` of the MoveValue): a child lost in d plies is a win in d + 1."""
    kind, b = divmod(int(rank), RANK_SCALE)
    b -= RANK_BIAS
    return ((WIN, b + 1), (DRAW, 0), (LOSS, -b + 1), (None, None))[kind]


def move_text_of(code: int, variant) -> str:
    """Our text of a move text code (module docstring), e.g. ``'Cb3xb2'``."""
    letter = variant.pieces[(code & 7) - 1].letter
    src, dst = (code >> TEXT_FROM_SHIFT) & 31, (code >> TEXT_TO_SHIFT) & 15
    if src == TEXT_DROP:
        return f"{letter}*{square_name(dst, variant)}"
    return (f"{letter}{square_name(src, variant)}{'x' if code & TEXT_CAPTURE else '-'}{square_name(dst, variant)}"
            f"{'+' if code & TEXT_PROMOTION else ''}")


# --- kernels -----------------------------------------------------------------------------------


def text_code(board, turn, move):
    """The text code of a kernel move played on ``board`` (normalised) by ``turn``."""
    src = move & FROM_MASK
    dst = (move >> TO_SHIFT) & TO_MASK
    to = N_CELLS - 1 - dst if turn == GOTE else dst
    capture = TEXT_CAPTURE if (board >> (CELL_BITS * dst)) & CELL_MASK else 0
    promotion = TEXT_PROMOTION if move & PROMOTION else 0
    if src >= DROP:
        piece = SLOT_PIECE[src - DROP]
        return piece | (TEXT_DROP << TEXT_FROM_SHIFT) | (to << TEXT_TO_SHIFT)
    piece = (board >> (CELL_BITS * src)) & PIECE_MASK
    frm = N_CELLS - 1 - src if turn == GOTE else src
    return piece | (frm << TEXT_FROM_SHIFT) | (to << TEXT_TO_SHIFT) | capture | promotion


def _child_class(board, hand):
    """TERM_CAPTURED when the move took the royal piece, else the child's terminal class."""
    if find_piece(board, ROYAL) < 0:
        return TERM_CAPTURED
    return classify(board, hand)


def _played(board, turn, spec, moves, n):
    """Index among ``moves[:n]`` of the move written ``spec``, or -1."""
    for k in range(n):
        if text_code(board, turn, moves[k]) & ~TEXT_CAPTURE == spec:
            return k
    return -1


@njit
def _rank(wdl, dtm):
    """MoveValue.sort_key of a child's (wdl, unsigned dtm) as one integer."""
    if wdl == UNKNOWN_WDL:
        return 3 * RANK_SCALE + RANK_BIAS
    if wdl < 0:
        return RANK_BIAS + dtm
    if wdl == 0:
        return RANK_SCALE + RANK_BIAS
    return 2 * RANK_SCALE + RANK_BIAS - dtm


@kernel_options(parallel=True)
def _collect(start_board, start_hand, turn0, specs, ply_start, game_plies, key_base, keys):
    """Write the keys each game's replay needs into ``keys`` from ``key_base[g]`` (unused slots
    stay -1): per legal ply, the position before the move, then its non-terminal children."""
    for g in prange(game_plies.shape[0]):
        moves = np.empty(MAX_MOVES, np.int64)
        board, hand, turn, at = start_board, start_hand, turn0, key_base[g]
        for i in range(ply_start[g], ply_start[g] + game_plies[g]):
            spec = specs[i]
            if spec < 0 or game_over(board, hand):
                break
            n = gen_moves(board, hand, moves)
            k = _played(board, turn, spec, moves, n)
            if k < 0:
                break
            keys[at] = canonical_key(board, hand)
            at += 1
            for j in range(n):
                cb, ch = make_move(board, hand, moves[j])
                if _child_class(cb, ch) == NONTERMINAL:
                    keys[at] = canonical_key(cb, ch)
                    at += 1
            board, hand = make_move(board, hand, moves[k])
            turn = 1 - turn
            cls = _child_class(board, hand)
            if cls == TERM_CAPTURED or cls == TRY:
                break


@kernel_options(parallel=True)
def _judge(start_board, start_hand, turn0, specs, ply_start, game_plies, key_base, key_wdl, key_dtm, status,
           before_wdl, before_dtm, text, after_wdl, after_dtm, terminal, rank, best_rank, board_before, hand_before,
           board_after, hand_after, n_best, best_text):
    """Replay each game again, judging every ply from the looked-up values (module docstring):
    ``key_wdl``/``key_dtm`` are those of :func:`_collect`'s keys (UNKNOWN_WDL: not stored).

    Per ply ``i``: ``status`` (OK or why not judged), ``before_*`` the position's (wdl,
    unsigned dtm), ``text`` the played move's text code, ``after_*`` its child's (wdl, signed
    dtm; UNKNOWN_WDL when not covered), ``terminal`` its TERM_* class, ``rank`` and
    ``best_rank`` its rank and the best one, ``board_before``/``hand_before`` and
    ``board_after``/``hand_after`` the normalised states (board -1 once the royal piece is
    taken), ``n_best`` and ``best_text[i, :n_best]`` the best moves' text codes in generation
    order when the move is not one of them.
    """
    for g in prange(game_plies.shape[0]):
        moves = np.empty(MAX_MOVES, np.int64)
        ranks = np.empty(MAX_MOVES, np.int64)
        board, hand, turn, at, over = start_board, start_hand, turn0, key_base[g], False
        first, last = ply_start[g], ply_start[g] + game_plies[g]
        for i in range(first, last):
            status[i] = SKIPPED
        for i in range(first, last):
            board_before[i] = board
            hand_before[i] = hand
            if over:
                status[i] = OVER
                break
            spec = specs[i]
            if spec < 0 or game_over(board, hand):
                status[i] = ILLEGAL
                break
            n = gen_moves(board, hand, moves)
            k = _played(board, turn, spec, moves, n)
            if k < 0:
                status[i] = ILLEGAL
                break
            wdl, dtm = np.int64(key_wdl[at]), np.int64(key_dtm[at])
            at += 1
            parent = classify(board, hand)
            if wdl == UNKNOWN_WDL:
                if parent != CATCH:
                    status[i] = MISSING_BEFORE
                    break
                wdl, dtm = np.int64(1), np.int64(1)
            before_wdl[i], before_dtm[i] = wdl, dtm
            missing = False
            best = 4 * RANK_SCALE
            for j in range(n):
                cb, ch = make_move(board, hand, moves[j])
                cls = _child_class(cb, ch)
                if cls == NONTERMINAL:
                    cw, cd = np.int64(key_wdl[at]), np.int64(key_dtm[at])
                    at += 1
                    if cw == UNKNOWN_WDL and parent != CATCH:
                        board_after[i] = cb
                        hand_after[i] = ch
                        missing = True
                        break
                elif cls == CATCH:
                    cw, cd = np.int64(1), np.int64(1)
                else:  # a try, or the lion taken: the child has lost in 0 plies
                    cw, cd = np.int64(-1), np.int64(0)
                ranks[j] = _rank(cw, cd)
                best = min(best, ranks[j])
                if j == k:
                    after_wdl[i] = cw
                    after_dtm[i] = cd if cw > 0 else -cd
                    terminal[i] = TERM_NONE if cls == NONTERMINAL else cls
                    board_after[i] = -1 if cls == TERM_CAPTURED else cb
                    hand_after[i] = ch
            if missing:
                status[i] = MISSING_CHILD
                break
            status[i] = OK
            text[i] = text_code(board, turn, moves[k])
            rank[i], best_rank[i] = ranks[k], best
            nb = 0
            if ranks[k] != best:
                for j in range(n):
                    if ranks[j] == best:
                        best_text[i, nb] = text_code(board, turn, moves[j])
                        nb += 1
            n_best[i] = nb
            over = terminal[i] == TERM_CAPTURED or terminal[i] == TRY
            board = board_after[i]
            hand = hand_after[i]
            turn = 1 - turn


# --- the driver --------------------------------------------------------------------------------


@dataclass
class ReplayedGames:
    """Per ply arrays of :func:`replay_games` (names and meanings as in :func:`_judge`), the
    plies of all games one after another; ``ply_start[g]`` is game g's first ply.

    ``best_text`` holds, for the plies with ``n_best > 0`` only (in ply order), their best
    moves' text codes one after another; ``best_start`` the first of each of those plies'.
    """

    ply_start: np.ndarray
    game_plies: np.ndarray
    status: np.ndarray
    before_wdl: np.ndarray
    before_dtm: np.ndarray
    text: np.ndarray
    after_wdl: np.ndarray
    after_dtm: np.ndarray
    terminal: np.ndarray
    rank: np.ndarray
    best_rank: np.ndarray
    board_before: np.ndarray
    hand_before: np.ndarray
    board_after: np.ndarray
    hand_after: np.ndarray
    n_best: np.ndarray
    best_text: np.ndarray
    best_start: np.ndarray


def replay_games(tb, start, turn: int, specs: np.ndarray, game_plies: np.ndarray,
                 progress=None) -> ReplayedGames:
    """Replay games from one start and judge every ply against a tablebase.

    Parameters
    ----------
    tb : Tablebase
        Probed with :meth:`Tablebase.probe_many` (open it ``in_memory`` for a big input).
    start : (int, int)
        Normalised packed state of the start position (``Position.state()``), of the file's variant.
    turn : int
        Its side to move (SENTE 0, GOTE 1).
    specs : numpy.ndarray of int64, shape (n_plies,)
        :func:`move_spec` of every move of every game, game after game.
    game_plies : numpy.ndarray of int64, shape (n_games,)
        The number of moves of each game.
    progress : callable, optional
        ``progress(games_done)`` after each block of games.

    Returns
    -------
    ReplayedGames

    Raises
    ------
    TablebaseFileError
        If the file is damaged.
    """
    kernels = tb.game.jitted(sys.modules[__name__])
    slots = tb.game.layout["MAX_MOVES"] + 1  # key slots of one ply: the position before the move and each child
    max_moves = tb.game.layout["MAX_MOVES"]
    start_board, start_hand = np.int64(start[0]), np.int64(start[1])
    n_games = game_plies.shape[0]
    ply_start = np.zeros(n_games + 1, np.int64)
    np.cumsum(game_plies, out=ply_start[1:])
    n = int(ply_start[-1])
    out = {name: np.zeros(n, dtype) for name, dtype in (
        ("status", np.int8), ("before_wdl", np.int8), ("before_dtm", np.int16), ("text", np.int16),
        ("after_wdl", np.int8), ("after_dtm", np.int16), ("terminal", np.int8), ("rank", np.int16),
        ("best_rank", np.int16), ("board_before", np.int64), ("hand_before", np.int64), ("board_after", np.int64),
        ("hand_after", np.int64), ("n_best", np.int16))}
    best_parts, best_counts = [], []
    g0 = 0
    while g0 < n_games:  # blocks of about BLOCK_PLIES plies (at least one game)
        g1 = max(g0 + 1, int(np.searchsorted(ply_start, ply_start[g0] + BLOCK_PLIES, side="right")) - 1)
        g1 = min(g1, n_games)
        lo, hi = int(ply_start[g0]), int(ply_start[g1])
        local_start = ply_start[g0:g1] - lo
        plies = game_plies[g0:g1]
        key_base = local_start * slots
        keys = np.full((hi - lo) * slots, -1, np.int64)
        block_specs = specs[lo:hi]
        kernels._collect(start_board, start_hand, turn, block_specs, local_start, plies, key_base, keys)
        wanted = np.flatnonzero(keys >= 0)
        key_wdl = np.full(keys.shape[0], UNKNOWN_WDL, np.int8)
        key_dtm = np.zeros(keys.shape[0], np.int16)
        if wanted.size:
            wdl, dtm = tb.probe_many(keys[wanted])
            key_wdl[wanted] = wdl
            key_dtm[wanted] = np.abs(dtm)
        del keys
        best = np.zeros((hi - lo, max_moves), np.int16)
        views = {name: arr[lo:hi] for name, arr in out.items()}
        kernels._judge(start_board, start_hand, turn, block_specs, local_start, plies, key_base, key_wdl, key_dtm,
                       views["status"], views["before_wdl"], views["before_dtm"], views["text"], views["after_wdl"],
                       views["after_dtm"], views["terminal"], views["rank"], views["best_rank"], views["board_before"],
                       views["hand_before"], views["board_after"], views["hand_after"], views["n_best"], best)
        rows = np.flatnonzero(views["n_best"] > 0)
        counts = views["n_best"][rows].astype(np.int64)
        mask = np.arange(max_moves)[None, :] < counts[:, None]
        best_parts.append(best[rows][mask])
        best_counts.append(counts)
        g0 = g1
        if progress is not None:
            progress(g0)
    counts = np.concatenate(best_counts) if best_counts else np.zeros(0, np.int64)
    best_start = np.zeros(counts.shape[0] + 1, np.int64)
    np.cumsum(counts, out=best_start[1:])
    return ReplayedGames(ply_start, game_plies, best_text=np.concatenate(best_parts) if best_parts
                         else np.zeros(0, np.int16), best_start=best_start, **out)
