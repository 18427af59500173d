"""Last One (ひとりぼっち): English 33-hole peg solitaire (docs/puzzles.md §1).

Holes are numbered 0..32 row by row (rows of 3, 3, 7, 7, 7, 3, 3; the centre is 16) and a board
is an int64 with bit i set when hole i holds a peg. A *jump* takes a peg over an orthogonally
adjacent peg into the empty hole beyond and removes the jumped peg; a *move* in the literature
is one or more consecutive jumps of the same peg.

Files (seed ``000_77d391df8a5a7170.txt``): 33 cells in row order, ``o`` a peg, ``.`` a hole;
spaces, newlines and whole lines starting with ``#`` (comments) are ignored; any other character
is reported as an error rather than silently skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dobutsu_tb.analysis.puzzles import PuzzleInputError
from dobutsu_tb.encoding.bits import popcount
from dobutsu_tb.encoding.jit import njit, prange
from dobutsu_tb.encoding.search import chain_levels, dfs_solve, enumerate_levels

ROW_STARTS = (2, 2, 0, 0, 0, 2, 2)
ROW_LENGTHS = (3, 3, 7, 7, 7, 3, 3)
N_HOLES = 33
CENTRE = 16
#: (row, column) of each hole on the 7x7 grid.
HOLES = [(r, ROW_STARTS[r] + k) for r in range(7) for k in range(ROW_LENGTHS[r])]
HOLE_AT = {rc: i for i, rc in enumerate(HOLES)}


def _jumps():
    out = []
    for i, (r, c) in enumerate(HOLES):
        for dr, dc in ((0, 1), (0, -1), (1, 0), (-1, 0)):
            over, to = HOLE_AT.get((r + dr, c + dc)), HOLE_AT.get((r + 2 * dr, c + 2 * dc))
            if over is not None and to is not None:
                out.append((i, over, to))
    return np.array(out, np.int64)


JUMPS = _jumps()
_FROM_OVER = np.array([(1 << f) | (1 << o) for f, o, _ in JUMPS], np.int64)
_TO = np.array([1 << t for _, _, t in JUMPS], np.int64)
MAX_JUMPS = len(JUMPS)  # 76
_FULL = (1 << N_HOLES) - 1


def _symmetries():
    """The 8 symmetries of the board as hole permutations (perm[i] = image of hole i)."""
    maps = []
    for k in range(8):
        def f(rc, k=k):
            r, c = rc
            for _ in range(k % 4):
                r, c = c, 6 - r
            if k >= 4:
                c = 6 - c
            return r, c
        maps.append([HOLE_AT[f(rc)] for rc in HOLES])
    return maps


SYMMETRIES = _symmetries()


def _image(state: int, perm) -> int:
    return sum(1 << perm[i] for i in range(N_HOLES) if (state >> i) & 1)


def _group(goal_hole: int, start: int | None = None) -> list:
    """The symmetries that fix the goal hole (and the ``start`` board, when given), the identity
    first."""
    return [p for p in SYMMETRIES if p[goal_hole] == goal_hole and (start is None or _image(start, p) == start)]


def _params(goal_hole: int, start: int | None = None) -> np.ndarray:
    """params: [goal board, number of symmetries k, k*5*256 byte tables of the symmetries of
    :func:`_group`, then their k*33 hole permutations]."""
    syms = _group(goal_hole, start)
    tables = np.zeros((len(syms), 5, 256), np.int64)
    for s, perm in enumerate(syms):
        for chunk in range(5):
            for byte in range(256):
                v = 0
                for b in range(8):
                    hole = 8 * chunk + b
                    if hole < N_HOLES and (byte >> b) & 1:
                        v |= 1 << perm[hole]
                tables[s, chunk, byte] = v
    return np.concatenate([[1 << goal_hole, len(syms)], tables.ravel(), np.array(syms).ravel()]).astype(np.int64)


@njit
def _expand(state, out, params):
    n = 0
    for j in range(_FROM_OVER.shape[0]):
        if state & _FROM_OVER[j] == _FROM_OVER[j] and state & _TO[j] == 0:
            out[n] = state ^ (_FROM_OVER[j] | _TO[j])
            n += 1
    return n


@njit
def _is_goal(state, params):
    return state == params[0]


@njit
def _transform(state, params, s):
    v = np.int64(0)
    base = 2 + s * 5 * 256
    for chunk in range(5):
        v |= params[base + chunk * 256 + ((state >> (8 * chunk)) & 255)]
    return v


@njit
def _canonical(state, params):
    best = state
    for s in range(params[1]):
        v = _transform(state, params, s)
        if v < best:
            best = v
    return best


@njit
def _expand_steps(state, out, src, dst, params):
    """The jumps of :func:`_expand`, with the jumping peg's hole before (``src``) and after (``dst``)."""
    n = 0
    for j in range(_FROM_OVER.shape[0]):
        if state & _FROM_OVER[j] == _FROM_OVER[j] and state & _TO[j] == 0:
            out[n] = state ^ (_FROM_OVER[j] | _TO[j])
            src[n] = JUMPS[j, 0]
            dst[n] = JUMPS[j, 2]
            n += 1
    return n


