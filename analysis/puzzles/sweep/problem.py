"""Room Sweeper problems and routes: the tile codes, :class:`Problem`, the problem file format
and the routes' text form (docs/puzzles.md §4).

Problem files: ``W H``, then H rows of W tile codes, then for boys, girls and robots in turn a
count and that many step budgets (given to that kind's cells in reading order). Text after a
``#`` on a line is a comment (our addition to the format).

Routes (output of the solver, input of ``--check``): one line per cleaner, boys, girls, robots,
each in reading order: ``boy 2,3 RRDL`` (kind, start row and column from 1, steps U D L R, or
``-`` for none).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dobutsu_tb.analysis.puzzles import PuzzleInputError
from dobutsu_tb.analysis.textfiles import shorten, without_comments
from dobutsu_tb.encoding.words import counted

#: Tile codes of docs/puzzles.md §4.
DIRTY, CLEAN, BOY, GIRL, ROBOT, PUDDLE, APPLE, BOTTLE, BIN, BOX, OBSTACLE = range(11)
KINDS = ("boy", "girl", "robot")
#: A step's letter and its (row, column) offset; a direction's number is its index in DIRS.
STEPS = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
DIRS = "UDLR"
#: Largest board, in cells (16 x 16: a wide bit set of four int64 words).
MAX_CELLS = 256
#: Most cleaners (the search keeps a set of cleaners in one int64).
MAX_CLEANERS = 62
#: Largest step budget (the search keeps a row of state per step, and the key of its table of dead
#: nodes packs a step count in 12 bits).
MAX_BUDGET = 1000
#: A number of a problem file: ASCII digits, an optional sign (``int`` would also take ``'1_0'``
#: or Arabic-Indic digits).
_INTEGER = re.compile(r"[+-]?[0-9]+")


@dataclass
class Problem:
    """A Room Sweeper problem.

    Attributes
    ----------
    width, height : int
    tiles : list of list of int
        Tile codes, ``tiles[row][col]``.
    cleaners : list of (str, int, int, int)
        (kind, row, col, step budget) in file order: boys, girls, robots, each in reading order.
    """

    width: int
    height: int
    tiles: list
    cleaners: list

    def board_text(self, tiles=None) -> str:
        """The board as rows of tile codes.

        Parameters
        ----------
        tiles : list of list of int, optional
            Another board of the same size (the simulator's final board); default the problem's.

        Returns
        -------
        str
        """
        tiles = tiles or self.tiles
        return "\n".join(" ".join(f"{t:2d}" for t in row) for row in tiles)


def parse_problem(text: str) -> Problem:
    """Read the problem format of docs/puzzles.md §4.

    Parameters
    ----------
    text : str
        The file's text (see the module docstring).

    Returns
    -------
    Problem

    Raises
    ------
    PuzzleInputError
        For a malformed file: missing numbers, an unknown tile code, a budget count that does not
        match the board's cleaners, a budget over :data:`MAX_BUDGET`, no cleaner at all or more
        than :data:`MAX_CLEANERS`, a board of more than :data:`MAX_CELLS` cells.
    """
    tokens = "\n".join(without_comments(line) for line in text.splitlines()).split()
    bad = next((tok for tok in tokens if not _INTEGER.fullmatch(tok)), None)
    if bad is not None:
        raise PuzzleInputError(f"the problem holds something that is not an integer: {shorten(bad)!r}")
    nums = [int(tok) for tok in tokens]
    if len(nums) < 2:
        raise PuzzleInputError("the problem must start with the width and the height")
    w, h = nums[0], nums[1]
    if w < 1 or h < 1 or w * h > MAX_CELLS:
        raise PuzzleInputError(f"a {w} x {h} board: width and height must be >= 1, at most {MAX_CELLS} cells")
    if len(nums) < 2 + w * h:
        raise PuzzleInputError(f"the board needs {w * h} tile codes, the file has {len(nums) - 2}")
    flat = nums[2: 2 + w * h]
    for i, t in enumerate(flat):
        if not 0 <= t <= 10:
            raise PuzzleInputError(f"row {i // w + 1}, column {i % w + 1}: unknown tile code {t} (0..10)")
    tiles = [flat[r * w:(r + 1) * w] for r in range(h)]
    rest = nums[2 + w * h:]
    cleaners = []
    for kind, code in zip(KINDS, (BOY, GIRL, ROBOT)):
        cells = [(r, c) for r in range(h) for c in range(w) if tiles[r][c] == code]
        if not rest:
            raise PuzzleInputError(f"the {kind} count is missing")
        n, rest = rest[0], rest[1:]
        if n < 0:
            raise PuzzleInputError(f"the {kind} count must be 0 or more, got {n}")
        if n != len(cells):
            raise PuzzleInputError(f"the file gives a {kind} count of {n} but the board has "
                                   f"{counted(len(cells), kind)}")
        if len(rest) < n:
            raise PuzzleInputError(f"{counted(n, kind + ' budget')} announced, {len(rest)} given")
        for (r, c), budget in zip(cells, rest[:n]):
            if not 0 <= budget <= MAX_BUDGET:
                raise PuzzleInputError(f"a step budget must be 0..{MAX_BUDGET}, got {budget}")
            cleaners.append((kind, r, c, budget))
        rest = rest[n:]
    if rest:
        raise PuzzleInputError(f"{counted(len(rest), 'number')} left over after the robots' budgets")
    if not cleaners:
        raise PuzzleInputError("the board has no cleaner")
    if len(cleaners) > MAX_CLEANERS:
        raise PuzzleInputError(f"{len(cleaners)} cleaners: at most {MAX_CLEANERS}")
    return Problem(w, h, tiles, cleaners)


def read_problem(path) -> Problem:
    """Read a problem file (see :func:`parse_problem`).

    Parameters
    ----------
    path : str or pathlib.Path

    Returns
    -------
    Problem

    Raises
    ------
    PuzzleInputError
        For a malformed file.
    """
    return parse_problem(Path(path).read_text())


def routes_text(problem: Problem, routes: list[str]) -> str:
    """The routes, one line per cleaner (``boy 2,3 RRDL``, ``-`` for no step).

    Parameters
    ----------
    problem : Problem
    routes : list of str
        One route per cleaner of ``problem.cleaners``, in that order.

    Returns
    -------
    str
    """
    return "\n".join(f"{kind} {r + 1},{c + 1} {route or '-'}"
                     for (kind, r, c, _), route in zip(problem.cleaners, routes))


def parse_routes(problem: Problem, text: str) -> list[str]:
    """Routes in the format :func:`routes_text` writes (lines that do not start with a kind of
    cleaner are ignored, so the solver's whole output can be read back).

    Parameters
    ----------
    problem : Problem
    text : str

    Returns
    -------
    list of str
        One route per cleaner, in the problem's order.

    Raises
    ------
    PuzzleInputError
        For a wrong number of lines or a line that names another cleaner.
    """
    lines = [ln.split() for ln in text.splitlines() if ln.split() and ln.split()[0] in KINDS]
    if len(lines) != len(problem.cleaners):
        raise PuzzleInputError(f"{counted(len(lines), 'route line')} for {counted(len(problem.cleaners), 'cleaner')}")
    routes = []
    for k, (parts, (kind, r, c, _)) in enumerate(zip(lines, problem.cleaners), 1):
        if len(parts) != 3 or parts[0] != kind or parts[1] != f"{r + 1},{c + 1}":
            raise PuzzleInputError(f"route line {k} must read '{kind} {r + 1},{c + 1} STEPS'")
        routes.append("" if parts[2] == "-" else parts[2].upper())
    return routes

