#!/usr/bin/env python3
"""Benchmark the enumeration's two hash structures one insertion at a time, count the children
of stored positions, and measure this machine's random memory accesses and fresh memory: where
the enumeration's time goes, and what the build cannot go below (docs/building.md).

Usage::

    python scripts/bench_sets.py [--keys N] [--repeat R]
    python scripts/bench_sets.py --children PATH [--chunks C]
    python scripts/bench_sets.py --host [--mib M]
    python scripts/bench_sets.py --regions [--keys N]

The first form inserts ``R * N`` hashes drawn at random from N random ones (each about R times,
so about ``N * (1 - exp(-R))`` distinct: the "keys added" column) into a
:class:`~dobutsu_tb.encoding.compact.CompactTable` at its load factor and into a
:class:`~dobutsu_tb.encoding.compact_set.CompactSet` at its load factor, on one thread with the
builder's prefetching, and prints nanoseconds an insertion; then the same insertions sorted by
home slot (sequential memory: what is left is the structure's own work). The default sizes are
the standard game's: 150 M terminal positions, three children each.

The second form reads ``C`` random chunks of a tablebase file and prints the children of their
stored positions by class (non-terminal, catch-terminal, try-terminal) per position.

The third form measures what this machine's memory costs, whatever the structure: nanoseconds
of wall time a random 8-byte read, a random read-modify-write and an insertion by linear probing
into a 1 GiB array (2**26 of each, independent), on one thread and on every thread, with no
prefetch and with a prefetch of each access 8 to 128 accesses ahead at each LLVM locality (3:
prefetcht0, into every level, what the builder issued until 2026-12; 2: prefetcht1, into L2; 1:
prefetcht2; 0: prefetchnta), and the best of each; and first the seconds it takes to write once
into each 4 KiB page of ``M`` MiB of memory the process has just allocated (a virtual machine
whose host takes back the memory its guest frees charges for each new page: run it after the
machine has been idle a few seconds, then again at once, to see it). With the builder's counts of
memory accesses these give the build's floor on the machine (docs/building.md, "What the build
cannot go below").

The fourth form measures what grouping a batch's insertions by region gains in a big table
(encoding/routing.py; docs/building.md, "Big tables"): it fills a
:class:`~dobutsu_tb.encoding.compact.CompactTable` made for ``N`` keys (default 1,441,956,293, the
5x3 game's: 2**31 slots, 8 GiB) with two-thirds of them, on every thread, then inserts 2**25
hashes (2 * N / 3 for fewer keys) into a copy of it, on one thread with the builder's
prefetching: half of them there already, half new, in random order (the enumeration's until
2026-12-07), then in batches of 256 K to 4 M grouped as the enumeration groups them
(:func:`~dobutsu_tb.encoding.routing.region_bits` of the table's bytes,
:func:`~dobutsu_tb.encoding.routing.grouped_by_region`), and prints nanoseconds an insertion,
grouping included. It needs about twice the table's bytes.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dobutsu_tb.encoding.atomics import prefetch
from dobutsu_tb.encoding.compact import CompactTable, table_insert
from dobutsu_tb.encoding.compact_layout import L_BUCKET_ENTRIES, L_ENTRY, L_R, home_slot, shard_of
from dobutsu_tb.encoding.compact_set import ENTRY_3, CompactSet, set_add_sized, set_line
from dobutsu_tb.encoding.config import LOAD_FACTOR, SET_LOAD_FACTOR, THREADS
from dobutsu_tb.encoding.jit import njit, prange
from dobutsu_tb.encoding.routing import grouped_by_region, region_bits

#: The standard game's key code bits and shift (the hashes are random codes of that width).
CODE_BITS, SHIFT = 44, 19
#: How many insertions ahead a slot is prefetched (as tablebase/enumeration.py does).
AHEAD = 16


@njit
def _insert_table(slots, layout, hashes):
    new = 0
    for i in range(hashes.shape[0]):
        if i + AHEAD < hashes.shape[0]:
            prefetch(slots, home_slot(hashes[i + AHEAD], layout))
        new += table_insert(slots, layout, hashes[i]) >= 0
    return new


@njit(inline="always")
def _add_all(buf, layout, hashes, nbytes, n_entries):
    new = 0
    for i in range(hashes.shape[0]):
        if i + AHEAD < hashes.shape[0]:
            prefetch(buf, set_line(hashes[i + AHEAD], layout))
        new += set_add_sized(buf, layout, hashes[i], nbytes, n_entries)
    return new


@njit
def _insert_set(buf, layout, hashes):
    if layout[L_ENTRY] == ENTRY_3[0]:  # as the builder does: the body compiled for 3-byte entries
        return _add_all(buf, layout, hashes, ENTRY_3[0], ENTRY_3[1])
    return _add_all(buf, layout, hashes, layout[L_ENTRY], layout[L_BUCKET_ENTRIES])


@njit
def _set_lines(hashes, layout, out):
    for i in range(hashes.shape[0]):
        out[i] = set_line(hashes[i], layout)


def insertions(n: int, repeat: int) -> None:
    rng = np.random.default_rng(0)
    distinct = rng.integers(1, 1 << CODE_BITS, n, dtype=np.int64)
    hashes = distinct[rng.integers(0, n, repeat * n)]
    warm_table = CompactTable(1000, CODE_BITS, SHIFT, LOAD_FACTOR, 1)
    _insert_table(warm_table.slots, warm_table.layout, hashes[:100].copy())
    warm_set = CompactSet(1000, CODE_BITS, SHIFT, SET_LOAD_FACTOR, 1)
    _insert_set(warm_set.buf, warm_set.layout, hashes[:100].copy())

    def run(what, order):
        if what == "table":
            t = CompactTable(n, CODE_BITS, SHIFT, LOAD_FACTOR, 1)
            arrays, size, kernel = (t.slots, t.layout), t.slots.nbytes, _insert_table
        else:
            s = CompactSet(n, CODE_BITS, SHIFT, SET_LOAD_FACTOR, 1)
            arrays, size, kernel = (s.buf, s.layout), s.buf.nbytes, _insert_set
        data = hashes
        if order == "home":
            homes = np.empty(hashes.shape[0], np.int64)
            if what == "table":
                homes[:] = hashes >> int(arrays[1][L_R])
            else:
                _set_lines(hashes, arrays[1], homes)
            data = hashes[np.argsort(homes, kind="stable")]
        start = time.perf_counter()
        new = kernel(*arrays, data)
        ns = (time.perf_counter() - start) / data.shape[0] * 1e9
        print(f"{what:<6}{order:<8}{ns:>8.1f} ns{new:>14,} new{size / 2**20:>10,.0f} MiB")

    print(f"{repeat * n:,} insertions drawn from {n:,} random hashes ({CODE_BITS} bits), one thread")
    print(f"{'':<6}{'order':<8}{'an insertion':>13}{'keys added':>18}{'size':>14}")
    for what in ("table", "set"):
        for order in ("random", "home"):
            run(what, order)


def _access_kernels(pf):
    """The three measured loops with prefetch intrinsic ``pf`` (one of atomics.PREFETCHES), each
    ``(a, idx, ahead, threads)``: thread t takes the t-th share of the indices; ``ahead`` 0 means
    no prefetch. A read sums ``a[idx[i]]``; a read-modify-write adds 1 to it; an insertion probes
    linearly from ``idx[i]`` for an empty slot (0) and writes the index there, as a compact table's
    insertion does (the array starts a fifth full, and the 2**26 insertions take its 2**27 slots to
    about 0.7: :func:`_fill`)."""

    @njit(parallel=True)
    def reads(a, idx, ahead, threads):
        per = -(-idx.shape[0] // threads)
        total = np.zeros(threads, np.int64)
        for t in prange(threads):
            lo, hi = t * per, min(idx.shape[0], (t + 1) * per)
            s = 0
            for i in range(lo, hi):
                if ahead and i + ahead < hi:
                    pf(a, idx[i + ahead])
                s += a[idx[i]]
            total[t] = s
        return total.sum()

    @njit(parallel=True)
    def updates(a, idx, ahead, threads):
        per = -(-idx.shape[0] // threads)
        for t in prange(threads):
            lo, hi = t * per, min(idx.shape[0], (t + 1) * per)
            for i in range(lo, hi):
                if ahead and i + ahead < hi:
                    pf(a, idx[i + ahead])
                a[idx[i]] += 1
        return 0

    @njit(parallel=True)
    def inserts(a, idx, ahead, threads):
        per = -(-idx.shape[0] // threads)
        mask = a.shape[0] - 1
        placed = np.zeros(threads, np.int64)
        for t in prange(threads):
            lo, hi = t * per, min(idx.shape[0], (t + 1) * per)
            n = 0
            for i in range(lo, hi):
                if ahead and i + ahead < hi:
                    pf(a, idx[i + ahead])
                s = idx[i]
                while a[s] != 0 and a[s] != i + 1:
                    s = (s + 1) & mask
                if a[s] == 0:
                    a[s] = i + 1
                    n += 1
            placed[t] = n
        return placed.sum()

    return {"read": reads, "read-modify-write": updates, "insert": inserts}


@njit(parallel=True)
def _fill(a, share):
    """Make about ``share`` of the slots of ``a`` occupied (nonzero), at random, in parallel."""
    n = a.shape[0]
    for i in prange(n):
        x = np.uint64(i) * np.uint64(0x9E3779B97F4A7C15)
        x ^= x >> np.uint64(29)
        a[i] = -1 if (x & np.uint64(0xFFFF)) < np.uint64(int(share * 65536)) else 0


#: The prefetch distances measured (accesses ahead; 0: none).
DISTANCES = (0, 8, 16, 32, 64, 128)


def host(mib: int, sweep: bool = True) -> None:
    import numba

    from dobutsu_tb.encoding.atomics import PREFETCHES

    fresh = np.empty(mib << 20, np.uint8)  # first, before this process frees anything
    start = time.perf_counter()
    fresh[::4096] = 1
    print(f"first write to each page of {mib:,} MiB just allocated: {time.perf_counter() - start:.2f} s")
    del fresh
    a = np.ones(1 << 27, np.int64)
    idx = np.random.default_rng(2).integers(0, a.shape[0], 1 << 26)
    kernels = [_access_kernels(pf) for pf in PREFETCHES]
    print(f"{idx.shape[0]:,} random accesses to a 1 GiB array of int64 (wall ns an access; each thread's share is "
          f"its count times this)")
    print(f"{'access':<18}{'threads':>8}{'locality':>9}" + "".join(f"{'none' if d == 0 else f'{d} ahead':>10}"
                                                                    for d in DISTANCES))
    best = {}
    for name in ("read", "read-modify-write", "insert"):
        for threads in sorted({1, THREADS}):
            numba.set_num_threads(threads)
            for locality in (range(4) if sweep else (3,)):
                kernel = kernels[locality][name]
                row = []
                for ahead in DISTANCES:
                    if ahead == 0 and locality != 3:  # (no prefetch: the same for every locality)
                        row.append(None)
                        continue
                    if name == "insert":
                        _fill(a, 0.2)  # (the insertions take it to about 0.7 full)
                    kernel(a, idx[:1000], ahead, threads)  # compiled first
                    start = time.perf_counter()
                    kernel(a, idx, ahead, threads)
                    ns = (time.perf_counter() - start) / idx.shape[0] * 1e9
                    row.append(ns)
                    key = (name, threads)
                    if key not in best or ns < best[key][0]:
                        best[key] = (ns, locality, ahead)
                print(f"{name:<18}{threads:>8}{locality:>9}" + "".join(f"{'':>10}" if x is None else f"{x:>10.1f}"
                                                                      for x in row))
    print("best of each: " + "; ".join(f"{name} on {threads} thread{'s' if threads > 1 else ''} {ns:.1f} ns "
                                       f"(locality {loc}, {ahead} ahead)"
                                       for (name, threads), (ns, loc, ahead) in best.items()))


@njit(parallel=True)
def _fill_table(slots, layout, hashes, threads):
    """Insert ``hashes``, thread t those of shard t (the table made with ``threads`` shards)."""
    for t in prange(threads):
        for i in range(hashes.shape[0]):
            if shard_of(hashes[i], layout) == t:
                table_insert(slots, layout, hashes[i])


@njit
def _grouped_batches(hashes, batch, shift, out):
    """``hashes`` grouped by region batch by batch, as the enumeration groups a shard's lists."""
    counts = np.zeros((1, 1, 2), np.int64)
    for lo in range(0, hashes.shape[0], batch):
        hi = min(hashes.shape[0], lo + batch)
        counts[0, 0, 0] = hi - lo
        grouped_by_region(hashes[lo:hi].reshape(1, 1, hi - lo), 0, counts, 0, shift, out[lo:hi])


