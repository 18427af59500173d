#!/usr/bin/env python3
"""Run the searches of Room Sweeper's search engine (``--engine search``) one at a time on a
problem and print, for each, its seconds, nodes, dead nodes remembered and answer (the figures
docs/puzzles.md gives for q64).

Usage: python scripts/sweep_phases.py PROBLEM [--phases none,2,4,any] [--max-nodes N] [--threads T]

A phase is ``none`` (no meetings), a number (the bounds allow for that many meetings) or ``any``
(the complete search); ``--max-nodes`` makes each give up after about that many nodes. The
kernels are compiled (or loaded) before the first phase is timed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dobutsu_tb.analysis.puzzles.sweep import read_problem, solve  # noqa: E402
from dobutsu_tb.analysis.puzzles.sweep.arrays import problem_arrays  # noqa: E402
from dobutsu_tb.analysis.puzzles.sweep.bounds import NO_MEETINGS, UNLIMITED  # noqa: E402


def phase(text: str) -> int:
    """The ``phases`` value of ``solve`` for ``none``, ``any`` or a number of meetings."""
    return {"none": NO_MEETINGS, "any": UNLIMITED}.get(text) or int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problem", type=Path)
    parser.add_argument("--phases", default="none,2,4,any")
    parser.add_argument("--max-nodes", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    problem = read_problem(args.problem)
    arrays = problem_arrays(problem)
    cells = sum((int(w) & (2 ** 64 - 1)).bit_count() for w in arrays.remaining)
    print(f"{args.problem.name}: {cells} cells to clean, {int(arrays.budget.sum())} steps in all", flush=True)
    # compile or load the kernels
    solve(problem, threads=args.threads, phases=(NO_MEETINGS,), max_nodes=1, engine="search")
    for text in args.phases.split(","):
        start = time.perf_counter()
        result = solve(problem, threads=args.threads, phases=(phase(text),), max_nodes=args.max_nodes,
                       engine="search")
        answer = ("solved" if result.routes is not None else "no routes" if result.complete
                  else "gave up at the node limit")
        print(f"meetings {text:>4}: {time.perf_counter() - start:8.1f} s  {result.nodes:>13,} nodes  "
              f"{result.dead:>12,} dead  {answer}", flush=True)


if __name__ == "__main__":
    main()
