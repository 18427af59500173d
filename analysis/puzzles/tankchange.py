"""Tank Change (タンク・チェンジ): the fewest moves for two armies of tanks to exchange sides
(docs/puzzles.md §2).

The 18 plazas are the squares with (row + column) even of a 5-row x 7-column grid, numbered
1..18 column by column from the left, top to bottom (so 1, 2, 3 are the left column and 16, 17,
18 the right one). Roads are the diagonals. A state is an int64: blue tanks' plaza mask in bits
0..17, red's in bits 18..35, the side to move in bit 36 (0 blue, 1 red).

A turn moves one tank along a diagonal any distance, neither passing nor joining another tank,
to a plaza that no enemy tank sees afterwards (an enemy sees a plaza when it is the first tank
along a diagonal from it). A side without a safe move is stuck.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dobutsu_tb.analysis.puzzles import PuzzleInputError
from dobutsu_tb.encoding.jit import njit
from dobutsu_tb.encoding.search import bfs_shortest

N_ROWS, N_COLS = 5, 7
PLAZAS = [(r, c) for c in range(N_COLS) for r in range(N_ROWS) if (r + c) % 2 == 0]
N_PLAZAS = len(PLAZAS)  # 18
PLAZA_AT = {rc: i for i, rc in enumerate(PLAZAS)}
RED_SHIFT = 18
TURN_BIT = 36
MAX_MOVES = 3 * 4 * 4


def _rays():
    rays = -np.ones((N_PLAZAS, 4, 6), np.int64)
    for p, (r, c) in enumerate(PLAZAS):
        for d, (dr, dc) in enumerate(((1, 1), (1, -1), (-1, 1), (-1, -1))):
            k, rr, cc = 0, r + dr, c + dc
            while (rr, cc) in PLAZA_AT:
                rays[p, d, k] = PLAZA_AT[(rr, cc)]
                k, rr, cc = k + 1, rr + dr, cc + dc
    return rays


RAYS = _rays()


@njit
def _seen_by_enemy(q, occupied, enemy):
    for d in range(4):
        for k in range(RAYS.shape[2]):
            t = RAYS[q, d, k]
            if t < 0:
                break
            if (occupied >> t) & 1:
                if (enemy >> t) & 1:
                    return True
                break
    return False


@njit
def _expand(state, out, params):
    turn = (state >> TURN_BIT) & 1
    blue = state & 0x3FFFF
    red = (state >> RED_SHIFT) & 0x3FFFF
    own = red if turn else blue
    enemy = blue if turn else red
    occupied = blue | red
    n = 0
    for p in range(N_PLAZAS):
        if not (own >> p) & 1:
            continue
        for d in range(4):
            for k in range(RAYS.shape[2]):
                q = RAYS[p, d, k]
                if q < 0 or (occupied >> q) & 1:
                    break
                after = occupied ^ (np.int64(1) << p) ^ (np.int64(1) << q)
                if _seen_by_enemy(q, after, enemy):
                    continue
                moved = own ^ (np.int64(1) << p) ^ (np.int64(1) << q)
                if turn:
                    out[n] = blue | (moved << RED_SHIFT)
                else:
                    out[n] = moved | (red << RED_SHIFT) | (np.int64(1) << TURN_BIT)
                n += 1
    return n


@njit
def _is_goal(state, params):
    return (state & ((np.int64(1) << TURN_BIT) - 1)) == params[0]


def _mask(plazas, what: str) -> int:
    mask = 0
    for p in plazas:
        if not 1 <= p <= N_PLAZAS:
            raise PuzzleInputError(f"{what}: plaza {p} does not exist (plazas are 1..18)")
        if mask >> (p - 1) & 1:
            raise PuzzleInputError(f"{what}: plaza {p} is given twice")
        mask |= 1 << (p - 1)
    if not mask:
        raise PuzzleInputError(f"{what}: no tank")
    return mask


def make_state(blue, red, red_to_move: bool = False) -> int:
    """The state of tanks on plazas ``blue`` and ``red`` (numbers 1..18).

    Raises
    ------
    PuzzleInputError
        For a plaza outside 1..18, a plaza given twice or held by both armies, an army of no tank.
    """
    b, r = _mask(blue, "blue"), _mask(red, "red")
    if b & r:
        raise PuzzleInputError("a plaza holds a blue and a red tank")
    return b | (r << RED_SHIFT) | (int(red_to_move) << TURN_BIT)


def tanks(state: int) -> tuple[list[int], list[int], str]:
    """(blue plazas, red plazas, side to move) of a state, plazas numbered 1..18."""
    blue = [p + 1 for p in range(N_PLAZAS) if (state >> p) & 1]
    red = [p + 1 for p in range(N_PLAZAS) if (state >> (RED_SHIFT + p)) & 1]
    return blue, red, "red" if (state >> TURN_BIT) & 1 else "blue"


def board_text(state: int) -> str:
    """The 5 x 7 grid: ``B`` blue, ``R`` red, ``.`` an empty plaza, blank between plazas."""
    blue, red, _ = tanks(state)
    rows = []
    for r in range(N_ROWS):
        row = []
        for c in range(N_COLS):
            p = PLAZA_AT.get((r, c))
            row.append(" " if p is None else "B" if p + 1 in blue else "R" if p + 1 in red else ".")
        rows.append(" ".join(row))
    return "\n".join(rows)


def move_text(a: int, b: int) -> str:
    """``'blue 2-7'``: the side and the tank's plazas before and after."""
    ba, ra, side = tanks(a)
    bb, rb, _ = tanks(b)
    before, after = (set(ba), set(bb)) if side == "blue" else (set(ra), set(rb))
    return f"{side} {min(before - after)}-{min(after - before)}"


