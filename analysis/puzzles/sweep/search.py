"""Room Sweeper (ルームスイーパ): routes for cleaners that leave a room clean (SPEC §2.4).

Tiles: 0 dirty floor, 1 clean floor, 2 boy, 3 girl, 4 robot (start cells, already clean),
5 puddle, 6 apple, 7 bottle, 8 dust bin, 9 recycle box, 10 obstacle.

Rules as implemented (where SPEC §2.4 is silent, the choice is stated):

- Cleaners move at the same time, one orthogonal step per time step; a route is at most the
  cleaner's budget of steps. A cleaner that stops stays where it is for the rest of the game.
- A cleaner may not step straight back into the cell it just left; bins, boxes, obstacles and
  cells off the board cannot be entered; cleaners may share cells; anyone may walk over a
  puddle, apple or bottle, but only the right cleaner cleans it.
- Any cleaner cleans dirty floor; only a boy a puddle; a girl picks up an apple and a robot a
  bottle (the cell becomes clean, the item is held). A girl (robot) holding items empties them
  on stepping onto a cell orthogonally next to a dust bin (recycle box); pickup comes first.
- A *meeting*: two or more cleaners moving onto the same cell in the same step clean every dirty
  floor cell of the 3x3 block around it. (A cleaner that is standing still does not meet.)
- Solved when, after all routes, no dirty floor, puddle, apple or bottle is left and nobody
  holds an item.

Problem files: ``W H``, then H rows of W tile codes, then for boys, girls and robots in turn a
count and that many step budgets (given to that kind's cells in reading order). Text after a
``#`` on a line is a comment (our addition to the format).

Routes (output of the solver, input of ``--check``): one line per cleaner, boys, girls, robots,
each in reading order: ``boy 2,3 RRDL`` (kind, start row and column from 1, steps U D L R, or
``-`` for none).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dobutsu_tb.analysis.puzzles import PuzzleInputError
from dobutsu_tb.encoding.bits import popcount
from dobutsu_tb.encoding.jit import njit

DIRTY, CLEAN, BOY, GIRL, ROBOT, PUDDLE, APPLE, BOTTLE, BIN, BOX, OBSTACLE = range(11)
KINDS = ("boy", "girl", "robot")
STEPS = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
DIRS = "UDLR"
MAX_CELLS = 64
INF = 1 << 20


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
        tiles = tiles or self.tiles
        return "\n".join(" ".join(f"{t:2d}" for t in row) for row in tiles)


def parse_problem(text: str) -> Problem:
    """Read the problem format of SPEC §2.4.

    Raises
    ------
    PuzzleInputError
        For a malformed file: missing numbers, an unknown tile code, a budget count that does not
        match the board's cleaners, no cleaner at all, a board of more than 64 cells.
    """
    text = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    try:
        nums = [int(tok) for tok in text.split()]
    except ValueError as exc:
        raise PuzzleInputError(f"the problem holds something that is not an integer: {exc}") from None
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
        if n != len(cells):
            raise PuzzleInputError(f"the file gives {n} {kind} budgets but the board has {len(cells)} {kind}s")
        if len(rest) < n:
            raise PuzzleInputError(f"{n} {kind} budgets announced, {len(rest)} given")
        for (r, c), budget in zip(cells, rest[:n]):
            if budget < 0:
                raise PuzzleInputError(f"a step budget must be >= 0, got {budget}")
            cleaners.append((kind, r, c, budget))
        rest = rest[n:]
    if rest:
        raise PuzzleInputError(f"{len(rest)} numbers left over after the robots' budgets")
    if not cleaners:
        raise PuzzleInputError("the board has no cleaner")
    return Problem(w, h, tiles, cleaners)


def read_problem(path) -> Problem:
    return parse_problem(Path(path).read_text())


# --- the independent simulator ---------------------------------------------------------------


def simulate(problem: Problem, routes: list[str]) -> tuple[list[str], list[list[int]]]:
    """Play routes by the rules, in plain Python; returns (problems found, final tiles).

    An empty list of problems means the routes are legal and leave the room clean.
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
            if len(who) >= 2:
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
            problems.append(f"the {kind} from {r + 1},{c + 1} still holds {h} item(s)")
    return problems, tiles


