#!/usr/bin/env python3
"""Make a Room Sweeper problem that is solvable by construction.

Usage: python scripts/make_sweep_problem.py W H --boys B1,B2 --girls G1 --robots R1 [--seed N]

Cleaners walk random legal routes (their budgets long) over a clean board with a few obstacles,
bins and boxes; the cells they clean are then made dirty, some boys' cells puddles, some girls'
and robots' cells apples and bottles (only where the route passes a bin or box afterwards).
The routes found are checked with the simulator and printed as comments after the problem.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dobutsu_tb.analysis.puzzles.sweep import (
    APPLE,
    BIN,
    BOTTLE,
    BOX,
    BOY,
    CLEAN,
    DIRTY,
    GIRL,
    OBSTACLE,
    PUDDLE,
    ROBOT,
    STEPS,
    Problem,
    routes_text,
    simulate,
)


def budgets(text):
    return [int(b) for b in text.split(",")] if text else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("width", type=int)
    parser.add_argument("height", type=int)
    parser.add_argument("--boys", default="")
    parser.add_argument("--girls", default="")
    parser.add_argument("--robots", default="")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--walls", type=float, default=0.08)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    w, h = args.width, args.height
    while True:
        tiles = [[CLEAN] * w for _ in range(h)]
        cells = [(r, c) for r in range(h) for c in range(w)]
        rng.shuffle(cells)
        for _ in range(int(args.walls * w * h)):
            r, c = cells.pop()
            tiles[r][c] = OBSTACLE
        if budgets(args.girls):
            r, c = cells.pop()
            tiles[r][c] = BIN
        if budgets(args.robots):
            r, c = cells.pop()
            tiles[r][c] = BOX
        starts = []
        for kind, code, bs in (("boy", BOY, budgets(args.boys)), ("girl", GIRL, budgets(args.girls)),
                               ("robot", ROBOT, budgets(args.robots))):
            for b in bs:
                r, c = cells.pop()
                tiles[r][c] = code
                starts.append((kind, r, c, b))
        # Cleaners are listed in reading order within each kind, as the file format assigns budgets.
        order = {"boy": 0, "girl": 1, "robot": 2}
        starts.sort(key=lambda s: (order[s[0]], s[1], s[2]))
        problem = Problem(w, h, tiles, starts)
        routes, visits = [], []
        walked = {(r, c) for _, r, c, _ in starts}
        for kind, r, c, b in starts:
            route, prev, seen = "", None, []
            for _ in range(b):
                options = [d for d, (dr, dc) in STEPS.items()
                           if 0 <= r + dr < h and 0 <= c + dc < w and tiles[r + dr][c + dc] not in (BIN, BOX, OBSTACLE)
                           and (r + dr, c + dc) != prev]
                if not options:
                    break
                # Prefer cells nobody has walked yet, so that budgets stay tight, as in the game.
                fresh = [d for d in options if (r + STEPS[d][0], c + STEPS[d][1]) not in walked]
                d = rng.choice(fresh or options)
                prev, (r, c) = (r, c), (r + STEPS[d][0], c + STEPS[d][1])
                route += d
                seen.append((r, c))
                walked.add((r, c))
            routes.append(route)
            visits.append((kind, seen))
        def near(r, c, code):
            return any(0 <= r + dr < h and 0 <= c + dc < w and tiles[r + dr][c + dc] == code
                       for dr, dc in STEPS.values())
        start_cells = {(r, c) for _, r, c, _ in starts}
        for kind, seen in visits:
            for k, (r, c) in enumerate(seen):
                if (r, c) in start_cells or tiles[r][c] != CLEAN:
                    continue
                later = seen[k:]
                roll = rng.random()
                if kind == "boy" and roll < 0.3:
                    tiles[r][c] = PUDDLE
                elif kind == "girl" and roll < 0.3 and any(near(rr, cc, BIN) for rr, cc in later):
                    tiles[r][c] = APPLE
                elif kind == "robot" and roll < 0.3 and any(near(rr, cc, BOX) for rr, cc in later):
                    tiles[r][c] = BOTTLE
                else:
                    tiles[r][c] = DIRTY
        problems, _ = simulate(problem, routes)
        if not problems:
            break
    print(f"{w} {h}")
    for row in tiles:
        print(" ".join(f"{t:2d}" for t in row))
    for kind in ("boy", "girl", "robot"):
        bs = [b for k, _, _, b in starts if k == kind]
        print(len(bs), *bs)
    print("\n# routes that solve it (made with --seed %d):" % args.seed)
    for line in routes_text(problem, routes).splitlines():
        print("#", line)


if __name__ == "__main__":
    main()
