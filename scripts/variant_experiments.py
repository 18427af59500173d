#!/usr/bin/env python3
"""The two rule experiments of docs/variants.md: dobutsu shogi without drops, and without chick
drops on the far rank, each solved and compared with the standard game.

Usage::

    python scripts/variant_experiments.py [--standard dobutsu.h5] [--nodrops dobutsu-nodrops.h5]
        [--no-far-drop dobutsu-no-far-drop.h5]

Files that do not exist are built first (``dobutsu-tb build --variant NAME``; the standard one
and the no-far-drop one take a couple of minutes each). It prints, for each of the three games:
reachable and non-terminal positions, wins, draws and losses (non-terminal positions, and with
the terminal ones as jh85/dobutsushogi counts them), the start position's value and the longest
win. Then, for the positions the standard game and the no-far-drop game share, how many change
their WDL and how many their DTM, and whether the start does; and, in the standard game, the
positions whose every value-keeping move is a chick dropped on the far rank (Tanaka 2009, 4.4,
counts 68 positions where that drop is "the unique correct move").
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from dobutsu_tb.encoding import config
from dobutsu_tb.encoding.binding import kernel_options
from dobutsu_tb.encoding.jit import prange
from dobutsu_tb.tablebase.game.key import canonical_key, decode_key
from dobutsu_tb.tablebase.game.layout import CATCH, MAX_MOVES, N_FILES, SLOT_PIECE, TRY
from dobutsu_tb.tablebase.game.rules import DROP, FROM_MASK, TO_MASK, TO_SHIFT, classify, gen_moves, make_move
from dobutsu_tb.tablebase.reader import TablebaseFile
from dobutsu_tb.tablebase.values import decode_values

#: Bound to the standard game's tables (Game.jitted).
__kernels__ = ("_mover_wdl", "_far_drop_only", "_scan_far_drops")

CHICK = 4


def _mover_wdl(rules, keys, wdl, board, hand, move):
    """The WDL that ``move`` gives its mover (the position after it looked up in ``keys``)."""
    cb, ch = make_move(rules, board, hand, move)
    cls = classify(rules, cb, ch)
    if cls == CATCH:
        return -1
    if cls == TRY:
        return 1
    return -wdl[np.searchsorted(keys, canonical_key(rules, cb, ch))]


def _far_drop_only(rules, keys, wdl, board, hand, moves):
    """How many moves keep the position's value (WDL), when every one of them is a chick dropped on
    the far rank; else 0."""
    n = gen_moves(rules, board, hand, moves)
    best = -2
    for k in range(n):  # the best WDL a move gives its mover
        best = max(best, _mover_wdl(rules, keys, wdl, board, hand, moves[k]))
    found = 0
    for k in range(n):
        w = _mover_wdl(rules, keys, wdl, board, hand, moves[k])
        if w != best:
            continue
        src, dst = moves[k] & FROM_MASK, (moves[k] >> TO_SHIFT) & TO_MASK
        if src < DROP or rules[SLOT_PIECE + src - DROP] != CHICK or dst >= N_FILES:
            return 0
        found += 1
    return found


@kernel_options(parallel=True)
def _scan_far_drops(rules, keys, wdl, out):
    n_threads = config.THREADS
    per = (keys.shape[0] + n_threads - 1) // n_threads
    for t in prange(n_threads):
        moves = np.empty(rules[MAX_MOVES], np.int64)
        for i in range(t * per, min(keys.shape[0], (t + 1) * per)):
            board, hand = decode_key(rules, keys[i])
            out[i] = _far_drop_only(rules, keys, wdl, board, hand, moves)


def _ensure(path: Path, variant: str) -> Path:
    if not path.exists():
        print(f"building {path} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "dobutsu_tb.analysis.cli", "build", "--variant", variant, "--out",
                        str(path), "--quiet"], check=True, stdout=subprocess.DEVNULL)
    return path


def _describe(name: str, path: Path) -> tuple:
    with TablebaseFile(path) as f:
        m = f.metadata
        keys, values = f.read_all()
    wdl, dtm = decode_values(values)
    wins = int(np.count_nonzero(wdl == 1))
    draws = int(np.count_nonzero(wdl == 0))
    losses = int(np.count_nonzero(wdl == -1))
    longest = int(dtm[wdl == 1].max()) if wins else 0
    start = {1: "win", 0: "draw", -1: "loss"}[m.start_wdl] + (f" in {m.start_dtm} plies" if m.start_wdl else "")
    print(f"{name}  ({path})")
    print(f"  reachable {m.reachable:,}, non-terminal {m.nonterminal:,} (catch-terminal {m.catch_terminal:,}, "
          f"try-terminal {m.try_terminal:,})")
    print(f"  non-terminal: {wins:,} wins, {draws:,} draws, {losses:,} losses; with the terminal positions: "
          f"{wins + m.catch_terminal:,} / {draws:,} / {losses + m.try_terminal:,} (W/D/L for the side to move)")
    print(f"  start {m.start}: {start} for the side to move; longest win {longest} plies")
    return keys, wdl, dtm, m


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--standard", type=Path, default=Path("dobutsu.h5"))
    parser.add_argument("--nodrops", type=Path, default=Path("dobutsu-nodrops.h5"))
    parser.add_argument("--no-far-drop", type=Path, default=Path("dobutsu-no-far-drop.h5"))
    args = parser.parse_args()
    std = _describe("dobutsu", _ensure(args.standard, "dobutsu"))
    _describe("dobutsu-nodrops", _ensure(args.nodrops, "dobutsu-nodrops"))
    nfd = _describe("dobutsu-no-far-drop", _ensure(args.no_far_drop, "dobutsu-no-far-drop"))

    keys, wdl, dtm, meta = std
    k2, w2, d2, m2 = nfd
    common, i1, i2 = np.intersect1d(keys, k2, assume_unique=True, return_indices=True)
    wdl_changed = int(np.count_nonzero(wdl[i1] != w2[i2]))
    dtm_changed = int(np.count_nonzero((wdl[i1] != w2[i2]) | (dtm[i1] != d2[i2])))
    print("\nthe standard game against the no-far-drop game:")
    print(f"  {keys.shape[0] - common.shape[0]:,} non-terminal positions of the standard game are not reachable "
          f"without far-rank chick drops; {k2.shape[0] - common.shape[0]:,} of the other game are not the standard "
          f"game's")
    print(f"  of the {common.shape[0]:,} positions both reach, {wdl_changed:,} change their WDL and {dtm_changed:,} "
          f"their value (WDL or DTM)")
    same = (meta.start_wdl, meta.start_dtm) == (m2.start_wdl, m2.start_dtm)
    print(f"  the start position's value {'does not change' if same else 'changes'}: "
          f"{meta.start_wdl, meta.start_dtm} against {m2.start_wdl, m2.start_dtm} (WDL, DTM)")

    from dobutsu_tb.tablebase.game.game import game_of

    t = time.perf_counter()
    out = np.zeros(keys.shape[0], np.int8)
    game_of().jitted(sys.modules[__name__])._scan_far_drops(game_of().rules_array, keys, wdl, out)
    print(f"\nin the standard game, {int(np.count_nonzero(out)):,} positions keep their value only by dropping a "
          f"chick on the far rank, {int(np.count_nonzero(out == 1)):,} of them by one such drop alone "
          f"({time.perf_counter() - t:.0f} s)")


if __name__ == "__main__":
    main()