def routes_text(problem: Problem, routes: list[str]) -> str:
    return "\n".join(f"{kind} {r + 1},{c + 1} {route or '-'}"
                     for (kind, r, c, _), route in zip(problem.cleaners, routes))


def parse_routes(problem: Problem, text: str) -> list[str]:
    """Routes in the format :func:`routes_text` writes (lines that do not start with a kind of
    cleaner are ignored, so the solver's whole output can be read back).

    Raises
    ------
    PuzzleInputError
        For a wrong number of lines or a line that names another cleaner.
    """
    lines = [ln.split() for ln in text.splitlines() if ln.split() and ln.split()[0] in KINDS]
    if len(lines) != len(problem.cleaners):
        raise PuzzleInputError(f"{len(lines)} route lines for {len(problem.cleaners)} cleaners")
    routes = []
    for k, (parts, (kind, r, c, _)) in enumerate(zip(lines, problem.cleaners), 1):
        if len(parts) != 3 or parts[0] != kind or parts[1] != f"{r + 1},{c + 1}":
            raise PuzzleInputError(f"route line {k} must read '{kind} {r + 1},{c + 1} STEPS'")
        routes.append("" if parts[2] == "-" else parts[2].upper())
    return routes


# --- the solver -------------------------------------------------------------------------------


@njit
def _bit(i):
    return np.int64(1) << i


@njit
def _cleans(masks, level, kind, cell):
    """True when a cleaner of ``kind`` stepping onto ``cell`` cleans something there
    (``masks[level]``: dirty floor, puddles, apples, bottles)."""
    b = _bit(cell)
    return (masks[level, 0] & b) != 0 or (masks[level, 1 + kind] & b) != 0


@njit
def _prune(n_cl, kind, t, pos, active, rem, hold, dirty, puddle, apple, bottle, dist, bin_dist, box_dist,
           block, meetings):
    """True when some item can no longer be cleaned in time (lower bounds for every cleaner):
    each step cleans at most one cell of its own (so the puddles, apples, bottles and, without
    meetings, all the dirt must not outnumber the steps left of those who can clean them), and
    each item must be within reach of a cleaner who can clean it."""
    steps = np.zeros(3, np.int64)
    for i in range(n_cl):
        if active[t, i]:
            steps[kind[i]] += rem[i]
    if popcount(puddle) > steps[0] or popcount(apple) > steps[1] or popcount(bottle) > steps[2]:
        return True
    if not meetings and popcount(dirty) + popcount(puddle) + popcount(apple) + popcount(bottle) \
            > steps[0] + steps[1] + steps[2]:
        return True
    for i in range(n_cl):
        if hold[t, i] > 0:
            d = bin_dist[pos[t, i]] if kind[i] == 1 else box_dist[pos[t, i]]
            if d > (rem[i] if active[t, i] else 0):
                return True
    for x in range(dist.shape[0]):
        b = _bit(x)
        if dirty & b:
            ok = False
            for i in range(n_cl):
                r = rem[i] if active[t, i] else 0
                if dist[pos[t, i], x] <= r:
                    ok = True
                    break
                if meetings:
                    for k in range(block.shape[1]):
                        y = block[x, k]
                        if y >= 0 and dist[pos[t, i], y] <= r:
                            ok = True
                            break
                    if ok:
                        break
            if not ok:
                return True
        elif (puddle | apple | bottle) & b:
            need = 0 if puddle & b else 1 if apple & b else 2
            ok = False
            for i in range(n_cl):
                if kind[i] != need:
                    continue
                r = rem[i] if active[t, i] else 0
                extra = 0 if need == 0 else bin_dist[x] if need == 1 else box_dist[x]
                if dist[pos[t, i], x] + extra <= r:
                    ok = True
                    break
            if not ok:
                return True
    return False


