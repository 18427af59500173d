"""The independent rules simulator of Room Sweeper (docs/puzzles.md §4), in plain Python: it plays routes
step by step and says what is wrong. ``--check`` uses it, and the tests replay every answer of the
solver with it; it shares nothing with the solver but the problem's tiles.
"""

from __future__ import annotations

from dobutsu_tb.analysis.puzzles.sweep.problem import (
    APPLE,
    BIN,
    BOTTLE,
    BOX,
    CLEAN,
    DIRS,
    DIRTY,
    OBSTACLE,
    PUDDLE,
    STEPS,
    Problem,
)
from dobutsu_tb.encoding.words import counted


def simulate(problem: Problem, routes: list[str], meetings: bool = True) -> tuple[list[str], list[list[int]]]:
    """Play routes by the rules, in plain Python; returns (problems found, final tiles).

    An empty list of problems means the routes are legal and leave the room clean. With
    ``meetings`` False, meetings clean nothing (to tell whether some routes need them).
    """
    problems = []
    if len(routes) != len(problem.cleaners):
        return [f"{len(routes)} routes for {len(problem.cleaners)} cleaners"], problem.tiles
    tiles = [row[:] for row in problem.tiles]
    pos = [(r, c) for _, r, c, _ in problem.cleaners]
    prev = [None] * len(pos)
    hold = [0] * len(pos)
    for i, ((kind, r, c, budget), route) in enumerate(zip(problem.cleaners, routes)):
        if len(route) > budget:
            problems.append(f"{kind} at {r + 1},{c + 1}: {len(route)} steps, budget {budget}")
        if set(route) - set(DIRS):
            problems.append(f"{kind} at {r + 1},{c + 1}: steps are U D L R")
    if problems:
        return problems, tiles

    def near(r, c, code):
        return any(0 <= r + dr < problem.height and 0 <= c + dc < problem.width and tiles[r + dr][c + dc] == code
                   for dr, dc in STEPS.values())

    for t in range(max(len(rt) for rt in routes)):
        arrivals = {}
        for i, route in enumerate(routes):
            if t >= len(route):
                continue
            kind = problem.cleaners[i][0]
            dr, dc = STEPS[route[t]]
            r, c = pos[i][0] + dr, pos[i][1] + dc
            where = f"{kind} from {problem.cleaners[i][1] + 1},{problem.cleaners[i][2] + 1}, step {t + 1}"
            if not (0 <= r < problem.height and 0 <= c < problem.width):
                return problems + [f"{where}: off the board"], tiles
            if tiles[r][c] in (BIN, BOX, OBSTACLE):
                return problems + [f"{where}: {r + 1},{c + 1} cannot be entered"], tiles
            if prev[i] == (r, c):
                return problems + [f"{where}: steps straight back"], tiles
            prev[i], pos[i] = pos[i], (r, c)
            arrivals.setdefault((r, c), []).append(i)
            tile = tiles[r][c]
            if tile == DIRTY or (tile == PUDDLE and kind == "boy"):
                tiles[r][c] = CLEAN
            elif (tile == APPLE and kind == "girl") or (tile == BOTTLE and kind == "robot"):
                tiles[r][c] = CLEAN
                hold[i] += 1
            if hold[i] and ((kind == "girl" and near(r, c, BIN)) or (kind == "robot" and near(r, c, BOX))):
                hold[i] = 0
        for (r, c), who in arrivals.items():
            if meetings and len(who) >= 2:
                for rr in range(r - 1, r + 2):
                    for cc in range(c - 1, c + 2):
                        if 0 <= rr < problem.height and 0 <= cc < problem.width and tiles[rr][cc] == DIRTY:
                            tiles[rr][cc] = CLEAN
    names = {DIRTY: "dirty floor", PUDDLE: "a puddle", APPLE: "an apple", BOTTLE: "a bottle"}
    for r in range(problem.height):
        for c in range(problem.width):
            if tiles[r][c] in names:
                problems.append(f"{names[tiles[r][c]]} is left at {r + 1},{c + 1}")
    for i, h in enumerate(hold):
        if h:
            kind, r, c, _ = problem.cleaners[i]
            problems.append(f"the {kind} from {r + 1},{c + 1} still holds {counted(h, 'item')}")
    return problems, tiles



def count_meetings(problem: Problem, routes: list[str]) -> int:
    """The meetings of legal routes (:func:`simulate`): the steps and cells where two cleaners or
    more arrive together, each counted once."""
    pos = [(r, c) for _, r, c, _ in problem.cleaners]
    met = 0
    for t in range(max((len(rt) for rt in routes), default=0)):
        arrivals = set()
        for i, route in enumerate(routes):
            if t < len(route):
                dr, dc = STEPS[route[t]]
                pos[i] = (pos[i][0] + dr, pos[i][1] + dc)
                arrivals.add((pos[i], i))
        cells = [cell for cell, _ in arrivals]
        met += sum(1 for cell in set(cells) if cells.count(cell) >= 2)
    return met
