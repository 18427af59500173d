"""Replaying many games against a tablebase at once: the arithmetic of ``verify-line --file``.

:meth:`Tablebase.probe_moves` judges one position at a time in Python (tens of microseconds a
move, more when chunks must be inflated). Here the games are replayed by jitted kernels in
two passes over a block of games:

1. :func:`_collect` replays every game and writes the canonical key of each position before a
   move and of each non-terminal child (terminal positions are never stored) into one array,
   each game in its own stretch of ``plies * (MAX_MOVES + 1)`` slots;
2. the keys are looked up in one batch (:meth:`Tablebase.probe_many`, in memory for a big
   input), and :func:`_judge` replays the games again, reading the values in the same order,
   and writes a :data:`PLY` record per ply: the value before the move, the played move's value
   (its :func:`~dobutsu_tb.tablebase.values.move_rank`, as :meth:`MoveValue.sort_key`), the
   position after it, the best moves' text codes when it is not one of them, and why a game
   stops early.

Both passes count the occurrences of each position in a game (a small hash table a game): a move
to a position that has occurred twice before is a draw by repetition (docs/rules.md §3) and ends
the game, as ``analysis.lines.verify_line`` judges it.

The cost per ply is linear (one move generation and a constant number of lookups per move);
the Python work left per ply is formatting. :func:`replay_games` is the driver, block by
block; ``analysis.lines.verify_games`` turns its arrays into line reports.

Moves travel as the text codes of :mod:`~dobutsu_tb.tablebase.game.notation`
(:func:`~dobutsu_tb.tablebase.game.notation.text_code`). A move as the player wrote it
(:func:`move_spec`) is its text code without the capture bit, which is not compared: as
:func:`~dobutsu_tb.tablebase.game.notation.parse_move`, a capture written with ``-`` or a move
written with ``x`` is accepted.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from dobutsu_tb.encoding.binding import kernel_options
from dobutsu_tb.encoding.jit import njit, prange
from dobutsu_tb.tablebase.game import notation
from dobutsu_tb.tablebase.game.key import canonical_key
from dobutsu_tb.tablebase.game.layout import CATCH, MAX_MOVES, NONTERMINAL, ROYAL, TRY
from dobutsu_tb.tablebase.game.notation import TEXT_CAPTURE, IllegalMoveError, Move, text_code
from dobutsu_tb.tablebase.game.position import PositionError
from dobutsu_tb.tablebase.game.rules import classify, find_piece, game_over, gen_moves, make_move
from dobutsu_tb.tablebase.values import (
    DRAW,
    LOSS,
    RANK_SCALE,
    UNKNOWN,
    WIN,
    Terminal,
    known_value_of_rank,
    move_rank,
    move_value,
)

#: :func:`move_spec` of a text that is not a move.
NOT_A_MOVE = -1

#: The kernels bound to each variant's tables (Game.jitted).
__kernels__ = ("_child_class", "_played", "_collect", "_judge")
#: Plies replayed per block (the key array of a block is MAX_MOVES + 1 times as long).
BLOCK_PLIES = 1 << 15

# Terminal class of a move's child (``terminal`` of a PLY record): NONTERMINAL, CATCH and TRY of
# the rules, TERM_CAPTURED when the move took the royal piece, or TERM_REPETITION when it made a
# position occur for the third time in the game (a draw, docs/rules.md §3).
TERM_NONE, TERM_CAPTURED, TERM_REPETITION = NONTERMINAL, 3, 4
#: The :class:`~dobutsu_tb.tablebase.values.Terminal` of each of those codes (a repetition has
#: none: the tablebase's values know no history).
TERMINALS = {TERM_NONE: None, CATCH: Terminal.CATCH, TRY: Terminal.TRY, TERM_CAPTURED: Terminal.ROYAL_CAPTURED}

# Why a ply was not judged (``status``); OK plies were.
OK, OVER, ILLEGAL, MISSING_BEFORE, MISSING_CHILD, SKIPPED = 0, 1, 2, 3, 4, 5

#: WDL of a position the tablebase does not cover (as :meth:`Tablebase.probe_many` gives it).
UNKNOWN_WDL = UNKNOWN
#: The rank of a move to a position the file does not cover, and one worse than any.
UNKNOWN_RANK, NO_RANK = 3 * RANK_SCALE, 4 * RANK_SCALE

#: What :func:`_judge` writes per ply (values as docs/rules.md §7: signed DTM in plies):
#: ``status`` (OK, or why the ply was not judged), ``before_wdl``/``before_dtm`` the position
#: before the move, ``text`` the played move's text code, ``after_wdl``/``after_dtm`` the position
#: after it (UNKNOWN_WDL when not covered; a loss in 0 after the royal piece's capture),
#: ``terminal`` its class (TERMINALS), ``rank`` and ``best_rank`` the played move's rank and the
#: best one's (:func:`~dobutsu_tb.tablebase.values.move_rank`), ``board_before``/``hand_before`` and
#: ``board_after``/``hand_after`` the normalised states (board -1 once the royal piece is taken),
#: ``n_best`` how many best moves follow in the block's ``best_text`` row when the move is not one.
PLY = np.dtype([("status", np.int8), ("before_wdl", np.int8), ("after_wdl", np.int8), ("terminal", np.int8),
                ("text", np.int16), ("n_best", np.int16), ("before_dtm", np.int32), ("after_dtm", np.int32),
                ("rank", np.int32), ("best_rank", np.int32), ("board_before", np.int64),
                ("hand_before", np.int64), ("board_after", np.int64), ("hand_after", np.int64)], align=True)

_move_rank = njit(move_rank)
_move_value = njit(move_value)
_value_of_rank = njit(known_value_of_rank)


def move_spec(text: str, variant) -> int:
    """A move as written: its text code without the capture bit, or :data:`NOT_A_MOVE`."""
    try:
        return Move.from_text(text, variant).code(variant) & ~TEXT_CAPTURE
    except (IllegalMoveError, PositionError):
        return NOT_A_MOVE


# --- kernels -----------------------------------------------------------------------------------


def _child_class(rules, board, hand):
    """TERM_CAPTURED when the move took the royal piece, else the child's terminal class."""
    if find_piece(board, hand, rules[ROYAL]) < 0:
        return TERM_CAPTURED
    return classify(rules, board, hand)