@njit
def _search(kind, start, budget, nbr, dist, bin_adj, box_adj, bin_dist, box_dist, block, tiles0,
            first, stride, stop, out_moves):
    """DFS over time steps, meetings included. At each step every active cleaner picks a
    direction (0..3, not straight back) or stops (4), from an option list ordered best first;
    the combinations are enumerated like an odometer. Level-0 combinations ``first, first +
    stride, ...`` are this call's share. Returns the number of steps of a solution written to
    ``out_moves[t, i]`` (-1 for no move), or -1."""
    n_cl = kind.shape[0]
    n = tiles0.shape[0]
    T = 0
    for i in range(n_cl):
        T = max(T, budget[i])
    pos = np.empty((T + 2, n_cl), np.int64)
    prev = np.empty((T + 2, n_cl), np.int64)
    active = np.empty((T + 2, n_cl), np.bool_)
    hold = np.empty((T + 2, n_cl), np.int64)
    masks = np.empty((T + 2, 4), np.int64)
    choice = np.empty((T + 2, n_cl), np.int64)
    opts = np.empty((T + 2, n_cl, 5), np.int64)
    nopt = np.empty((T + 2, n_cl), np.int64)
    rem = np.empty(n_cl, np.int64)
    dirty = np.int64(0)
    puddle = np.int64(0)
    apple = np.int64(0)
    bottle = np.int64(0)
    for x in range(n):
        if tiles0[x] == DIRTY:
            dirty |= _bit(x)
        elif tiles0[x] == PUDDLE:
            puddle |= _bit(x)
        elif tiles0[x] == APPLE:
            apple |= _bit(x)
        elif tiles0[x] == BOTTLE:
            bottle |= _bit(x)
    for i in range(n_cl):
        pos[0, i] = start[i]
        prev[0, i] = -1
        active[0, i] = budget[i] > 0
        hold[0, i] = 0
    masks[0, 0] = dirty
    masks[0, 1] = puddle
    masks[0, 2] = apple
    masks[0, 3] = bottle
    counter0 = 0
    t = 0
    fresh = True
    while t >= 0:
        if stop[0]:
            return -1
        if fresh:
            fresh = False
            if masks[t, 0] == 0 and masks[t, 1] == 0 and masks[t, 2] == 0 and masks[t, 3] == 0:
                clean = True
                for i in range(n_cl):
                    if hold[t, i]:
                        clean = False
                if clean:
                    stop[0] = 1
                    return t
            any_active = False
            for i in range(n_cl):
                rem[i] = budget[i] - t
                any_active |= active[t, i]
            if not any_active or _prune(n_cl, kind, t, pos, active, rem, hold, masks[t, 0], masks[t, 1],
                                        masks[t, 2], masks[t, 3], dist, bin_dist, box_dist, block, True):
                t -= 1
                continue
            # Each cleaner's options at this step, best first: steps onto something it can
            # clean, other steps, stopping; a cleaner that has stopped only stays.
            last = -1
            for i in range(n_cl):
                k = 0
                if active[t, i]:
                    for pass_ in range(2):
                        for d in range(4):
                            to = nbr[pos[t, i], d]
                            if to < 0 or to == prev[t, i]:
                                continue
                            if _cleans(masks, t, kind[i], to) == (pass_ == 0):
                                opts[t, i, k] = d
                                k += 1
                opts[t, i, k] = 4
                nopt[t, i] = k + 1
                choice[t, i] = 0
                if nopt[t, i] > 1:
                    last = i
            if last < 0:  # nobody can move: only the all-stop combination, already checked
                t -= 1
                continue
            choice[t, last] -= 1  # the odometer's first increment makes it the first combination
        # Next combination at level t (an odometer over the cleaners' option lists).
        found = False
        while True:
            i = n_cl - 1
            while i >= 0:
                if nopt[t, i] == 1:
                    i -= 1
                    continue
                choice[t, i] += 1
                if choice[t, i] < nopt[t, i]:
                    break
                choice[t, i] = 0
                i -= 1
            if i < 0:
                break
            moved = False
            for j in range(n_cl):
                if opts[t, j, choice[t, j]] < 4:
                    moved = True
            if not moved:
                continue
            if t == 0:
                counter0 += 1
                if (counter0 - 1) % stride != first:
                    continue
            found = True
            break
        if not found:
            t -= 1
            continue
        # Apply the step to build level t + 1.
        dirty = masks[t, 0]
        puddle = masks[t, 1]
        apple = masks[t, 2]
        bottle = masks[t, 3]
        for j in range(n_cl):
            c = opts[t, j, choice[t, j]]
            hold[t + 1, j] = hold[t, j]
            if c == 4:
                pos[t + 1, j] = pos[t, j]
                prev[t + 1, j] = prev[t, j]
                active[t + 1, j] = False
                continue
            to = nbr[pos[t, j], c]
            pos[t + 1, j] = to
            prev[t + 1, j] = pos[t, j]
            active[t + 1, j] = t + 1 < budget[j]
            b = _bit(to)
            if dirty & b:
                dirty &= ~b
            elif puddle & b and kind[j] == 0:
                puddle &= ~b
            elif apple & b and kind[j] == 1:
                apple &= ~b
                hold[t + 1, j] += 1
            elif bottle & b and kind[j] == 2:
                bottle &= ~b
                hold[t + 1, j] += 1
            if hold[t + 1, j] and ((kind[j] == 1 and bin_adj[to]) or (kind[j] == 2 and box_adj[to])):
                hold[t + 1, j] = 0
        for j in range(n_cl):  # meetings: two movers arriving on one cell
            if opts[t, j, choice[t, j]] == 4:
                continue
            for k in range(j + 1, n_cl):
                if opts[t, k, choice[t, k]] < 4 and pos[t + 1, k] == pos[t + 1, j]:
                    for q in range(block.shape[1]):
                        y = block[pos[t + 1, j], q]
                        if y >= 0:
                            dirty &= ~_bit(y)
        masks[t + 1, 0] = dirty
        masks[t + 1, 1] = puddle
        masks[t + 1, 2] = apple
        masks[t + 1, 3] = bottle
        for j in range(n_cl):
            c = opts[t, j, choice[t, j]]
            out_moves[t, j] = c if c < 4 else -1
        t += 1
        fresh = True
    return -1


