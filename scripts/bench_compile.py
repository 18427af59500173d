#!/usr/bin/env python3
"""Measure what compiling costs a user, whole commands timed: the kernels compile once per
version of the program and board shape, never per variant, rule or start (docs/building.md,
"Kernels").

Usage::

    python scripts/bench_compile.py [--cache DIR] [--keep]

In a kernel cache folder of its own (a new temporary one unless ``--cache`` names one), it runs
``dobutsu-tb`` as a user would and prints, for each command, its wall time, whether it compiled
anything (a file written into the kernel cache) and what it printed last:

1. ``build`` of the standard game's lion-and-chick ending with the cache empty: everything the
   standard build needs is compiled (the first line of the child that compiles, then the build);
   then the same build again, warm;
2. ``build`` of ``dobutsu-3x3`` (the 3x3 shape's kernels compiled once);
3. ``build --variant-file`` of a 3x3 variant never seen before (its own name, pieces and start),
   then of the same with another start, then with one rule changed (no try rule), then with a
   kind's steps changed: none of them may compile anything;
4. ``build --variant-file`` of a variant whose start is terminal, and of one whose key does not
   fit 63 bits: refused with one ``error:`` line before anything compiles.

It exits with status 1 if a command that should compile nothing did, or one that should fail did
not.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TINY = """name = "{name}"
title = "A tiny variant of {name}"
files = 3
ranks = 3
start = "{start}"
drops = {drops}
try_rule = {try_rule}

[[pieces]]
letter = "K"
name = "king"
royal = true
steps = ["f", "b", "l", "r", "fl", "fr", "bl", "br"]

[[pieces]]
letter = "P"
name = "pawn"
steps = {pawn_steps}
promotes_to = "Q"

[[pieces]]
letter = "Q"
name = "queen"
steps = ["f", "b", "l", "r", "fl", "fr"]
"""


def _cache_files(cache: Path) -> dict:
    return {p: p.stat().st_mtime_ns for p in cache.rglob("*") if p.is_file()}


def run(label: str, args: list, cache: Path, work: Path, expect_compile: bool | None, expect_ok: bool = True) -> bool:
    """Run ``dobutsu-tb ARGS`` and print a line; returns whether it behaved as expected."""
    before = _cache_files(cache)
    env = {**os.environ, "DOBUTSU_TB_CACHE": str(cache)}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "dobutsu_tb.analysis.cli", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=work, check=False)
    seconds = time.perf_counter() - t0
    after = _cache_files(cache)
    compiled = any(p not in before or before[p] != m for p, m in after.items())
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    ok = (proc.returncode == 0) == expect_ok and (expect_compile is None or compiled == expect_compile)
    print(f"{label:<52}{seconds:>7.1f} s  {'compiled' if compiled else 'nothing compiled':<17} "
          f"{'' if ok else 'UNEXPECTED  '}{last[:110]}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, help="the kernel cache folder (default: a new temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folders")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-compile-"))
    cache = args.cache or work / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    good = True
    try:
        print(f"kernel cache {cache}; files in {work}")
        good &= run("standard shape, cache empty (lion and chick)",
                    ["build", "--start", "S/-l-/-c-/-C-/-L-/-", "--out", "lc.h5", "--force", "-q"], cache, work, None)
        good &= run("the same again, warm",
                    ["build", "--start", "S/-l-/-c-/-C-/-L-/-", "--out", "lc.h5", "--force", "-q"], cache, work,
                    False)
        good &= run("dobutsu-3x3 (the 3x3 shape's kernels once)",
                    ["build", "--variant", "dobutsu-3x3", "--out", "d33.h5", "--force", "-q"], cache, work, None)
        cases = [
            ("a 3x3 variant never seen before", dict(name="mine", start="S/-k-/p-P/-K-/-", drops="true",
                                                     try_rule="true", pawn_steps='["f"]')),
            ("... another start", dict(name="mine", start="S/k--/-pP/--K/-", drops="true", try_rule="true",
                                       pawn_steps='["f"]')),
            ("... no try rule", dict(name="mine", start="S/k--/-pP/--K/-", drops="true", try_rule="false",
                                     pawn_steps='["f"]')),
            ("... pawns that step sideways too", dict(name="mine", start="S/k--/-pP/--K/-", drops="true",
                                                      try_rule="false", pawn_steps='["f", "l", "r"]')),
            ("... no drops", dict(name="mine", start="S/k--/-pP/--K/-", drops="false", try_rule="false",
                                  pawn_steps='["f", "l", "r"]')),
        ]
        for k, (label, fields) in enumerate(cases):
            path = work / f"mine{k}.toml"
            path.write_text(TINY.format(**fields), encoding="utf-8")
            good &= run(label, ["build", "--variant-file", path, "--out", f"mine{k}.h5", "--force", "-q"], cache,
                        work, False)
        terminal = work / "terminal.toml"
        terminal.write_text(TINY.format(name="terminal", start="S/-k-/-K-/---/-", drops="true", try_rule="true",
                                        pawn_steps='["f"]'), encoding="utf-8")
        good &= run("a start that is terminal (refused)", ["build", "--variant-file", terminal, "--out", "t.h5"],
                    cache, work, False, expect_ok=False)
        crowded = work / "crowded.toml"  # 4 x 5 squares, 18 pawns: a key of more than 63 bits
        crowded.write_text(TINY.replace("files = 3", "files = 4").replace("ranks = 3", "ranks = 5").format(
            name="crowded", start="S/kppp/pppp/pp--/PPPP/PPPK/-", drops="true", try_rule="true",
            pawn_steps='["f"]'), encoding="utf-8")
        good &= run("a variant whose key does not fit (refused)", ["build", "--variant-file", crowded, "--out", "c.h5"],
                    cache, work, False, expect_ok=False)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if good else 1)


if __name__ == "__main__":
    main()
