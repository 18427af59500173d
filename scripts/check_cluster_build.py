"""Check that builds on a Ray cluster give the in-process file: the same keys, values and counts.

Usage::

    python scripts/check_cluster_build.py [--variant NAME] [--start POSITION] [--reference FILE]
                                          [--cluster ADDRESS] [--workers N [N ...]] [--object-store SIZE]

It builds the tablebase in this process (or reads ``--reference``, a file built in-process
before), then on the cluster (default ``local``: a Ray instance of this machine, started and
stopped for each build) with each number of workers, and compares every key and value byte
(read with the reader's chunk checks) and the counts of the metadata. It prints one line per
build (positions, wall seconds, SHA-256 of the keys and of the values) and a verdict; exit code 1
if a build differs. The tests compare small builds the same way (tests/test_cluster.py); this is
the check for the standard game (docs/cluster.md, "Same answer").
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from pathlib import Path

COUNTS = ("reachable", "nonterminal", "catch_terminal", "try_terminal", "no_moves", "wins", "draws", "losses",
          "start_wdl", "start_dtm", "max_dtm")


def digest(path: Path) -> tuple[dict, str, str, str]:
    """The counts, the value dtype and the SHA-256 of the keys and of the values of a file."""
    from dobutsu_tb.tablebase.reader import TablebaseFile

    with TablebaseFile(path) as f:
        keys, values = f.read_all()
        meta = f.metadata
    counts = {k: getattr(meta, k) for k in COUNTS} | {"variant": meta.variant.name, "start": meta.start}
    return counts, str(values.dtype), hashlib.sha256(keys).hexdigest(), hashlib.sha256(values).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", default="dobutsu", help="the game (default: dobutsu)")
    parser.add_argument("--start", default=None, help="start position (default: the variant's start)")
    parser.add_argument("--reference", type=Path, default=None, help="a file built in-process (default: build one)")
    parser.add_argument("--cluster", default="local", help="the Ray cluster (default: local)")
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 3, 4], help="worker counts (default 2 3 4)")
    parser.add_argument("--object-store", default="500M", help="object store of a local Ray instance (default 500M)")
    args = parser.parse_args()

    from dobutsu_tb.tablebase.build import build_tablebase
    from dobutsu_tb.tablebase.cluster import ClusterOptions
    from dobutsu_tb.tablebase.game.variant import get_variant
    from dobutsu_tb.tablebase.memory import parse_size

    variant = get_variant(args.variant)
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        reference = args.reference
        if reference is None:
            reference = Path(tmp) / "in-process.h5"
            t = time.perf_counter()
            build_tablebase(reference, args.start, progress=False, variant=variant)
            print(f"in-process build: {time.perf_counter() - t:.1f} s", flush=True)
        want = digest(reference)
        print(f"reference {reference}: {want[0]['nonterminal']:,} positions, values {want[1]}, "
              f"keys sha256 {want[2][:16]}, values sha256 {want[3][:16]}", flush=True)
        different = 0
        for n in args.workers:
            out = Path(tmp) / f"cluster-{n}.h5"
            options = ClusterOptions(args.cluster, n, object_store_memory=parse_size(args.object_store))
            t = time.perf_counter()
            result = build_tablebase(out, args.start, progress=False, variant=variant, cluster=options)
            wall = time.perf_counter() - t
            got = digest(out)
            same = got == want
            different += not same
            print(f"{n} workers: {got[0]['nonterminal']:,} positions in {wall:.1f} s, values {got[1]}, keys sha256 "
                  f"{got[2][:16]}, values sha256 {got[3][:16]}: {'the same' if same else 'DIFFERENT'}", flush=True)
            print(f"  {result.cluster.describe()}", flush=True)
            if not same:
                print(f"  counts {got[0]}\n  want   {want[0]}", flush=True)
            out.unlink()
    print("every build on the cluster holds the in-process file's keys, values and counts" if not different else
          f"{different} build(s) differ")
    sys.exit(1 if different else 0)


if __name__ == "__main__":
    main()