@njit
def _search_routes(kind, start, budget, nbr, dist, bin_adj, box_adj, bin_dist, box_dist, block, tiles0,
                   first, stride, stop, out_moves):
    """Without meetings the cleaners do not interact in time, only through what they clean, so
    routes are searched one cleaner after another: depth-first over (cleaner, step), each step a
    direction (not straight back) or the end of that cleaner's route. The bounds of :func:`_prune`
    see the current cleaner's steps left and the later cleaners' whole budgets. The first
    cleaner's first-step choices ``first, first + stride, ...`` are this call's share. Returns the
    rows of ``out_moves`` filled (``out_moves[k, i]``: the k-th step of cleaner i, -1 past its
    end), or -1."""
    n_cl = kind.shape[0]
    n = tiles0.shape[0]
    D = 1
    for i in range(n_cl):
        D += budget[i] + 1
    pos = np.empty((D + 1, n_cl), np.int64)
    active = np.empty((D + 1, n_cl), np.bool_)
    hold = np.zeros((D + 1, n_cl), np.int64)
    masks = np.empty((D + 1, 4), np.int64)
    cur = np.empty(D + 1, np.int64)  # the cleaner whose route is being chosen at depth d
    step = np.empty(D + 1, np.int64)  # its steps so far
    prev = np.empty(D + 1, np.int64)  # the cell it came from (-1 at its start)
    opts = np.empty((D + 1, 5), np.int64)
    nopt = np.empty(D + 1, np.int64)
    choice = np.empty(D + 1, np.int64)
    rem = np.empty(n_cl, np.int64)
    for q in range(4):
        masks[0, q] = 0
    for x in range(n):
        if tiles0[x] == DIRTY:
            masks[0, 0] |= _bit(x)
        elif tiles0[x] == PUDDLE:
            masks[0, 1] |= _bit(x)
        elif tiles0[x] == APPLE:
            masks[0, 2] |= _bit(x)
        elif tiles0[x] == BOTTLE:
            masks[0, 3] |= _bit(x)
    for i in range(n_cl):
        pos[0, i] = start[i]
        active[0, i] = True
    cur[0] = 0
    step[0] = 0
    prev[0] = -1
    d = 0
    fresh = True
    while d >= 0:
        if stop[0]:
            return -1
        i = cur[d]
        if fresh:
            fresh = False
            if i >= n_cl:
                if masks[d, 0] == 0 and masks[d, 1] == 0 and masks[d, 2] == 0 and masks[d, 3] == 0:
                    stop[0] = 1
                    # Replay the choices into routes.
                    for a in range(out_moves.shape[0]):
                        for b in range(n_cl):
                            out_moves[a, b] = -1
                    longest = 0
                    for e in range(d):
                        c = opts[e, choice[e]]
                        if c < 4:
                            out_moves[step[e], cur[e]] = c
                            longest = max(longest, step[e] + 1)
                    return longest
                d -= 1
                continue
            for j in range(n_cl):
                rem[j] = budget[j] if j > i else (budget[j] - step[d] if j == i else 0)
            if _prune(n_cl, kind, d, pos, active, rem, hold, masks[d, 0], masks[d, 1], masks[d, 2],
                      masks[d, 3], dist, bin_dist, box_dist, block, False):
                d -= 1
                continue
            k = 0
            if step[d] < budget[i]:
                for pass_ in range(2):
                    for dd in range(4):
                        to = nbr[pos[d, i], dd]
                        if to < 0 or to == prev[d]:
                            continue
                        if _cleans(masks, d, kind[i], to) == (pass_ == 0):
                            opts[d, k] = dd
                            k += 1
            if hold[d, i] == 0:
                opts[d, k] = 4  # ending the route is allowed once its items are dumped
                k += 1
            nopt[d] = k
            choice[d] = -1
        choice[d] += 1
        if d == 0 and choice[d] < nopt[d]:
            while choice[d] < nopt[d] and (choice[d] % stride) != first:
                choice[d] += 1
        if choice[d] >= nopt[d]:
            d -= 1
            continue
        c = opts[d, choice[d]]
        for j in range(n_cl):
            pos[d + 1, j] = pos[d, j]
            active[d + 1, j] = active[d, j]
            hold[d + 1, j] = hold[d, j]
        for q in range(4):
            masks[d + 1, q] = masks[d, q]
        if c == 4:
            active[d + 1, i] = False
            cur[d + 1] = i + 1
            step[d + 1] = 0
            prev[d + 1] = -1
        else:
            to = nbr[pos[d, i], c]
            pos[d + 1, i] = to
            cur[d + 1] = i
            step[d + 1] = step[d] + 1
            prev[d + 1] = pos[d, i]
            b = _bit(to)
            if masks[d + 1, 0] & b:
                masks[d + 1, 0] &= ~b
            elif masks[d + 1, 1] & b and kind[i] == 0:
                masks[d + 1, 1] &= ~b
            elif masks[d + 1, 2] & b and kind[i] == 1:
                masks[d + 1, 2] &= ~b
                hold[d + 1, i] += 1
            elif masks[d + 1, 3] & b and kind[i] == 2:
                masks[d + 1, 3] &= ~b
                hold[d + 1, i] += 1
            if hold[d + 1, i] and ((kind[i] == 1 and bin_adj[to]) or (kind[i] == 2 and box_adj[to])):
                hold[d + 1, i] = 0
        d += 1
        fresh = True
    return -1


