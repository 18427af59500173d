#!/usr/bin/env python3
"""The positions without a legal move in a tablebase, the values that hinge on them, and the
counts of all reachable positions as jh85/dobutsushogi's solver makes them (it leaves those
positions undecided: draws). The method is :mod:`dobutsu_tb.analysis.no_moves`'s.

Usage::

    python scripts/no_move_positions.py dobutsu-5x3.h5

It reads the file lazily (a few hundred MB of memory; about a minute for the 5x3 board, most of
it the scan of /values for the positions without a move).
"""

from __future__ import annotations

import argparse
import sys
import time

from dobutsu_tb.analysis.no_moves import jh85_counts, scan_no_move_keys
from dobutsu_tb.tablebase.probe import open_tablebase
from dobutsu_tb.tablebase.values import describe_value, signed_text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tablebase")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    roots = scan_no_move_keys(args.tablebase)
    print(f"positions without a legal move: {roots.shape[0]} ({time.perf_counter() - t0:.1f} s to find)")
    with open_tablebase(args.tablebase) as tb:
        counts = jh85_counts(tb, roots)
        m = tb.metadata
    for p in counts.no_moves:
        print(f"  {p.text()}")
    print("values that change when they are left undecided (ours -> jh85's convention):")
    for c in counts.changes:
        print(f"  {c.position.text()}: {describe_value(c.wdl, abs(c.dtm))} (DTM {signed_text(c.dtm)}) -> "
              f"{describe_value(c.undecided_wdl, 0)}")
    print(f"all reachable positions, W/L/D for the side to move (terminal ones included):\n"
          f"  ours:           {m.wins + m.catch_terminal:,} / {m.losses + m.try_terminal:,} / {m.draws:,}\n"
          f"  jh85's solver:  {counts.wins:,} / {counts.losses:,} / {counts.draws:,}")
    print(f"{time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
