"""Cross Squared Number Puzzle (Cマガジン 2000/01; docs/puzzles.md §3).

Fill every white cell of a grid with a digit so that every horizontal (left to right) and
vertical (top to bottom) run of two or more white cells reads as a perfect square without a
leading zero. A white cell in no such run takes any digit.

The search fills cells in reading order and prunes with prefixes: after a digit is placed, the
digits so far of the cell's across and down runs must be the start of some perfect square of
that run's length (tables of all such prefixes, per run length and prefix length). It runs on the
shared depth-first driver (:func:`dobutsu_tb.encoding.search.depth_first`), the first cell's
digits dealt out to the threads.

Grid files: rows of ``.`` (white) and ``#`` (black), a rectangle of at most 8 x 8; blank lines
and lines starting with ``;`` are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import isqrt
from pathlib import Path
from typing import NamedTuple

import numpy as np

from dobutsu_tb.analysis.puzzles import PuzzleInputError
from dobutsu_tb.encoding.config import THREADS
from dobutsu_tb.encoding.jit import njit, njit_callback
from dobutsu_tb.encoding.search import depth_first

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


class _Context(NamedTuple):
    """One thread's search (see :func:`dobutsu_tb.encoding.search.depth_first`): the run tables
    of :func:`solve`, the digits placed so far (``digit[i]``: white cell i, reading order) and the
    solutions kept (``out``, up to ``limit`` rows, with the root choice of each in ``tag``)."""

    cells: np.ndarray
    row_start: np.ndarray
    row_len: np.ndarray
    row_pos: np.ndarray
    col_start: np.ndarray
    col_len: np.ndarray
    col_pos: np.ndarray
    width: int
    limit: int
    stop_at: int  # stop the whole search once this thread has found this many (0: never)
    digit: np.ndarray
    valid: np.ndarray  # valid[i]: the digits white cell i can take, given the cells before it
    out: np.ndarray
    tag: np.ndarray
    found: np.ndarray  # [solutions found, solutions stored]


@njit_callback
def _is_goal(ctx, i):
    return i == ctx.cells.shape[0]


@njit_callback
def _on_goal(ctx, i):
    """Keep the solution while there is room (one row of digits, -1 for black); count it."""
    stored = ctx.found[1]
    if stored < ctx.limit:
        for c in range(ctx.out.shape[1]):
            ctx.out[stored, c] = -1
        for c in range(ctx.cells.shape[0]):
            ctx.out[stored, ctx.cells[c]] = ctx.digit[c]
        ctx.tag[stored] = ctx.digit[0]
        ctx.found[1] = stored + 1
    ctx.found[0] += 1
    return ctx.stop_at > 0 and ctx.found[0] >= ctx.stop_at


@njit_callback
def _prune(ctx, i):
    return False


@njit_callback
def _run_prefix(ctx, cell, length, pos, start, step):
    """The digits so far of a run as a number (-1 when the cell starts the run)."""
    if pos == 0:
        return np.int64(-1)
    value = np.int64(0)
    for q in range(pos):
        value = value * 10 + _digit_at(ctx.digit, ctx.cells, start + q * step)
    return value


@njit_callback
def _options(ctx, i):
    """The digits that white cell ``i`` can take, ascending: every run of two or more cells
    through it must have no leading zero and read, so far, as the start of a square of its
    length (both runs' digits so far are read once, then each digit is looked up)."""
    cell = ctx.cells[i]
    row = _run_prefix(ctx, cell, ctx.row_len[cell], ctx.row_pos[cell], ctx.row_start[cell], 1)
    col = _run_prefix(ctx, cell, ctx.col_len[cell], ctx.col_pos[cell], ctx.col_start[cell], ctx.width)
    n = 0
    for d in range(10):
        ok = True
        for direction in range(2):
            length, pos, value = ((ctx.row_len[cell], ctx.row_pos[cell], row) if direction == 0
                                  else (ctx.col_len[cell], ctx.col_pos[cell], col))
            if length < 2:
                continue
            if (pos == 0 and d == 0) or not _is_prefix(max(value, 0) * 10 + d, length, pos + 1):
                ok = False
                break
        if ok:
            ctx.valid[i, n] = d
            n += 1
    return n


@njit_callback
def _place(ctx, i, k):
    ctx.digit[i] = ctx.valid[i, k]
    return True


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
            raise PuzzleInputError(f"row {r} has {len(row)} cells, row 1 has {len(rows[0])}: "
                                   f"the grid must be a rectangle")
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


def solve(grid: Grid, limit: int | None = None, count_all: bool = True, threads: int | None = None) -> SquaresResult:
    """Every solution of ``grid`` (or the first ``limit``), and their number.

    Parameters
    ----------
    limit : int, optional
        Keep at most this many solutions (all by default).
    count_all : bool
        Count every solution even beyond ``limit`` (the default). When False and ``limit`` is
        positive, the search stops as soon as ``limit`` solutions are found: ``count`` is then
        only a lower bound and ``complete`` False (with several threads, the solutions kept are
        the first of each thread's share, not necessarily those a single thread finds first).
    threads : int, optional
        Threads sharing the search (the first cell's digits are dealt out); default
        :data:`~dobutsu_tb.encoding.config.THREADS`.

    Returns
    -------
    SquaresResult
        ``complete`` is True when every solution was found and kept.
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
    cells = np.array(cells, np.int64)
    # Solutions beyond ``keep`` are counted only; each thread keeps the first ``keep`` of its share.
    contexts = [_Context(cells, arrays["rs"], arrays["rl"], arrays["rp"], arrays["cs"], arrays["cl"], arrays["cp"],
                         w, keep, 0 if count_all or not limit else limit, np.zeros(cells.shape[0], np.int64),
                         np.zeros((cells.shape[0], 10), np.int64),
                         np.empty((max(1, keep), h * w), np.int64),
                         np.empty(max(1, keep), np.int64), np.zeros(2, np.int64))
                for _ in range(threads or THREADS)]
    stopped, _ = depth_first(contexts, _is_goal, _on_goal, _prune, _options, _place, cells.shape[0])
    found = sum(int(ctx.found[0]) for ctx in contexts)
    # The threads' solutions in the order of one search: by the first cell's digit (each
    # thread's share of them), then as each thread found them.
    out = np.concatenate([ctx.out[: ctx.found[1]] for ctx in contexts])
    tags = np.concatenate([ctx.tag[: ctx.found[1]] for ctx in contexts])
    out = out[np.argsort(tags, kind="stable")][:keep]
    stored = out.shape[0]
    texts = ["\n".join("".join("#" if out[s, r * w + c] < 0 else str(out[s, r * w + c])
                               for c in range(w)) for r in range(h)) for s in range(stored)]
    return SquaresResult(int(found), texts, complete=not stopped and (limit is None or found <= keep))


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