@dataclass
class TankResult:
    """Answer of :func:`solve`: the states along one shortest sequence and the number of them."""

    states: list | None
    count: int
    level_sizes: list

    @property
    def moves(self) -> int | None:
        return None if self.states is None else len(self.states) - 1


def solve(start: int | None = None, goal_blue=(16, 17, 18), goal_red=(1, 2, 3), count: bool = True) -> TankResult:
    """The fewest moves from ``start`` to the goal, one shortest sequence and how many there are.

    Parameters
    ----------
    start : int, optional
        A state from :func:`make_state` (default: blue on 1, 2, 3, red on 16, 17, 18, blue to move).
    goal_blue, goal_red : sequences of int
        Plazas of the armies at the goal (either side may be to move there).
    count : bool, optional
        Also count the shortest sequences.

    Raises
    ------
    PuzzleInputError
        For an impossible start or goal.
    """
    if start is None:
        start = make_state((1, 2, 3), (16, 17, 18))
    blue, red, _ = tanks(start)
    for colour, here, there in (("blue", blue, goal_blue), ("red", red, goal_red)):
        if len(here) != len(there):
            raise PuzzleInputError(f"the goal must have as many tanks of each colour as the start: {len(here)} "
                                   f"{colour} at the start, {len(there)} at the goal "
                                   f"({','.join(map(str, sorted(there)))})")
    try:
        goal = make_state(goal_blue, goal_red)
    except PuzzleInputError as exc:
        raise PuzzleInputError(f"the goal: {exc}") from None
    params = np.array([goal], np.int64)
    result = bfs_shortest(start, _expand, _is_goal, params, MAX_MOVES, count=count)
    return TankResult(result.path, result.count, result.level_sizes)


def replay(states: list[int]) -> list[str]:
    """Check a sequence move by move with plain Python rules; returns the problems found."""
    problems = []
    cells = {i + 1: rc for i, rc in enumerate(PLAZAS)}
    for k, (a, b) in enumerate(zip(states, states[1:]), 1):
        ba, ra, side = tanks(a)
        bb, rb, side_b = tanks(b)
        own_a, own_b = (ba, bb) if side == "blue" else (ra, rb)
        enemy_a, enemy_b = (ra, rb) if side == "blue" else (ba, bb)
        if side_b == side or enemy_a != enemy_b or len(set(own_a) ^ set(own_b)) != 2:
            problems.append(f"move {k}: not one move of one {side} tank")
            continue
        src, dst = min(set(own_a) - set(own_b)), min(set(own_b) - set(own_a))
        (r0, c0), (r1, c1) = cells[src], cells[dst]
        if abs(r1 - r0) != abs(c1 - c0):
            problems.append(f"move {k}: {src}-{dst} is not diagonal")
            continue
        occupied_after = {cells[p] for p in own_b + enemy_b}
        dr, dc = (r1 > r0) - (r1 < r0), (c1 > c0) - (c1 < c0)
        path = [(r0 + i * dr, c0 + i * dc) for i in range(1, abs(r1 - r0))]
        if any(rc in occupied_after for rc in path):
            problems.append(f"move {k}: {src}-{dst} passes a tank")
        for er, ec in (cells[p] for p in enemy_b):
            if abs(er - r1) == abs(ec - c1):
                sr, sc = (r1 > er) - (r1 < er), (c1 > ec) - (c1 < ec)
                between = [(er + i * sr, ec + i * sc) for i in range(1, abs(r1 - er))]
                if not any(rc in occupied_after for rc in between):
                    problems.append(f"move {k}: {dst} is seen by an enemy tank")
                    break
    return problems
