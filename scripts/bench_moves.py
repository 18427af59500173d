#!/usr/bin/env python3
"""Benchmark move and unmove generation on the stored positions of a tablebase file: how much of
the enumeration and of the retrograde analysis is their own work, with no table in the way
(docs/building.md, "How fast").

Usage::

    python scripts/bench_moves.py PATH [--positions N] [--runs R] [--sorted | --window W]

It reads ``N`` keys of the file, evenly spaced (default: all of them), and shuffles them: the
builder finds positions in the table's hash order, as good as random, which is the worst case
for the branch predictor. ``--window W`` then sorts each W keys, as the builder does (2 M at a
time in the enumeration, 4 M in the retrograde analysis); ``--sorted`` keeps the file's key
order. It times, on every thread numba has (``NUMBA_NUM_THREADS``), one pass over them for
each of:

- ``decode``: the key decoded (every other pass does it too);
- ``children``: :func:`~dobutsu_tb.tablebase.game.rules.child_keys`, what the enumeration's
  expansion does for a position before it hashes and deals out the children;
- ``unmoves``: :func:`~dobutsu_tb.tablebase.game.unmoves.gen_unmoves` (the non-terminal
  predecessors as states);
- ``parent keys``: :func:`~dobutsu_tb.tablebase.game.unmoves.parent_keys` (their canonical keys);
- ``+ sorted, hashed``: the same, then sorted, de-duplicated and hashed, as the retrograde
  analysis does before it looks the predecessors up.

It prints the best of ``R`` runs (default 2) of each: wall seconds, nanoseconds a position
(wall time times threads over positions: one thread's cost) and the children or predecessors
made. The kernel is compiled (or loaded from the cache) before the first run.
"""

from __future__ import annotations

import argparse
import sys
import time

import h5py
import numpy as np

from dobutsu_tb.encoding import config
from dobutsu_tb.encoding.binding import kernel_options
from dobutsu_tb.encoding.bits import sort_prefix
from dobutsu_tb.encoding.compact_layout import key_hash
from dobutsu_tb.encoding.jit import prange
from dobutsu_tb.tablebase.game.key import decode_key
from dobutsu_tb.tablebase.game.layout import MAX_MOVES, MAX_UNMOVES
from dobutsu_tb.tablebase.game.rules import child_keys
from dobutsu_tb.tablebase.game.unmoves import gen_unmoves, parent_keys

__kernels__ = ("generate",)

#: Keys read from the file at a time when ``--positions`` samples them (256 MiB of int64).
_READ_SLICE = 1 << 25

#: The passes, by the mode number :func:`generate` takes.
PASSES = ("decode", "children", "unmoves", "parent keys", "+ sorted, hashed")


@kernel_options(parallel=True)
def generate(rules, keys, layout, mode, n_threads, out):
    """One pass of ``PASSES[mode]`` over ``keys``, thread t over its share; ``out[t]`` gets a
    checksum (so that nothing is optimised away) and the children or predecessors made."""
    per = (keys.shape[0] + n_threads - 1) // n_threads
    for t in prange(n_threads):
        size = max(rules[MAX_MOVES], rules[MAX_UNMOVES])
        moves = np.empty(size, np.int64)
        made = np.empty(size, np.int64)
        extra = np.empty(size, np.int64)
        check = 0
        count = 0
        for i in range(t * per, min(keys.shape[0], (t + 1) * per)):
            board, hand = decode_key(rules, keys[i])
            if mode == 0:
                check += board ^ hand
                continue
            if mode == 1:
                n = child_keys(rules, board, hand, moves, made, extra)
            elif mode == 2:
                n = gen_unmoves(rules, board, hand, made, extra, True)
            else:
                n = parent_keys(rules, board, hand, made)
            count += n
            if mode == 4:
                sort_prefix(made, n)
                prev = np.int64(0)
                for k in range(n):
                    if made[k] != prev:
                        check += key_hash(made[k], layout)
                        prev = made[k]
            elif n > 0:
                check += made[0] + made[n - 1]
        out[t, 0] = check
        out[t, 1] = count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", help="a tablebase file (its stored positions are the input)")
    parser.add_argument("--positions", type=int, default=None, help="N keys, evenly spaced (default: all)")
    parser.add_argument("--runs", type=int, default=2, help="runs of each pass; the best is printed (default 2)")
    parser.add_argument("--sorted", action="store_true", help="keep the file's key order (default: shuffled)")
    parser.add_argument("--window", type=int, default=0, help="shuffled, then sorted within windows of W keys")
    args = parser.parse_args()
    for name in ("positions", "runs", "window"):
        value = getattr(args, name)
        if value is not None and value < (0 if name == "window" else 1):
            parser.error(f"--{name} must be a positive number, got {value}")
    if args.sorted and args.window:
        parser.error("--sorted and --window exclude each other")

    from dobutsu_tb.encoding.compact import CompactTable
    from dobutsu_tb.tablebase.game.game import game_of
    from dobutsu_tb.tablebase.reader import TablebaseFile
    from dobutsu_tb.tablebase.schema import TablebaseFileError

    try:
        with TablebaseFile(args.path) as f:
            game = game_of(f.metadata.variant)
    except TablebaseFileError as e:
        sys.exit(f"error: {e}")
    with h5py.File(args.path, "r") as f:
        stored = f["keys"]
        n = stored.shape[0]
        if args.positions is not None and args.positions < n:  # evenly spaced: every part of the file
            where = np.linspace(0, n - 1, args.positions).astype(np.int64)
            keys = np.empty(where.shape[0], np.int64)
            for lo in range(0, n, _READ_SLICE):  # (a slice at a time: the 5x3 file's keys are 11.5 GB)
                a, b = np.searchsorted(where, [lo, lo + _READ_SLICE])
                if b > a:
                    keys[a:b] = stored[lo:min(n, lo + _READ_SLICE)][where[a:b] - lo]
        else:
            keys = np.asarray(stored[:], np.int64)
    if not args.sorted:
        np.random.default_rng(0).shuffle(keys)
        if args.window:
            for lo in range(0, keys.shape[0], args.window):
                keys[lo:lo + args.window].sort()
    bits, shift = game.layout["MAX_KEY_BITS"], game.layout["KEY_SHIFT"]
    layout = CompactTable(1000, bits, shift).layout  # the key hash of the build's tables
    kernels = game.jitted(sys.modules[__name__])
    threads = config.THREADS
    out = np.zeros((threads, 2), np.int64)
    kernels.generate(game.rules_array, keys[:1], layout, 0, threads, out)  # compiled (or loaded) before the timing
    print(f"{keys.shape[0]:,} positions of {args.path} ({game.variant.name}, "
          f"{'sorted' if args.sorted else f'sorted in windows of {args.window:,}' if args.window else 'shuffled'}), "
          f"{threads} threads")
    print(f"{'pass':<18}{'seconds':>9}{'ns a position':>15}{'made a position':>17}")
    for mode, name in enumerate(PASSES):
        best = float("inf")
        for _ in range(args.runs):
            start = time.perf_counter()
            kernels.generate(game.rules_array, keys, layout, mode, threads, out)
            best = min(best, time.perf_counter() - start)
        made = out[:, 1].sum() / max(1, keys.shape[0])
        print(f"{name:<18}{best:>9.2f}{best * threads / max(1, keys.shape[0]) * 1e9:>15.0f}"
              f"{'' if mode == 0 else f'{made:.2f}':>17}")


if __name__ == "__main__":
    main()
