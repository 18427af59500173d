"""Cooperative shortest Othello (協力最短詰めオセロ): the fewest placements after which the
board holds discs of one colour only, both sides cooperating (docs/puzzles.md §5).

A position is three int64: Black's discs, White's discs (bit ``8 * row + column``, a1 = bit 0,
row 1 at the top) and the side to move (0 Black, 1 White). A player with no placement passes; a
pass is not a placement. Each placement adds a disc, so the positions after d placements form
one level: :func:`encoding.search.bfs_wide_levels` goes level by level, de-duplicating each
level exactly and summing the number of placement sequences that reach each position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from dobutsu_tb.analysis.puzzles import PuzzleInputError
from dobutsu_tb.analysis.textfiles import shorten
from dobutsu_tb.encoding.bits import popcount
from dobutsu_tb.encoding.jit import njit, prange
from dobutsu_tb.encoding.search import bfs_wide_levels

_DIRS = np.array([1, -1, 8, -8, 9, -9, 7, -7], np.int64)
BLACK, WHITE = 0, 1
START = (np.int64((1 << 28) | (1 << 35)), np.int64((1 << 27) | (1 << 36)), BLACK)  # e4 d5 / d4 e5
#: A square's name: column a to h, row 1 to 8.
_SQUARE = re.compile(r"[a-h][1-8]")


@njit
def _shift(x, d):
    """Discs moved one step in direction d (a bit offset), dropping those leaving the board."""
    if d > 0:
        y = x << d
    else:
        k = -d
        y = (x >> k) & ((np.int64(1) << (64 - k)) - 1)
    if d == 1 or d == 9 or d == -7:  # towards higher columns: nothing may land on column a
        y &= -0x0101010101010102
    elif d == -1 or d == -9 or d == 7:  # towards lower columns: nothing may land on column h
        y &= 0x7F7F7F7F7F7F7F7F
    return y


@njit
def _moves(own, opp):
    empty = ~(own | opp)
    out = np.int64(0)
    for i in range(8):
        d = _DIRS[i]
        x = _shift(own, d) & opp
        for _ in range(5):
            x |= _shift(x, d) & opp
        out |= _shift(x, d) & empty
    return out


@njit
def _flips(own, opp, sq):
    flips = np.int64(0)
    start = np.int64(1) << sq
    for i in range(8):
        d = _DIRS[i]
        line = np.int64(0)
        x = _shift(start, d)
        while x != 0 and (x & opp) != 0:
            line |= x
            x = _shift(x, d)
        if x != 0 and (x & own) != 0:
            flips |= line
    return flips


@njit
def _children(black, white, turn, out, start):
    """Write (black, white, turn, square) of each child into out[start:], return how many.
    Passes are played at once; a finished game has no children."""
    own, opp = (black, white) if turn == BLACK else (white, black)
    m = _moves(own, opp)
    if m == 0:
        turn = 1 - turn
        own, opp = opp, own
        m = _moves(own, opp)
        if m == 0:
            return 0
    n = 0
    for sq in range(64):
        if (m >> sq) & 1:
            f = _flips(own, opp, sq)
            new_own = own | f | (np.int64(1) << sq)
            new_opp = opp & ~f
            k = start + n
            if turn == BLACK:
                out[k, 0], out[k, 1] = new_own, new_opp
            else:
                out[k, 0], out[k, 1] = new_opp, new_own
            out[k, 2] = 1 - turn
            out[k, 3] = sq
            n += 1
    return n


@njit(parallel=True)
def _count_children(level, counts):
    for i in prange(level.shape[0]):
        own, opp = (level[i, 0], level[i, 1]) if level[i, 2] == BLACK else (level[i, 1], level[i, 0])
        m = _moves(own, opp)
        if m == 0:
            m = _moves(opp, own)
        counts[i] = popcount(m)


@njit(parallel=True)
def _fill_children(level, offsets, out, parent):
    for i in prange(level.shape[0]):
        n = _children(level[i, 0], level[i, 1], level[i, 2], out, offsets[i])
        for k in range(n):
            parent[offsets[i] + k] = i


@njit(parallel=True)
def _count_goal_children(level, colour, counts):
    """The children of each row that leave only one colour (only ``colour``: 0 Black, 1 White,
    -1 either): a placement that flips every disc of the opponent, who then has none."""
    for i in prange(level.shape[0]):
        turn = level[i, 2]
        own, opp = (level[i, 0], level[i, 1]) if turn == BLACK else (level[i, 1], level[i, 0])
        m = _moves(own, opp)
        if m == 0:
            turn = 1 - turn
            own, opp = opp, own
            m = _moves(own, opp)
        n = 0
        if colour < 0 or colour == turn:
            for sq in range(64):
                if (m >> sq) & 1 and _flips(own, opp, sq) == opp:
                    n += 1
        counts[i] = n


def square_name(sq: int) -> str:
    return "abcdefgh"[sq % 8] + str(sq // 8 + 1)


def board_text(black: int, white: int) -> str:
    """8 rows with coordinates: ``X`` Black, ``O`` White, ``.`` empty."""
    rows = ["  a b c d e f g h"]
    for r in range(8):
        cells = ["X" if (black >> (8 * r + c)) & 1 else "O" if (white >> (8 * r + c)) & 1 else "."
                 for c in range(8)]
        rows.append(f"{r + 1} " + " ".join(cells))
    return "\n".join(rows)


def parse_board(text: str, to_move: str = "black") -> tuple[int, int, int]:
    """A start position: 8 rows of 8 cells (``X``/``x``/``B``/``*`` Black, ``O``/``o``/``W`` White,
    ``.``/``-`` empty; spaces ignored; lines starting with ``#`` skipped).

    Raises
    ------
    PuzzleInputError
        For a wrong number of rows or cells, an unknown character, or no disc at all.
    """
    rows = [ln.replace(" ", "") for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if len(rows) != 8:
        raise PuzzleInputError(f"an Othello board has 8 rows, got {len(rows)}")
    black = white = 0
    for r, row in enumerate(rows):
        if len(row) != 8:
            raise PuzzleInputError(f"row {r + 1} has {len(row)} cells, not 8")
        for c, ch in enumerate(row):
            if ch in "XxB*":
                black |= 1 << (8 * r + c)
            elif ch in "OoW":
                white |= 1 << (8 * r + c)
            elif ch not in ".-":
                raise PuzzleInputError(f"row {r + 1}: unknown cell {ch!r} (X black, O white, . empty)")
    if not black and not white:
        raise PuzzleInputError("the board has no disc")
    if to_move not in ("black", "white"):
        raise PuzzleInputError(f"the side to move is 'black' or 'white', not {to_move!r}")
    return _signed(black), _signed(white), BLACK if to_move == "black" else WHITE


def _signed(x: int) -> int:
    return x - (1 << 64) if x >> 63 else x


@dataclass
class OthelloResult:
    """Answer of :func:`solve`.

    Attributes
    ----------
    placements : int or None
        The fewest placements, or None if no one-colour position is reached within the limit.
    moves : list of str
        One shortest sequence of placements (squares like ``c4``).
    positions : list of (int, int, int)
        The positions after each placement, from the start.
    count : int
        The number of shortest placement sequences.
    level_sizes : list of int
        Distinct positions after each number of placements, up to the one before the goal.
    exhausted : bool
        No solution (``placements`` None) and none at any depth: every sequence of placements
        ends (no side can place) before the limit, so the goal is out of reach, not only beyond
        the limit.
    """

    placements: int | None
    moves: list
    positions: list
    count: int
    level_sizes: list
    exhausted: bool = False


def solve(start=None, colour: str | None = None, max_placements: int = 12) -> OthelloResult:
    """The fewest placements after which only one colour is left (or only ``colour``).

    Parameters
    ----------
    start : (int, int, int), optional
        (black, white, side to move) from :func:`parse_board`; default the standard start.
    colour : {'black', 'white'} or None
        The colour that must remain; None for either.
    max_placements : int
        Deepest level searched.

    Returns
    -------
    OthelloResult
        With ``placements`` 0 (no moves, one sequence: the empty one) when the goal already
        holds at the start: no search is made.

    Raises
    ------
    PuzzleInputError
        For a colour other than those above.
    """
    if colour not in (None, "black", "white"):
        raise PuzzleInputError(f"colour must be 'black' or 'white', not {colour!r}")
    black, white, turn = start if start is not None else START

    def goal_mask(states):
        b, w = states[:, 0], states[:, 1]
        return ((b == 0) | (w == 0)) if colour is None else (w == 0) if colour == "black" else (b == 0)

    if goal_mask(np.array([[black, white]], np.int64))[0]:
        return OthelloResult(0, [], [], 1, [1])
    code = -1 if colour is None else BLACK if colour == "black" else WHITE
    result = bfs_wide_levels([black, white, turn], _count_children, _fill_children, goal_mask, max_placements,
                             lambda level, counts: _count_goal_children(level, code, counts))
    return OthelloResult(result.depth, [square_name(sq) for sq in result.labels],
                         [tuple(int(v) for v in row) for row in result.path], result.count, result.level_sizes,
                         result.depth is None and len(result.level_sizes) <= max_placements)


def goal_text(black: int, white: int) -> str:
    """Which colour is alone on a board where only one is left (the goal), e.g. ``'only black
    discs are on the board'``."""
    return f"only {'white' if int(black) == 0 else 'black'} discs are on the board"


def parse_moves(text: str) -> list[str]:
    """Placements written as squares ``a1`` to ``h8`` (columns a to h, rows 1 to 8), separated
    by spaces or commas.

    Raises
    ------
    PuzzleInputError
        For anything that is not such a square (the message says which placement).
    """
    moves = text.replace(",", " ").split()
    _check_squares(moves)
    return moves


def _check_squares(moves) -> None:
    for k, mv in enumerate(moves, 1):
        if not isinstance(mv, str) or not _SQUARE.fullmatch(mv):
            raise PuzzleInputError(f"placement {k}: {shorten(str(mv))!r} is not a square a1 to h8")


def replay(moves: list[str], start=None) -> tuple[list[str], tuple]:
    """Play a placement sequence with plain Python rules (passes automatic); returns the
    problems found and the final (black, white).

    Raises
    ------
    PuzzleInputError
        For a move that is not a square a1 to h8 (:func:`parse_moves`).
    """
    _check_squares(moves)
    black, white, turn = (int(v) & ((1 << 64) - 1) for v in (start or START))
    problems = []
    dirs = [(dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1) if (dr, dc) != (0, 0)]

    def flips(own, opp, r, c):
        out = 0
        for dr, dc in dirs:
            line, rr, cc = 0, r + dr, c + dc
            while 0 <= rr < 8 and 0 <= cc < 8 and (opp >> (8 * rr + cc)) & 1:
                line |= 1 << (8 * rr + cc)
                rr, cc = rr + dr, cc + dc
            if line and 0 <= rr < 8 and 0 <= cc < 8 and (own >> (8 * rr + cc)) & 1:
                out |= line
        return out

    def legal(own, opp):
        return [(r, c) for r in range(8) for c in range(8)
                if not ((own | opp) >> (8 * r + c)) & 1 and flips(own, opp, r, c)]

    for k, mv in enumerate(moves, 1):
        own, opp = (black, white) if turn == BLACK else (white, black)
        if not legal(own, opp):
            turn = 1 - turn
            own, opp = opp, own
        r, c = int(mv[1]) - 1, "abcdefgh".index(mv[0])
        if (r, c) not in legal(own, opp):
            problems.append(f"placement {k}: {mv} is not legal")
            break
        f = flips(own, opp, r, c)
        own, opp = own | f | (1 << (8 * r + c)), opp & ~f
        black, white = (own, opp) if turn == BLACK else (opp, own)
        turn = 1 - turn
    return problems, (black, white)