#: The 5x3 game's key code bits and shift (``--regions``' table).
REGIONS_BITS, REGIONS_SHIFT = 47, 13


def regions(n: int) -> None:
    bits, shift = REGIONS_BITS, REGIONS_SHIFT
    rng = np.random.default_rng(0)
    table = CompactTable(n, bits, shift, LOAD_FACTOR, THREADS)
    m = min(1 << 24, max(1, n // 3))  # (the table ends with at most n keys, at its load factor)
    present = np.empty(0, np.int64)
    start = time.perf_counter()
    for lo in range(0, n * 2 // 3, 1 << 26):  # (in slices: the keys of the 5x3 game would take 7.7 GB)
        part = rng.integers(1, 1 << bits, min(1 << 26, n * 2 // 3 - lo), dtype=np.int64)
        _fill_table(table.slots, table.layout, part, THREADS)
        if present.shape[0] < m:
            present = np.concatenate([present, part[:m - present.shape[0]]])
    group = region_bits(table.nbytes)
    print(f"a table of {table.capacity:,} slots ({table.nbytes / 2**30:.1f} GiB), {np.count_nonzero(table.slots):,} "
          f"keys in it, filled in {time.perf_counter() - start:.1f} s; regions of {group} bits "
          f"({table.nbytes / (1 << group) / 2**20:.0f} MiB)")
    hashes = np.concatenate([present, rng.integers(1, 1 << bits, m, dtype=np.int64)])
    del present
    rng.shuffle(hashes)
    work = table.slots.copy()
    out = np.ones_like(hashes)  # (written before it is timed: this host charges for each fresh page)
    _insert_table(work, table.layout, hashes[:100].copy())  # (compiled first; copied over below)
    _grouped_batches(hashes[:1000], 100, bits - group, out[:1000])
    print(f"{hashes.shape[0]:,} insertions, half of them new, one thread: ns an insertion")
    for batch in (0, 1 << 18, 1 << 20, 1 << 22):
        np.copyto(work, table.slots)
        start = time.perf_counter()
        if batch:
            _grouped_batches(hashes, batch, bits - group, out)
        grouped = time.perf_counter() - start
        _insert_table(work, table.layout, out if batch else hashes)
        ns = (time.perf_counter() - start) / hashes.shape[0] * 1e9
        print(f"{'in random order' if not batch else f'grouped in batches of {batch:,}':<32}{ns:>8.1f} ns"
              + (f" (grouping {grouped / hashes.shape[0] * 1e9:.1f})" if batch else ""))


def children(path: str, chunks: int) -> None:
    from dobutsu_tb.tablebase.game.game import game_of
    from dobutsu_tb.tablebase.game.layout import CATCH, NONTERMINAL, TRY
    from dobutsu_tb.tablebase.reader import TablebaseFile

    with TablebaseFile(path) as f:
        game = game_of(f.metadata.variant)
        kernels = game.kernels
        width = game_of(f.metadata.variant).layout["MAX_MOVES"]
        moves, keys, classes = (np.empty(width, np.int64) for _ in range(3))
        totals = np.zeros(3, np.int64)
        positions = 0
        rng = np.random.default_rng(1)
        for c in rng.choice(f.chunk_count(), min(chunks, f.chunk_count()), replace=False):
            for key in f.read_keys(int(c)):
                k = kernels.child_keys(game.rules, *kernels.decode_key(game.rules, int(key)), moves, keys, classes)
                totals += np.bincount(classes[:k], minlength=3)[:3]
                positions += 1
    per = totals / positions
    print(f"{positions:,} stored positions: {per.sum():.2f} children each: {per[NONTERMINAL]:.2f} non-terminal, "
          f"{per[CATCH]:.2f} catch-terminal, {per[TRY]:.2f} try-terminal")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    def positive(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
        return value

    parser.add_argument("--keys", type=positive, default=None,
                        help="distinct hashes (default 150,000,000; with --regions, the table's keys: 1,441,956,293)")
    parser.add_argument("--repeat", type=positive, default=3, help="insertions of each (default 3)")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--children", metavar="PATH", help="count the children of a file's stored positions")
    parser.add_argument("--chunks", type=positive, default=400, help="chunks read with --children (default 400)")
    what.add_argument("--host", action="store_true", help="this machine's random access and fresh memory costs")
    what.add_argument("--regions", action="store_true", help="insertions into a big table, grouped by region or not")
    parser.add_argument("--mib", type=positive, default=None, help="fresh memory written with --host (default 1400)")
    args = parser.parse_args()
    if args.mib is not None and not args.host:
        parser.error("--mib goes with --host")
    if args.host:
        host(args.mib or 1400)
    elif args.regions:
        from dobutsu_tb.encoding.compact import table_nbytes
        from dobutsu_tb.encoding.compact_layout import CompactTableFullError
        from dobutsu_tb.tablebase.memory import available_memory, gib

        keys = args.keys or 1_441_956_293
        try:
            need = 2 * table_nbytes(keys, REGIONS_BITS, LOAD_FACTOR, THREADS) + (1 << 30)  # (table, copy, hashes)
        except CompactTableFullError as exc:
            parser.exit(1, f"error: --regions with {keys:,} keys: {exc}\n")
        have = available_memory()
        if have is not None and need > have:
            parser.exit(1, f"error: --regions with {keys:,} keys needs about {gib(need)} of memory; "
                           f"{gib(have)} is available\n")
        regions(keys)
    elif args.children:
        from dobutsu_tb.tablebase.schema import TablebaseFileError

        try:
            children(args.children, args.chunks)
        except TablebaseFileError as exc:
            parser.exit(1, f"error: {exc}\n")
    else:
        insertions(args.keys or 150_000_000, args.repeat)


if __name__ == "__main__":
    main()