def _played(rules, board, hand, turn, spec, moves, n):
    """Index among ``moves[:n]`` of the move written ``spec``, or -1."""
    for k in range(n):
        if text_code(rules, board, hand, turn, moves[k]) & ~TEXT_CAPTURE == spec:
            return k
    return -1


@njit
def _occurrences(seen, board, hand, turn, add):
    """How often the position ``(board, hand)`` (normalised) with ``turn`` to move has occurred in
    a game, by ``seen`` (:func:`_occurrence_table`); one more occurrence is counted when ``add``."""
    mask = seen.shape[0] - 1
    code = hand * 2 + turn
    x = (np.uint64(board) * np.uint64(0x9E3779B97F4A7C15)) ^ (np.uint64(code) * np.uint64(0xC2B2AE3D27D4EB4F))
    i = np.int64((x >> np.uint64(29)) & np.uint64(mask))
    while seen[i, 0] != 0:  # (a board is never empty: 0 marks a free row)
        if seen[i, 0] == board and seen[i, 1] == code:
            n = seen[i, 2]
            if add:
                seen[i, 2] = n + 1
            return n
        i = (i + 1) & mask
    if add:
        seen[i, 0], seen[i, 1], seen[i, 2] = board, code, 1
    return 0


@njit
def _occurrence_table(positions):
    """An empty table of occurrences for a game of ``positions`` positions (rows: board, hand
    and turn, count; at most half full)."""
    rows = 4
    while rows < 2 * positions:
        rows *= 2
    return np.zeros((rows, 3), np.int64)


