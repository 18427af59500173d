#!/usr/bin/env python3
"""Time each puzzle's main command.

Usage: python scripts/bench_puzzles.py [--full]

Without --full it times the quick jobs (Last One solutions and fewest moves of the shipped
shapes, Tank Change, Othello, every squares board and Room Sweeper problem); --full adds the
central game's counts (about 3 minutes) and its fewest moves (about 6 minutes, 8.6 GiB).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dobutsu_tb.analysis.puzzles import lastone, othello, squares, sweep, tankchange

DATA = ROOT / "data" / "lastone"


def timed(label, fn):
    t = time.perf_counter()
    answer = fn()
    secs = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"{label:<48}{secs:>9.2f} s   {answer}   (peak RSS so far {rss:.2f} GiB)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="also the central game's counts and fewest moves")
    args = parser.parse_args()
    # Compile the kernels first, so the figures are of the searches alone.
    lastone.solve(lastone.read_board(DATA / "cross.txt"))
    lastone.fewest_moves(lastone.read_board(DATA / "cross.txt"))
    lastone.count(lastone.read_board(DATA / "cross.txt"))
    for name in ("t-shape", "cross", "plus", "pyramid", "arrow", "diamond", "central"):
        start = lastone.read_board(DATA / f"{name}.txt")
        timed(f"lastone {name}: solve", lambda: f"{len(lastone.solve(start)) - 1} jumps")
    for name in ("t-shape", "cross", "plus", "pyramid", "arrow", "diamond"):
        start = lastone.read_board(DATA / f"{name}.txt")
        timed(f"lastone {name}: --fewest-moves", lambda: f"{len(lastone.fewest_moves(start)) - 1} moves")
    timed("tankchange --count", lambda: (lambda r: f"{r.moves} moves, {r.count} shortest sequences")(tankchange.solve()))
    timed("othello --count", lambda: (lambda r: f"{r.placements} placements, {r.count} shortest sequences")(othello.solve()))
    squares.solve(squares.parse_grid("..\n.."))
    for path in sorted((ROOT / "data" / "squares").glob("*.txt")):
        grid = squares.read_grid(path)
        timed(f"squares {path.stem}", lambda: f"{squares.solve(grid, limit=0).count:,} solutions")
    sweep.solve(sweep.read_problem(ROOT / "data" / "sweep" / "tiny.txt"))
    for path in sorted((ROOT / "data" / "sweep").glob("*.txt")):
        problem = sweep.read_problem(path)
        kinds = "/".join(str(sum(1 for c in problem.cleaners if c[0] == k)) for k in sweep.KINDS)
        def answer(problem=problem):
            r = sweep.solve(problem)
            return "no solution" if r.routes is None else ("solved with meetings" if r.with_meetings else "solved")
        timed(f"sweep {path.stem} ({problem.width}x{problem.height}, {kinds} b/g/r)", answer)
    if args.full:
        central = lastone.read_board(DATA / "central.txt")
        timed("lastone central: --count", lambda: (lambda r: f"{r.reachable:,} boards, {r.reachable_up_to_symmetry:,} "
                                                   f"up to symmetry, {r.solutions:,} solutions")(lastone.count(central)))
        timed("lastone central: --fewest-moves", lambda: f"{len(lastone.fewest_moves(central)) - 1} moves")


if __name__ == "__main__":
    main()