@dataclass
class SweepResult:
    """Answer of :func:`solve`: routes (or None when none exist) and whether meetings were needed
    by the search that found them."""

    routes: list | None
    with_meetings: bool


def _tables(problem: Problem):
    w, h = problem.width, problem.height
    n = w * h
    flat = [t for row in problem.tiles for t in row]
    enterable = [t not in (BIN, BOX, OBSTACLE) for t in flat]
    nbr = -np.ones((n, 4), np.int64)
    for x in range(n):
        r, c = divmod(x, w)
        for d, ch in enumerate(DIRS):
            dr, dc = STEPS[ch]
            rr, cc = r + dr, c + dc
            if 0 <= rr < h and 0 <= cc < w and enterable[rr * w + cc]:
                nbr[x, d] = rr * w + cc
    dist = np.full((n, n), INF, np.int64)
    for s in range(n):
        if not enterable[s]:
            continue
        dist[s, s] = 0
        frontier = [s]
        while frontier:
            nxt = []
            for x in frontier:
                for y in nbr[x]:
                    if y >= 0 and dist[s, y] == INF:
                        dist[s, y] = dist[s, x] + 1
                        nxt.append(y)
            frontier = nxt

    def adjacent_to(code):
        adj = np.zeros(n, np.bool_)
        for x in range(n):
            r, c = divmod(x, w)
            adj[x] = enterable[x] and any(0 <= r + dr < h and 0 <= c + dc < w and flat[(r + dr) * w + c + dc] == code
                                          for dr, dc in STEPS.values())
        return adj

    bin_adj, box_adj = adjacent_to(BIN), adjacent_to(BOX)
    bin_dist = np.array([min([dist[x, y] for y in range(n) if bin_adj[y]] or [INF]) for x in range(n)], np.int64)
    box_dist = np.array([min([dist[x, y] for y in range(n) if box_adj[y]] or [INF]) for x in range(n)], np.int64)
    block = -np.ones((n, 9), np.int64)
    for x in range(n):
        r, c = divmod(x, w)
        k = 0
        for rr in range(r - 1, r + 2):
            for cc in range(c - 1, c + 2):
                if 0 <= rr < h and 0 <= cc < w and enterable[rr * w + cc]:
                    block[x, k] = rr * w + cc
                    k += 1
    return np.array(flat, np.int64), nbr, dist, bin_adj, box_adj, bin_dist, box_dist, block