@kernel_options(parallel=True)
def _collect(rules, start, games, keys, ends):
    """Write the keys each game's replay needs into ``keys`` from ``key_base[g]`` up to
    ``ends[g]`` (the rest of its stretch is left unwritten): per legal ply until the game is
    over, the position before the move, then its non-terminal children.

    ``start`` is ``(board, hand, turn)`` of the start position, ``games`` ``(specs, ply_start,
    game_plies, key_base)``: the moves' :func:`move_spec` one game after another, each game's
    first ply and number of plies, and where its keys go."""
    start_board, start_hand, turn0 = start
    specs, ply_start, game_plies, key_base = games
    for g in prange(game_plies.shape[0]):
        moves = np.empty(rules[MAX_MOVES], np.int64)
        board, hand, turn, at = start_board, start_hand, turn0, key_base[g]
        seen = _occurrence_table(game_plies[g] + 1)
        _occurrences(seen, board, hand, turn, True)
        for i in range(ply_start[g], ply_start[g] + game_plies[g]):
            spec = specs[i]
            if spec < 0 or game_over(rules, board, hand):
                break
            n = gen_moves(rules, board, hand, moves)
            k = _played(rules, board, hand, turn, spec, moves, n)
            if k < 0:
                break
            keys[at] = canonical_key(rules, board, hand)
            at += 1
            for j in range(n):
                cb, ch = make_move(rules, board, hand, moves[j])
                if _child_class(rules, cb, ch) == NONTERMINAL:
                    keys[at] = canonical_key(rules, cb, ch)
                    at += 1
            board, hand = make_move(rules, board, hand, moves[k])
            turn = 1 - turn
            cls = _child_class(rules, board, hand)
            if cls == TERM_CAPTURED or cls == TRY or _occurrences(seen, board, hand, turn, True) >= 2:
                break  # the game is over (a capture, a try, or a position's third occurrence)
        ends[g] = at


@kernel_options(parallel=True)
def _judge(rules, start, games, found, plies, best_text):
    """Replay each game again, judging every ply from the looked-up values (module docstring).

    ``start`` and ``games`` are :func:`_collect`'s; ``found`` is ``(wdl, dtm)`` of
    :func:`_collect`'s keys (signed DTM; UNKNOWN_WDL: not stored). Writes a :data:`PLY` record
    per ply into ``plies`` and, for a move that is not among the best, the best moves' text codes
    in generation order into ``best_text[i, :n_best]``.
    """
    start_board, start_hand, turn0 = start
    specs, ply_start, game_plies, key_base = games
    key_wdl, key_dtm = found
    for g in prange(game_plies.shape[0]):
        moves = np.empty(rules[MAX_MOVES], np.int64)
        ranks = np.empty(rules[MAX_MOVES], np.int64)
        board, hand, turn, at, over = start_board, start_hand, turn0, key_base[g], False
        first, last = ply_start[g], ply_start[g] + game_plies[g]
        seen = _occurrence_table(game_plies[g] + 1)
        _occurrences(seen, board, hand, turn, True)
        for i in range(first, last):
            plies[i].status = SKIPPED
        for i in range(first, last):
            ply = plies[i]
            ply.board_before = board
            ply.hand_before = hand
            if over:
                ply.status = OVER
                break
            spec = specs[i]
            if spec < 0 or game_over(rules, board, hand):
                ply.status = ILLEGAL
                break
            n = gen_moves(rules, board, hand, moves)
            k = _played(rules, board, hand, turn, spec, moves, n)
            if k < 0:
                ply.status = ILLEGAL
                break
            wdl, dtm = np.int64(key_wdl[at]), np.int64(key_dtm[at])
            at += 1
            parent = classify(rules, board, hand)
            if wdl == UNKNOWN_WDL:
                if parent != CATCH:
                    ply.status = MISSING_BEFORE
                    break
                wdl, dtm = np.int64(WIN), np.int64(1)
            ply.before_wdl, ply.before_dtm = wdl, dtm
            missing = False
            repeats = False  # a move makes a position occur the third time: a draw
            best = NO_RANK
            for j in range(n):
                cb, ch = make_move(rules, board, hand, moves[j])
                cls = _child_class(rules, cb, ch)
                third = (cls == NONTERMINAL or cls == CATCH) and _occurrences(seen, cb, ch, 1 - turn, False) >= 2
                if cls == NONTERMINAL:
                    cw, cd = np.int64(key_wdl[at]), np.int64(key_dtm[at])
                    at += 1
                    if cw == UNKNOWN_WDL and parent != CATCH:
                        ply.board_after = cb
                        ply.hand_after = ch
                        missing = True
                        break
                elif cls == CATCH:
                    cw, cd = np.int64(WIN), np.int64(1)
                else:  # a try, or the royal piece taken: the child has lost in 0 plies
                    cw, cd = np.int64(LOSS), np.int64(0)
                mw, md = _move_value(cw, cd)
                if third:
                    mw, md = DRAW, 0
                ranks[j] = _move_rank(mw, md)
                repeats |= third
                best = min(best, ranks[j])
                if j == k:
                    ply.after_wdl = DRAW if third else cw
                    ply.after_dtm = 0 if third else cd
                    ply.terminal = TERM_REPETITION if third else cls
                    ply.board_after = -1 if cls == TERM_CAPTURED else cb
                    ply.hand_after = ch
            if missing:
                ply.status = MISSING_CHILD
                break
            ply.status = OK
            if repeats:  # the position's value in this game: its best move's (docs/rules.md §3)
                ply.before_wdl, ply.before_dtm = _value_of_rank(best)
            ply.text = text_code(rules, board, hand, turn, moves[k])
            ply.rank, ply.best_rank = ranks[k], best
            nb = 0
            if ranks[k] != best:
                for j in range(n):
                    if ranks[j] == best:
                        best_text[i, nb] = text_code(rules, board, hand, turn, moves[j])
                        nb += 1
            ply.n_best = nb
            over = ply.terminal == TERM_CAPTURED or ply.terminal == TRY or ply.terminal == TERM_REPETITION
            board = ply.board_after
            hand = ply.hand_after
            turn = 1 - turn
            if not over:
                _occurrences(seen, board, hand, turn, True)


