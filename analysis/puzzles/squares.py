"""Cross Squared Number Puzzle (Cマガジン 2000/01; SPEC §2.3).

Fill every white cell of a grid with a digit so that every horizontal (left to right) and
vertical (top to bottom) run of two or more white cells reads as a perfect square without a
leading zero. A white cell in no such run takes any digit.

The search fills cells in reading order and prunes with prefixes: after a digit is placed, the
digits so far of the cell's across and down runs must be the start of some perfect square of
that run's length (tables of all such prefixes, per run length and prefix length).

Grid files: rows of ``.`` (white) and ``#`` (black), a rectangle of at most 8 x 8; blank lines
and lines starting with ``;`` are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import isqrt
from pathlib import Path

import numpy as np

from dobutsu_tb.analysis.puzzles import PuzzleInputError
from dobutsu_tb.encoding.jit import njit

MAX_SIDE = 8


def _prefix_tables():
    """PREFIX[off[L, k] : off[L, k + 1]]: sorted k-digit prefixes of the L-digit squares."""
    chunks, offsets = [], np.zeros((MAX_SIDE + 1, MAX_SIDE + 2), np.int64)
    pos = 0
    for length in range(MAX_SIDE + 1):
        squares = []
        if length >= 2:
            lo, hi = isqrt(10 ** (length - 1) - 1) + 1, isqrt(10 ** length - 1)
            squares = [r * r for r in range(lo, hi + 1)]
        for k in range(MAX_SIDE + 1):
            offsets[length, k] = pos
            if 1 <= k <= length:
                prefixes = sorted({s // 10 ** (length - k) for s in squares})
                chunks.append(np.array(prefixes, np.int64))
                pos += len(prefixes)
        offsets[length, MAX_SIDE + 1] = pos
    return np.concatenate(chunks), offsets


PREFIX, PREFIX_OFF = _prefix_tables()


@njit
def _is_prefix(value, length, k):
    lo = PREFIX_OFF[length, k]
    hi = PREFIX_OFF[length, k + 1]
    j = lo + np.searchsorted(PREFIX[lo:hi], value)
    return j < hi and PREFIX[j] == value


@njit
def _search(cells, row_start, row_len, row_pos, col_start, col_len, col_pos, width, limit, out):
    """DFS over the white cells (reading order). Returns (solutions found, stored); up to
    ``limit`` solutions are stored in ``out`` (one row of digits per solution, -1 for black)."""
    n = cells.shape[0]
    digit = -np.ones(n, np.int64)
    grid = -np.ones(out.shape[1], np.int64)
    found = 0
    stored = 0
    i = 0
    while i >= 0:
        if i == n:
            if stored < limit:
                for c in range(n):
                    grid[cells[c]] = digit[c]
                out[stored, :] = grid
                stored += 1
            found += 1
            i -= 1
            continue
        d = digit[i] + 1
        placed = False
        while d <= 9:
            cell = cells[i]
            ok = True
            # A run of two or more cells: no leading zero, and the digits so far a prefix.
            for direction in range(2):
                if direction == 0:
                    length, pos, start, step = row_len[cell], row_pos[cell], row_start[cell], 1
                else:
                    length, pos, start, step = col_len[cell], col_pos[cell], col_start[cell], width
                if length < 2:
                    continue
                if pos == 0 and d == 0:
                    ok = False
                    break
                value = np.int64(0)
                for q in range(pos):
                    value = value * 10 + _digit_at(digit, cells, start + q * step)
                value = value * 10 + d
                if not _is_prefix(value, length, pos + 1):
                    ok = False
                    break
            if ok:
                digit[i] = d
                placed = True
                break
            d += 1
        if placed:
            i += 1
            if i < n:
                digit[i] = -1
        else:
            digit[i] = -1
            i -= 1
    return found, stored


@njit
def _digit_at(digit, cells, cell):
    # Cells are filled in reading order, so an earlier cell of a run has a smaller index.
    lo, hi = 0, cells.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if cells[mid] < cell:
            lo = mid + 1
        else:
            hi = mid
    return digit[lo]


@dataclass
class Grid:
    """A puzzle grid: ``white[r][c]`` is True for a cell to fill."""

    white: list

    @property
    def height(self) -> int:
        return len(self.white)

    @property
    def width(self) -> int:
        return len(self.white[0])

    def text(self) -> str:
        return "\n".join("".join("." if w else "#" for w in row) for row in self.white)


def parse_grid(text: str) -> Grid:
    """A grid from rows of ``.`` (white) and ``#`` (black).

    Raises
    ------
    PuzzleInputError
        For rows of unequal length, another character, no white cell, or more than 8 x 8.
    """
    rows = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith(";")]
    if not rows:
        raise PuzzleInputError("the grid is empty")
    for r, row in enumerate(rows, 1):
        bad = set(row) - {".", "#"}
        if bad:
            raise PuzzleInputError(f"row {r}: unknown character {sorted(bad)[0]!r} (use '.' white, '#' black)")
        if len(row) != len(rows[0]):
            raise PuzzleInputError(f"row {r} has {len(row)} cells, row 1 has {len(rows[0])}: the grid must be a rectangle")
    if len(rows) > MAX_SIDE or len(rows[0]) > MAX_SIDE:
        raise PuzzleInputError(f"the grid is {len(rows[0])} x {len(rows)}; at most {MAX_SIDE} x {MAX_SIDE}")
    grid = Grid([[ch == "." for ch in row] for row in rows])
    if not any(any(row) for row in grid.white):
        raise PuzzleInputError("the grid has no white cell")
    return grid


def read_grid(path) -> Grid:
    return parse_grid(Path(path).read_text())


@dataclass
class SquaresResult:
    """Solutions (as text grids, up to the limit asked for) and how many there are."""

    count: int
    solutions: list = field(default_factory=list)
    complete: bool = True


def solve(grid: Grid, limit: int | None = None, count_all: bool = True) -> SquaresResult:
    """Every solution of ``grid`` (or the first ``limit``), and their number.

    Parameters
    ----------
    limit : int, optional
        Keep at most this many solutions (all by default).
    count_all : bool
        Count every solution even beyond ``limit`` (otherwise the search stops at ``limit``).
    """
    h, w = grid.height, grid.width
    cells = [r * w + c for r in range(h) for c in range(w) if grid.white[r][c]]
    arrays = {k: np.zeros(h * w, np.int64) for k in ("rs", "rl", "rp", "cs", "cl", "cp")}
    for r in range(h):
        for c in range(w):
            if not grid.white[r][c]:
                continue
            c0 = c
            while c0 > 0 and grid.white[r][c0 - 1]:
                c0 -= 1
            c1 = c
            while c1 + 1 < w and grid.white[r][c1 + 1]:
                c1 += 1
            r0 = r
            while r0 > 0 and grid.white[r0 - 1][c]:
                r0 -= 1
            r1 = r
            while r1 + 1 < h and grid.white[r1 + 1][c]:
                r1 += 1
            i = r * w + c
            arrays["rs"][i], arrays["rl"][i], arrays["rp"][i] = r * w + c0, c1 - c0 + 1, c - c0
            arrays["cs"][i], arrays["cl"][i], arrays["cp"][i] = r0 * w + c, r1 - r0 + 1, r - r0
    keep = limit if limit is not None else 100_000
    out = np.empty((max(1, keep), h * w), np.int64)  # solutions beyond ``keep`` are counted only
    found, stored = _search(np.array(cells, np.int64), arrays["rs"], arrays["rl"], arrays["rp"],
                            arrays["cs"], arrays["cl"], arrays["cp"], w, keep, out)
    texts = ["\n".join("".join("#" if out[s, r * w + c] < 0 else str(out[s, r * w + c])
                               for c in range(w)) for r in range(h)) for s in range(stored)]
    return SquaresResult(int(found), texts, complete=limit is None or found <= keep)


def check(grid: Grid, solution: str) -> list[str]:
    """Independent check of a solution grid; returns the problems found."""
    rows = solution.split("\n")
    problems = []
    lines = [("row", r, [(r, c) for c in range(grid.width)]) for r in range(grid.height)]
    lines += [("column", c, [(r, c) for r in range(grid.height)]) for c in range(grid.width)]
    for kind, k, cells in lines:
        run = []
        for r, c in cells + [(-1, -1)]:
            if r >= 0 and grid.white[r][c]:
                if not rows[r][c].isdigit():
                    problems.append(f"cell ({r + 1}, {c + 1}) has no digit")
                run.append(rows[r][c])
                continue
            if len(run) >= 2:
                value = "".join(run)
                if value[0] == "0" or isqrt(int(value)) ** 2 != int(value):
                    problems.append(f"{kind} {k + 1}: {value} is not a square without a leading zero")
            run = []
    return problems