@njit
def _canonical_hole(state, hole, params):
    """The representative of ``state`` and the image of ``hole`` under a symmetry taking it there."""
    best, image = state, hole
    perms = 2 + params[1] * 5 * 256
    for s in range(1, params[1]):
        v = _transform(state, params, s)
        if v < best:
            best, image = v, params[perms + s * N_HOLES + hole]
    return best, image


@njit(parallel=True)
def _canonical_many(states, params, out):
    for i in prange(states.shape[0]):
        out[i] = _canonical(states[i], params)


@njit(parallel=True)
def _orbit_total(states, params):
    """The number of boards in the classes of ``states`` (each its class's representative): a
    class has k / (symmetries fixing its board) boards."""
    total = 0
    for i in prange(states.shape[0]):
        fixed = 0
        for s in range(params[1]):
            if _transform(states[i], params, s) == states[i]:
                fixed += 1
        total += params[1] // fixed
    return total


# --- text ------------------------------------------------------------------------------------


def parse_board(text: str) -> int:
    """A board from the seed's format: 33 cells ``o``/``.`` in row order, whitespace and ``#``
    comment lines ignored.

    Raises
    ------
    PuzzleInputError
        For another character or a cell count other than 33.
    """
    cells = []
    for line_no, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        for ch in line:
            if ch in "o.":
                cells.append(ch)
            elif not ch.isspace():
                raise PuzzleInputError(f"line {line_no}: unexpected character {ch!r} "
                                       f"(use 'o' for a peg, '.' for a hole)")
    if len(cells) != N_HOLES:
        raise PuzzleInputError(f"a Last One board has {N_HOLES} cells, got {len(cells)}")
    return sum(1 << i for i, ch in enumerate(cells) if ch == "o")


def read_board(path) -> int:
    """:func:`parse_board` of a file's text."""
    return parse_board(Path(path).read_text())


def board_text(state: int) -> str:
    """The board as seven rows, the short rows indented to stand over the middle of the long ones."""
    rows = []
    i = 0
    for start, length in zip(ROW_STARTS, ROW_LENGTHS):
        cells = "".join("o" if (state >> (i + k)) & 1 else "." for k in range(length))
        rows.append(" " * start + cells)
        i += length
    return "\n".join(rows)


def pegs(state: int) -> int:
    """Number of pegs on a board."""
    return int(popcount(state))


# --- solving ---------------------------------------------------------------------------------


def _class_masks():
    """For each of the two colourings of the holes by ``(row + column) % 3`` and ``(row - column)
    % 3``, the holes of each colour as a bit mask."""
    return [[sum(1 << i for i, (r, c) in enumerate(HOLES) if f(r, c) % 3 == colour) for colour in range(3)]
            for f in (lambda r, c: r + c, lambda r, c: r - c)]


_CLASS_MASKS = _class_masks()


def position_class(board: int) -> tuple[int, int, int, int]:
    """A board's position class (de Bruijn, "A solitaire game and its relation to a finite
    field", 1972; Berlekamp, Conway and Guy, *Winning Ways*, ch. 23): colour the holes by ``(row +
    column) % 3``; a jump takes its three holes, one of each colour, so it changes the parity of
    the pegs of every colour, and the parities of the sums of the pegs of colours 0 and 1 and of
    colours 1 and 2 never change; likewise with ``(row - column) % 3``. Boards of different classes
    never reach one another.

    Returns
    -------
    (int, int, int, int)
        Those four parities (0 or 1).
    """
    out = []
    for masks in _CLASS_MASKS:
        n = [pegs(board & m) for m in masks]
        out += [(n[0] + n[1]) & 1, (n[1] + n[2]) & 1]
    return tuple(out)