# --- the driver --------------------------------------------------------------------------------


@dataclass
class ReplayedGames:
    """What :func:`replay_games` found: a :data:`PLY` record per ply, the plies of all games one
    after another (``ply_start[g]`` is game g's first ply).

    ``best_text`` holds, for the plies with ``n_best > 0`` only (in ply order), their best
    moves' text codes one after another; ``best_start`` the first of each of those plies'.
    """

    ply_start: np.ndarray
    game_plies: np.ndarray
    plies: np.ndarray
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
    kernels = tb.game.jitted(notation, sys.modules[__name__])
    slots = tb.game.layout["MAX_MOVES"] + 1  # key slots of one ply: the position before the move and each child
    max_moves = tb.game.layout["MAX_MOVES"]
    start_state = (np.int64(start[0]), np.int64(start[1]), np.int64(turn))
    n_games = game_plies.shape[0]
    ply_start = np.zeros(n_games + 1, np.int64)
    np.cumsum(game_plies, out=ply_start[1:])
    plies = np.zeros(int(ply_start[-1]), PLY)
    best_parts, best_counts = [], []
    g0 = 0
    while g0 < n_games:  # blocks of about BLOCK_PLIES plies (at least one game)
        g1 = max(g0 + 1, int(np.searchsorted(ply_start, ply_start[g0] + BLOCK_PLIES, side="right")) - 1)
        g1 = min(g1, n_games)
        lo, hi = int(ply_start[g0]), int(ply_start[g1])
        local_start = ply_start[g0:g1] - lo
        games = (np.ascontiguousarray(specs[lo:hi]), local_start, np.ascontiguousarray(game_plies[g0:g1]),
                 local_start * slots)
        # Room for every ply's keys, written only as far as each game goes: a game that ends early
        # (a repetition, an illegal move) costs the memory of the plies it played, not of its text.
        keys = np.empty((hi - lo) * slots, np.int64)
        ends = np.empty(g1 - g0, np.int64)
        kernels._collect(tb.game.rules_array, start_state, games, keys, ends)
        lengths = ends - games[3]  # the keys written: each game's from its base to its end
        wanted = np.repeat(games[3] - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))
        key_wdl = np.empty(keys.shape[0], np.int8)  # (read by _judge only where _collect wrote)
        key_dtm = np.empty(keys.shape[0], np.int32)
        if wanted.size:
            key_wdl[wanted], key_dtm[wanted] = tb.probe_many(keys[wanted])
        del keys
        best = np.zeros((hi - lo, max_moves), np.int16)
        block = plies[lo:hi]
        kernels._judge(tb.game.rules_array, start_state, games, (key_wdl, key_dtm), block, best)
        rows = np.flatnonzero(block["n_best"] > 0)
        counts = block["n_best"][rows].astype(np.int64)
        mask = np.arange(max_moves)[None, :] < counts[:, None]
        best_parts.append(best[rows][mask])
        best_counts.append(counts)
        g0 = g1
        if progress is not None:
            progress(g0)
    counts = np.concatenate(best_counts) if best_counts else np.zeros(0, np.int64)
    best_start = np.zeros(counts.shape[0] + 1, np.int64)
    np.cumsum(counts, out=best_start[1:])
    best_text = np.concatenate(best_parts) if best_parts else np.zeros(0, np.int16)
    return ReplayedGames(ply_start, game_plies, plies, best_text, best_start)