def solve(problem: Problem, threads: int = 2) -> SweepResult:
    """Routes that clean the room, or a proof that none exist (``routes`` None).

    First searched without meetings, cleaner by cleaner (tight bounds; any solution found is
    valid, since meetings only clean more), then with meetings, all cleaners step by step. Each
    search splits the first choices among ``threads`` threads (the kernels release the GIL).
    """
    tiles, nbr, dist, bin_adj, box_adj, bin_dist, box_dist, block = _tables(problem)
    kinds = np.array([KINDS.index(k) for k, _, _, _ in problem.cleaners], np.int64)
    start = np.array([r * problem.width + c for _, r, c, _ in problem.cleaners], np.int64)
    budget = np.array([b for _, _, _, b in problem.cleaners], np.int64)
    T = int(budget.max())
    for meetings in (False, True):
        stop = np.zeros(1, np.int64)
        outs = [np.full((T + 1, len(kinds)), -1, np.int64) for _ in range(threads)]
        answers = [-1] * threads

        search = _search if meetings else _search_routes

        def work(k):
            answers[k] = search(kinds, start, budget, nbr, dist, bin_adj, box_adj, bin_dist, box_dist,
                                block, tiles, k, threads, stop, outs[k])

        pool = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
        for th in pool:
            th.start()
        for th in pool:
            th.join()
        for k in range(threads):
            if answers[k] >= 0:
                steps = answers[k]
                routes = ["".join(DIRS[outs[k][t, i]] for t in range(steps) if outs[k][t, i] >= 0)
                          for i in range(len(kinds))]
                return SweepResult(routes, meetings)
    return SweepResult(None, True)