def class_allows(start: int, goal: int) -> bool:
    """Whether one peg in hole ``goal`` has the position class of ``start`` (if not, no sequence
    of jumps leaves it there: :func:`position_class`)."""
    return position_class(start) == position_class(1 << goal)


def _check(start: int, goal: int) -> None:
    if not 0 <= goal < N_HOLES:
        raise PuzzleInputError(f"the goal hole must be 0..32, got {goal}")
    if start == 0:
        raise PuzzleInputError("the board has no peg")


def solve(start: int, goal: int = CENTRE) -> list[int] | None:
    """One solution: the boards from ``start`` to a single peg in hole ``goal``, jump by jump.

    Returns
    -------
    list of int or None
        ``pegs(start)`` boards (one per jump and the start), or None when there is no solution
        (at once when the goal's position class is not the start's: :func:`class_allows`).

    Raises
    ------
    PuzzleInputError
        For an empty board or a goal outside 0..32.
    """
    _check(start, goal)
    if not class_allows(start, goal):
        return None
    return dfs_solve(start, _expand, _is_goal, _canonical, _params(goal), max_depth=N_HOLES,
                     max_moves=MAX_JUMPS)


def fewest_moves(start: int, goal: int = CENTRE, max_depth: int = 40, threads: int | None = None):
    """A solution with the fewest moves (a move: one or more consecutive jumps of one peg).

    Every board reachable from ``start`` is visited once, peg count by peg count, one board of
    each class under the symmetries that fix the goal hole and the start
    (:func:`encoding.search.chain_levels`), with the fewest moves that reach it and the holes
    where the last jump of such a way may end (a jump from one of them goes on with the same
    move). The moves are then traced back from the goal, jump by jump. When the start is the goal
    board's complement (the central game), a level's boards whose complements the start cannot
    reach (the levels with more pegs tell) cannot reach the goal and are dropped.

    Parameters
    ----------
    start : int
        The board.
    goal : int, optional
        The hole of the last peg.
    max_depth : int, optional
        Most moves searched for.
    threads : int, optional
        Threads; default :data:`~dobutsu_tb.encoding.config.THREADS`.

    Returns
    -------
    list of int or None
        The start and the board after each move, or None when there is no solution within
        ``max_depth`` moves.

    Raises
    ------
    PuzzleInputError
        For an empty board or a goal outside 0..32.
    """
    _check(start, goal)
    if not class_allows(start, goal):
        return None
    params = _params(goal, start)
    levels = {}

    def keep(level):
        """A board can reach the goal only if its complement can be reached from the goal's
        complement (undoing jumps is jumping on the complemented board). When that is the start,
        its levels with more pegs are already known, so the boards of a level that cannot reach
        the goal are dropped (not when ``max_depth`` may have cut those levels short)."""
        k = pegs(int(level.states[0]))
        if start != _FULL ^ (1 << goal) or max_depth < pegs(start) - 1 or (N_HOLES - k) not in levels:
            return np.ones(level.states.shape[0], np.bool_)
        known = levels[N_HOLES - k].states
        images = np.empty_like(level.states)
        _canonical_many(_FULL ^ level.states, params, images)
        i = np.minimum(np.searchsorted(known, images), known.shape[0] - 1)
        return known[i] == images

    def store(level):
        levels[pegs(int(level.states[0]))] = level

    chain_levels(start, _expand_steps, _canonical_hole, params, MAX_JUMPS, threads=threads, on_level=store,
                 keep=keep, limit=min(max(max_depth, 0), N_HOLES))
    return _trace_moves(start, goal, levels, _group(goal, start))


