#!/usr/bin/env python3
"""Time each puzzle's main command.

Usage: python scripts/bench_puzzles.py [--full]

Without --full it times the quick jobs (solutions, Tank Change, Othello); --full adds the
central game's counts (about 3 minutes) and its fewest-moves search.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analysis import lastone, othello, tankchange  # noqa: E402

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
    if args.full:
        central = lastone.read_board(DATA / "central.txt")
        timed("lastone central: --count", lambda: (lambda r: f"{r.reachable:,} boards, {r.reachable_up_to_symmetry:,} "
                                                   f"up to symmetry, {r.solutions:,} solutions")(lastone.count(central)))
        timed("lastone central: --fewest-moves", lambda: f"{len(lastone.fewest_moves(central)) - 1} moves")


if __name__ == "__main__":
    main()