def _trace_moves(start: int, goal: int, levels: dict, group: list) -> list[int] | None:
    """The boards after each move of a fewest-moves solution, traced back from the goal board
    through :func:`fewest_moves`'s levels (keyed by peg count)."""

    def lookup(board):
        """(fewest moves, holes where the last jump of such a way may end), or None if unreached."""
        level = levels.get(pegs(board))
        images = [_image(board, perm) for perm in group]
        rep = min(images)
        i = int(np.searchsorted(level.states, rep)) if level is not None else 0
        if level is None or i == level.states.shape[0] or level.states[i] != rep:
            return None
        last = int(level.last[i])
        ends = {h for s, perm in enumerate(group) if images[s] == rep for h in range(N_HOLES) if (last >> perm[h]) & 1}
        return int(level.moves[i]), ends

    board = 1 << goal
    found = lookup(board)
    if found is None:
        return None
    moves, ends = found
    boards = [board]
    while board != start:
        for f, o, t in JUMPS.tolist():
            if t not in ends or (board >> f) & 1 or (board >> o) & 1:
                continue
            before = board ^ (1 << f) ^ (1 << o) ^ (1 << t)
            found = lookup(before)
            if found is None:
                continue
            if found[0] == moves and f in found[1]:  # the same move, one jump earlier
                board, ends = before, {f}
                break
            if found[0] == moves - 1:  # the move starts here
                board, (moves, ends) = before, found
                boards.append(board)
                break
        else:
            raise RuntimeError("no way back from a board on a fewest-moves path")
    return boards[::-1]


@dataclass
class CountResult:
    """Counts of :func:`count`.

    Attributes
    ----------
    levels : list of (int, int, int)
        Per peg count, from the start down: (pegs, distinct boards, boards up to the symmetries
        that fix the goal hole).
    solutions : int
        Distinct jump sequences from the start to the goal.
    """

    levels: list
    solutions: int

    @property
    def reachable(self) -> int:
        return sum(d for _, d, _ in self.levels)

    @property
    def reachable_up_to_symmetry(self) -> int:
        return sum(s for _, _, s in self.levels)


def count(start: int, goal: int = CENTRE, threads: int | None = None, on_level=None, fold: bool = True) -> CountResult:
    """Boards reachable from ``start`` per peg count (distinct and up to symmetry), and the number
    of distinct jump sequences that solve the puzzle.

    Level-by-level enumeration (:func:`encoding.search.enumerate_levels`): a jump removes a
    peg, so the boards with k pegs form one level, and the number of jump sequences reaching a
    board is summed over its parents. With ``fold`` (the default) the enumeration goes over one
    board of each class under the symmetries that fix both the goal hole and the start (all 8 for
    the central game), with each class's total of sequences (exact: see
    :mod:`dobutsu_tb.encoding.search.levels`); the boards of a class are all reachable, so the
    distinct boards are the sum of the class sizes. ``fold=False`` enumerates every board.
    """
    from dobutsu_tb.encoding import config

    _check(start, goal)
    params = _params(goal)
    folding = _params(goal, start) if fold else None
    levels = []
    solutions = 0
    goal_board = 1 << goal

    def record(level):
        nonlocal solutions
        if folding is None:
            distinct = level.states.shape[0]
        else:
            distinct = int(_orbit_total(level.states, folding))
        if folding is not None and folding[1] == params[1]:
            up_to = level.states.shape[0]
        else:
            canon = np.empty_like(level.states)
            _canonical_many(level.states, params, canon)
            up_to = np.unique(canon).shape[0]
        levels.append((pegs(int(level.states[0])), distinct, up_to))
        i = np.searchsorted(level.states, goal_board)
        if i < level.states.shape[0] and level.states[i] == goal_board:
            solutions = int(level.paths[i])
        if on_level is not None:
            on_level(levels[-1])

    enumerate_levels(start, _expand, folding if fold else params, MAX_JUMPS, threads or config.THREADS, record,
                     canonical=_canonical if fold else None)
    return CountResult(levels, solutions)


def replay(boards: list[int]) -> list[str]:
    """Check a solution jump by jump (independently of the solver); returns the problems found."""
    problems = []
    for k, (a, b) in enumerate(zip(boards, boards[1:]), 1):
        diff = a ^ b
        if pegs(diff) != 3 or pegs(b) != pegs(a) - 1:
            problems.append(f"step {k}: not a single jump")
            continue
        ok = any(diff == (1 << f) | (1 << o) | (1 << t) and (a >> f) & 1 and (a >> o) & 1
                 and not (a >> t) & 1 for f, o, t in JUMPS)
        if not ok:
            problems.append(f"step {k}: not a legal jump")
    return problems
