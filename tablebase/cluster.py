"""The build on a Ray cluster, its rounds: ``dobutsu-tb build --cluster ADDRESS --workers N``
(docs/cluster.md). Ray itself, its start-up, its clean-up and its errors, is
:mod:`~dobutsu_tb.tablebase.cluster_ray`'s.

Each worker is a Ray actor (:class:`ShardWorker`) that owns the positions whose canonical key's
hash falls to it (:func:`~dobutsu_tb.encoding.routing.owner_of`): it holds their compact table,
tags, values and counters, its share of the terminal positions and its frontier lists, and runs
the in-process build's kernels on them (tablebase/enumeration.py, tablebase/retrograde.py), which
deal what they generate out by owner instead of by shard: the in-process build is the case of
one owner, and there is one copy of each loop. The driver (:func:`build_on_cluster`, in the process
that runs ``dobutsu-tb build``) only runs the rounds and routes the workers' messages, as Ray
object references: the arrays go from worker to worker through Ray's object store, never through
the driver.

- **Enumeration**, in rounds: each worker expands up to ``batch`` of its fresh positions and
  deals their children's hashes out by owner (non-terminal ones, and terminal ones with their
  class, which their owner counts once each); each owner inserts what it received, and the new
  positions are its fresh ones. A round's end is a barrier; the enumeration ends when no worker
  has a fresh position left. A position's counter (its distinct canonical non-terminal
  children) is known where it is expanded, as in the in-process build.
- **Retrograde analysis**, ply by ply, each ply in rounds of ``frontier`` positions a worker:
  each worker generates the distinct canonical predecessors of its positions decided at the
  ply and deals them out by owner; each owner makes the predecessors of losses wins and
  decrements the counters of the predecessors of wins (a loss at zero), and keeps the positions
  it decided as its frontier of the next ply.
- **Records**: the driver splits the keys into ranges at the quantiles of a sample; for each
  range, every worker sends its sorted records, the driver merges them and writes them with the
  streaming writer (:func:`~dobutsu_tb.tablebase.writer.write_file`), one range in memory at a
  time (the next one is made meanwhile).

The file is the in-process build's, key for key and value for value. Ray is imported only when a
build asks for a cluster (``pip install 'dobutsu-tablebase[cluster]'``).
"""

from __future__ import annotations

import gc
import math
import os
import socket
import sys
import time
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from dobutsu_tb.encoding import config, interrupt
from dobutsu_tb.encoding.compact import CompactTable
from dobutsu_tb.encoding.compact_layout import key_hash, make_layout
from dobutsu_tb.encoding.compact_set import CompactSet
from dobutsu_tb.encoding.routing import group_by_shard, owner_of
from dobutsu_tb.encoding.words import counted
from dobutsu_tb.tablebase import enumeration, retrograde
from dobutsu_tb.tablebase.build import (
    LOG_EVERY,
    _keys_with_value,
    _log,
    check_start_value,
    long_values_of,
    range_bounds,
    records_between,
    sample_codes,
    value_histogram,
)
from dobutsu_tb.tablebase.cluster_ray import (  # noqa: F401 (the options and errors of a build on a cluster: here too)
    LOCAL,
    SERIAL,
    ClusterError,
    ClusterOptions,
    LocalRay,
    RayCluster,
    SerialCluster,
    check_address,
    cluster_threads,
    local_threads,
    usable_cpus,
)
from dobutsu_tb.tablebase.enumeration import (
    CLASS_BITS,
    CLASS_MASK,
    add_terminals_grouped,
    insert_grouped,
    regrow_tags,
    sort_shares,
    thread_counters,
    within_room,
)
from dobutsu_tb.tablebase.game.game import Game, game_of
from dobutsu_tb.tablebase.game.layout import CATCH, TRY
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.game.variant import variant_from_json
from dobutsu_tb.tablebase.memory import peak_resident_memory
from dobutsu_tb.tablebase.retrograde import Solution, apply_predecessors, seed_cells, slot_dtype, value_code
from dobutsu_tb.tablebase.schema import Metadata, value_counts
from dobutsu_tb.tablebase.values import LONG
from dobutsu_tb.tablebase.writer import RECORD_VALUE_BITS, WIDE_VALUE_BITS, LongValues, RecordBlocks, write_file

#: Codes each worker samples to split the records into key ranges.
SAMPLE = 1 << 16
#: The phases whose messages are counted (bytes a worker sends to the others, or to the driver).
PHASES = ("enumeration", "retrograde", "records")


@dataclass
class ClusterReport:
    """What a build on a cluster did.

    Attributes
    ----------
    address : str
        The cluster (``local`` or the address given).
    workers : list of dict
        Per worker: ``host``, ``pid``, ``threads``, ``positions`` (non-terminal ones it owns),
        ``capacity`` (slots of its table), ``peak_rss`` (bytes, the process's peak resident
        memory) and ``sent`` (bytes it sent to the other workers, or to the driver, by phase).
    rounds : dict of str to int
        Rounds of the enumeration and of the retrograde analysis (its plies' rounds added up).
    """

    address: str
    workers: list = field(default_factory=list)
    rounds: dict = field(default_factory=dict)

    @property
    def sent(self) -> dict:
        """Bytes sent by phase, all workers together."""
        return {p: sum(w["sent"][p] for w in self.workers) for p in PHASES}

    def describe(self) -> str:
        """One line for people."""
        mib = {p: f"{b / 2**20:,.1f} MiB" for p, b in self.sent.items()}
        peaks = ", ".join(f"{w['peak_rss'] / 2**30:.2f}" for w in self.workers)
        return (f"cluster {self.address}: {len(self.workers)} workers; sent between workers: enumeration "
                f"{mib['enumeration']}, retrograde {mib['retrograde']}; records to the driver {mib['records']}; "
                f"peak memory of each worker (GiB): {peaks}")


def _peak_rss() -> int:
    """This process's peak resident memory in bytes (:func:`~dobutsu_tb.tablebase.memory.peak_resident_memory`)."""
    return peak_resident_memory()


def _joined(arrays, dtype) -> np.ndarray:
    return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.zeros(0, dtype)


def _by_shard(values: np.ndarray, drop: int, layout: np.ndarray, shards: int) -> tuple[np.ndarray, np.ndarray]:
    """``values`` grouped by the shard of ``values >> drop`` and where each shard's start
    (:func:`~dobutsu_tb.encoding.routing.group_by_shard`; as they are for one shard)."""
    starts = np.zeros(shards + 1, np.int64)
    if shards == 1:
        starts[1] = values.shape[0]
        return values, starts
    grouped = np.empty_like(values)
    group_by_shard(values, drop, layout, shards, grouped, starts)
    return grouped, starts


class ShardWorker:
    """One worker of a build on a cluster, run as a Ray actor: the positions it owns, their table,
    tags, values and counters, its share of the terminal positions, its fresh and frontier lists
    (module docstring). The methods are the steps the driver calls; each returns small statistics,
    or the messages for the other workers (one entry per worker, ``None`` for itself: its own
    share stays here).

    Parameters
    ----------
    variant_json : str
        The variant (``Variant.to_json``).
    index, n_workers : int
        This worker's number and the number of workers.
    threads : int
        numba threads it uses (and shards of its table).
    expected : (int, int) or None
        Non-terminal and terminal positions of the whole build, if known (to size its tables).
    """

    def __init__(self, variant_json: str, index: int, n_workers: int, threads: int, expected):
        import numba

        self.game = game_of(variant_from_json(variant_json))
        self.kernels = self.game.jitted(enumeration, retrograde)
        self.index, self.n = int(index), int(n_workers)
        self.threads = max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS))
        layout = self.game.layout
        self.bits, self.shift = layout["MAX_KEY_BITS"], layout["KEY_SHIFT"]
        n_nt, n_t = expected or (config.DEFAULT_EXPECTED * self.n, config.DEFAULT_EXPECTED * self.n)
        self.table = CompactTable(max(1, n_nt // self.n), self.bits, self.shift, config.LOAD_FACTOR, self.threads)
        self.tags = np.zeros(self.table.capacity, np.uint8)
        self.terminal = CompactSet(max(1, n_t // self.n), self.bits, self.shift, config.SET_LOAD_FACTOR, self.threads)
        self.by_class = np.zeros((self.table.n_shards, CLASS_MASK + 1), np.int64)
        self.fresh: list = []  # slots not yet expanded, in arrays
        self.expanded = self.no_moves = 0
        self.own = None  # this worker's share of its last messages
        self.sent = dict.fromkeys(PHASES, 0)
        self._buffers: dict = {}
        self.solution = None

    def _threaded(self) -> None:
        import numba

        numba.set_num_threads(self.threads)  # per calling thread: set before each step

    def _buffer(self, name: str, shape: tuple, dtype=np.int64) -> np.ndarray:
        """A scratch array of at least ``shape`` (kept between calls; pages never written cost no memory)."""
        buf = self._buffers.get(name)
        if buf is None or buf.shape[:-1] != shape[:-1] or buf.shape[-1] < shape[-1]:
            buf = self._buffers[name] = np.empty(shape, dtype)
        return buf

    def ready(self) -> dict:
        """Where this worker runs: ``host``, ``pid``, ``threads``."""
        return {"host": socket.gethostname(), "pid": os.getpid(), "threads": self.threads}

    # --- enumeration ---------------------------------------------------------------------------

    def add_start(self, key: int) -> None:
        """Insert the start position (which this worker owns) as fresh."""
        self._insert_nonterminal(np.array([key_hash(np.int64(key), self.table.layout)], np.int64))

    def _take_fresh(self, n: int) -> np.ndarray:
        taken, count = [], 0
        while self.fresh and count < n:
            head = self.fresh[-1]
            k = min(n - count, head.shape[0])
            taken.append(head[head.shape[0] - k:])
            if k == head.shape[0]:
                self.fresh.pop()
            else:
                self.fresh[-1] = head[: head.shape[0] - k]
            count += k
        return _joined(taken, np.int64)

    def _deal(self, lists: np.ndarray, counts: np.ndarray) -> list:
        """Per owner, the concatenation of every thread's list for it."""
        return [_joined([lists[t, o, :counts[t, o]] for t in range(lists.shape[0])], np.int64) for o in range(self.n)]

    def _messages(self, parts: list, phase: str):
        """Keep this worker's own part; return the others' (one entry per worker), counted as sent."""
        self.own = parts[self.index]
        out = [None if o == self.index else part for o, part in enumerate(parts)]
        self.sent[phase] += sum(sum(a.nbytes for a in p) for p in out if p is not None)
        return out if self.n > 1 else out[0]

    def expand(self, batch: int):
        """Expand up to ``batch`` fresh positions; returns, for each worker, the pair (hashes of
        non-terminal children, terminal children with their class) it owns."""
        self._threaded()
        take = self._take_fresh(batch)
        t, n_moves = self.threads, self.game.layout["MAX_MOVES"]
        per_thread = max(1, -(-take.shape[0] // t)) * n_moves
        nt = self._buffer("nt", (t, self.n, per_thread))
        term = self._buffer("term", (t, self.n, per_thread))
        counts = thread_counters(t, self.n)
        if take.shape[0]:  # (the children dealt out by owner: self.n workers; all terminal ones counted)
            self.no_moves += self.kernels._expand(self.game.rules_array, self.table.slots, self.table.layout, take,
                                                  self.tags, self.n, nt, term, counts, 0)
        self.expanded += take.shape[0]
        parts = list(zip(self._deal(nt, counts[:, :, 0]), self._deal(term, counts[:, :, 1])))
        return self._messages(parts, "enumeration")

    def _grow_table(self, expected: int) -> None:
        remap = self.table.grow(expected)
        self.tags = regrow_tags(self.tags, remap, self.table.capacity)
        self.fresh = [remap[a].astype(slot_dtype(self.table.capacity)) for a in self.fresh]

    def _insert_nonterminal(self, hashes: np.ndarray) -> None:
        for part in within_room(hashes, self.table, self._grow_table):
            while True:
                shards = self.table.n_shards
                grouped, starts = _by_shard(part, 0, self.table.layout, shards)
                fresh, fresh_n = np.empty(part.shape[0], np.int64), np.zeros(shards, np.int64)
                failed = insert_grouped(self.table.slots, self.table.layout, self.table.counts, self.tags, grouped,
                                        starts, fresh, fresh_n)
                new = [fresh[starts[s]: starts[s] + fresh_n[s]] for s in range(shards) if fresh_n[s]]
                if new:  # as uint32 when the table allows: fresh lists can hold many positions
                    self.fresh.append(_joined(new, slot_dtype(self.table.capacity)))
                if failed == 0:
                    break
                self._grow_table(2 * len(self.table))  # a displacement did not fit: insert again (idempotent)

    def _insert_terminal(self, items: np.ndarray) -> None:
        for part in within_room(items, self.terminal, self.terminal.grow):
            while True:
                grouped, starts = _by_shard(part, CLASS_BITS, self.terminal.layout, self.terminal.n_shards)
                if add_terminals_grouped(self.terminal.buf, self.terminal.layout, self.terminal.counts, grouped,
                                         starts, self.by_class) == 0:
                    break
                self.terminal.grow(2 * len(self.terminal))

    def insert(self, *parts) -> dict:
        """Insert the children the other workers sent (their pairs, in any order) and this
        worker's own; returns ``expanded``, ``positions`` (non-terminal ones held), ``fresh``."""
        self._threaded()
        pairs = [self.own] + list(parts)
        self.own = None
        self._insert_nonterminal(_joined([p[0] for p in pairs], np.int64))
        self._insert_terminal(_joined([p[1] for p in pairs], np.int64))
        return {"expanded": self.expanded, "positions": len(self.table),
                "fresh": sum(a.shape[0] for a in self.fresh)}

    # --- retrograde analysis -------------------------------------------------------------------

    def seed(self) -> dict:
        """Start the analysis from the tags (as ``retrograde.seed_values``); returns the counts:
        ``no_moves``, ``catch_terminal``, ``try_terminal``, ``positions``."""
        self._threaded()
        self._buffers.clear()
        self.cells = np.zeros(self.table.capacity, np.uint16)
        values, counters = self.cells.view(np.uint8)[0::2], self.cells.view(np.uint8)[1::2]
        seed_cells(self.table.slots, self.tags, values, counters, 4 * self.threads)
        self.tags = None
        self.terminal = None  # counted: the set goes
        gc.collect()  # and with it any frame of a first compile's reference cycle that held it (build._free_cycles)
        self.dtype = slot_dtype(self.table.capacity)
        occupied = self.table.slots != 0
        self.seeds = {dtm: np.flatnonzero(occupied & (values == dtm + 1)).astype(self.dtype) for dtm in (0, 1, 2)}
        self.decided, self.long_parts, self.long_dtm = [], [], []
        totals = self.by_class.sum(axis=0)
        return {"no_moves": self.no_moves, "catch_terminal": int(totals[CATCH]), "try_terminal": int(totals[TRY]),
                "positions": len(self.table)}

    def begin(self, ply: int) -> int:
        """Make the seeds of DTM ``ply`` the frontier; returns its length."""
        self.frontier = self.seeds.pop(ply)
        return int(self.frontier.shape[0])

    def predecessors(self, part: int, size: int):
        """The distinct canonical predecessors of the frontier's ``part``-th slice of ``size``
        positions, as hashes, one array for each worker."""
        self._threaded()
        slice_ = self.frontier[part * size: (part + 1) * size]
        t = self.threads
        per_thread = max(1, -(-slice_.shape[0] // t)) * self.game.layout["MAX_UNMOVES"]
        out = self._buffer("preds", (t, self.n, per_thread))
        counts = thread_counters(t, self.n)
        if slice_.shape[0]:  # (in key order, as the in-process analysis: retrograde.frontier_keys)
            keys = self.table.keys_at(slice_)
            sort_shares(keys, t)
            self.kernels._predecessors(self.game.rules_array, self.table.slots, self.table.layout, keys, self.n, out,
                                       counts)
        return self._messages([(a,) for a in self._deal(out, counts[:, :, 0])], "retrograde")

    def apply(self, ply: int, *parts) -> int:
        """Decide the predecessors that the workers sent (and this worker's own) of positions of
        DTM ``ply``; returns how many it decided."""
        self._threaded()
        hashes = _joined([p[0] for p in [self.own] + list(parts)], np.int64)
        self.own = None
        values, counters = self.cells.view(np.uint8)[0::2], self.cells.view(np.uint8)[1::2]
        out, out_n = np.empty(hashes.shape[0], self.dtype), np.zeros(self.threads, np.int64)
        apply_predecessors(self.table.slots, self.table.layout, values, counters, hashes, ply % 2 == 0,
                              value_code(ply + 1), self.threads, out, out_n)
        per = -(-hashes.shape[0] // self.threads)
        decided = [out[t * per: t * per + out_n[t]] for t in range(self.threads) if out_n[t]]
        self.decided += [np.concatenate(decided)] if decided else []
        return int(out_n.sum())

    def end(self, ply: int) -> tuple[int, int]:
        """End the ply: the positions decided at DTM ``ply + 1`` (and the seeds of that DTM) are the
        next frontier; returns (positions decided, length of the next frontier)."""
        decided = _joined(self.decided, self.dtype)
        self.decided = []
        if decided.shape[0] and value_code(ply + 1) == LONG:
            self.long_parts.append(decided)
            self.long_dtm.append(np.full(decided.shape[0], ply + 1, np.int64))
        seeds = self.seeds.pop(ply + 1, None)
        self.frontier = _joined([seeds, decided], self.dtype) if seeds is not None else decided
        return int(decided.shape[0]), int(self.frontier.shape[0])

    # --- records ---------------------------------------------------------------------------------

    def finish(self) -> bool:
        """End the analysis: keep the value bytes alone; returns whether some DTM is too long for a
        byte (the file then stores two bytes a value)."""
        self.frontier = self.seeds = None
        slots = _joined(self.long_parts, self.dtype)
        dtms = _joined(self.long_dtm, np.int64)
        order = np.argsort(slots, kind="stable")
        values = retrograde.contiguous_values(retrograde.value_bytes(self.cells))
        self.cells = None
        gc.collect()  # (as in seed)
        self.solution = Solution(values, slots[order], dtms[order], 0.0)
        return bool(slots.shape[0])

    def histogram(self, value_bits: int) -> np.ndarray:
        """Positions per value code (:func:`~dobutsu_tb.tablebase.build.value_histogram`)."""
        self._threaded()
        return value_histogram(self.table, self.solution, value_bits)

    def no_move_keys(self, count: int) -> np.ndarray:
        """The keys of its ``count`` positions without a move (losses in 0: value byte 1), unsorted."""
        keys = np.zeros(count, np.int64)
        if count and _keys_with_value(self.table.slots, self.table.layout, self.solution.values, 1, keys) != count:
            raise AssertionError("the positions without a move are not the losses in 0")
        return keys

    def value_of(self, key: int) -> tuple[int, int]:
        """(WDL, DTM) of a position this worker owns."""
        return self.solution.dtm_of(int(self.table.lookup([key])[0]))

    def sample(self, m: int) -> np.ndarray:
        """At most ``m`` codes of its positions, sorted (to split the records into ranges)."""
        return sample_codes(self.table, self.shift, m)

    def records(self, lo: int, hi: int) -> np.ndarray:
        """The sorted records of its positions whose code lies in ``[lo, hi)``."""
        self._threaded()
        out = records_between(self.table, self.solution, self.shift, lo, hi)
        self.sent["records"] += out.nbytes
        return out

    def long_values(self) -> tuple[np.ndarray, np.ndarray]:
        """The codes and values of its positions whose value takes two bytes
        (:func:`~dobutsu_tb.tablebase.build.long_values_of`), ascending by code."""
        longs = long_values_of(self.table, self.solution, self.shift)
        self.sent["records"] += longs.codes.nbytes + longs.values.nbytes
        return longs.codes, longs.values

    def report(self) -> dict:
        """``host``, ``pid``, ``threads``, ``positions``, ``capacity`` (slots of its table),
        ``peak_rss`` (bytes), ``sent`` (bytes by phase)."""
        return dict(self.ready(), positions=len(self.table), capacity=self.table.capacity, peak_rss=_peak_rss(),
                    sent=dict(self.sent))


def build_on_cluster(tmp, game: Game, start: Position, expected, progress, phase, options: ClusterOptions,
                     out=None) -> tuple[Metadata, ClusterReport, np.ndarray]:
    """The phases of a build on a cluster, writing into ``tmp`` (module docstring); called by
    :func:`~dobutsu_tb.tablebase.build.build_tablebase`, which holds the output.

    Parameters
    ----------
    tmp : Path
        The temporary file to write.
    game : Game
    start : Position
    expected : (int, int) or None
        Non-terminal and terminal positions, if known.
    progress : bool or None
        As for ``build_tablebase``.
    phase : callable
        Called with each phase's name as it starts: ``"start"`` (connecting to Ray, starting the
        workers), those of the in-process build, then ``"stop"`` as the workers end.
    options : ClusterOptions
    out : Path, optional
        The file the user asked for, for the error messages.

    Returns
    -------
    (Metadata, ClusterReport, numpy.ndarray)
        The metadata written, what the cluster did, and the keys of the positions without a
        move (``BuildResult.no_move_keys``).

    Raises
    ------
    ClusterError
        Ray is missing, the cluster cannot be reached or is too small, a worker failed or died.
    dobutsu_tb.encoding.interrupt.Interrupted
        After SIGINT or SIGTERM (checked between rounds).
    """
    try:
        phase("start")  # connecting to Ray (or starting a local instance) and starting the workers
        with (SerialCluster if options.address == SERIAL else RayCluster)(options, game, expected, out,
                                                                          ShardWorker) as cluster:
            meta, report, no_move_keys = _run(cluster, tmp, game, start, expected, progress, phase, options)
            phase("stop")  # the workers end (and a local Ray instance stops) as the block is left
        return meta, report, no_move_keys
    except ClusterError as exc:
        raise ClusterError(f"{exc}; the build stopped{f', {out} was not written' if out else ''}") from None


def _run(cluster: RayCluster, tmp, game: Game, start: Position, expected, progress, phase,
         options: ClusterOptions) -> tuple[Metadata, ClusterReport, np.ndarray]:
    quiet = progress is False
    disable = None if progress is None else not progress
    n = len(cluster.workers)
    layout = make_layout(game.layout["MAX_KEY_BITS"], game.layout["KEY_SHIFT"], game.layout["MAX_KEY_BITS"], 1)
    start_key = game.key_of(start.state())
    home = int(owner_of(key_hash(np.int64(start_key), layout), n))
    rounds = {"enumeration": 0, "retrograde": 0}

    phase("enumeration")
    t0 = time.perf_counter()
    cluster.get(cluster.call(home, "add_start", start_key))
    with tqdm(total=expected[0] if expected else None, desc="enumerate", unit=" pos", unit_scale=True,
              disable=disable, file=sys.stderr) as bar:
        logged = time.perf_counter()
        while True:
            interrupt.check()
            messages = cluster.calls("expand", options.batch, messages=True)
            stats = cluster.get(cluster.route("insert", messages))
            del messages  # the workers hold what they still need
            rounds["enumeration"] += 1
            expanded, found = sum(s["expanded"] for s in stats), sum(s["positions"] for s in stats)
            bar.update(expanded - bar.n)
            if not expected:
                bar.total = found
            if bar.disable and not quiet and time.perf_counter() - logged > LOG_EVERY:
                logged = time.perf_counter()
                _log(f"enumeration: {counted(expanded, 'position')} expanded, {found:,} non-terminal ones found")
            if sum(s["fresh"] for s in stats) == 0:
                break
    seeded = cluster.get(cluster.calls("seed"))
    counts = {"nonterminal": sum(s["positions"] for s in seeded),
              "catch_terminal": sum(s["catch_terminal"] for s in seeded),
              "try_terminal": sum(s["try_terminal"] for s in seeded),
              "no_moves": sum(s["no_moves"] for s in seeded)}
    counts["reachable"] = counts["nonterminal"] + counts["catch_terminal"] + counts["try_terminal"]
    seconds = {"enumeration": time.perf_counter() - t0}
    if not quiet:
        _log(f"enumerated {counts['reachable']:,} positions ({counts['nonterminal']:,} non-terminal) in "
             f"{seconds['enumeration']:.1f} s on {n} workers ({rounds['enumeration']} rounds)")

    phase("retrograde")
    t0 = time.perf_counter()
    ply = 0 if counts["no_moves"] else 1  # DTM 0 is stored only for positions without moves
    highest = 2
    sizes = cluster.get(cluster.calls("begin", ply))
    with tqdm(total=counts["nonterminal"], desc="retrograde", unit=" pos", unit_scale=True,
              disable=disable, file=sys.stderr) as bar:
        while ply <= highest:
            interrupt.check()
            t = time.perf_counter()
            applied = []
            for part in range(math.ceil(max(sizes) / options.frontier)):
                messages = cluster.calls("predecessors", part, options.frontier, messages=True)
                applied += cluster.route("apply", messages, ply)
                del messages
                rounds["retrograde"] += 1
            cluster.get(applied)
            ended = cluster.get(cluster.calls("end", ply))
            decided = sum(e[0] for e in ended)
            if decided:
                highest = max(highest, ply + 1)
            bar.update(sum(sizes))
            if not quiet:
                noun = "positions" if sum(sizes) != 1 else "position "
                _log(f"ply {ply:3d}: {sum(sizes):>11,} {noun} -> {decided:>11,} decided at "
                     f"ply {ply + 1} ({time.perf_counter() - t:.2f} s)")
            sizes = [e[1] for e in ended]
            ply += 1
    seconds["retrograde"] = time.perf_counter() - t0

    phase("sort")
    interrupt.check()
    t0 = time.perf_counter()
    value_bits = WIDE_VALUE_BITS if any(cluster.get(cluster.calls("finish"))) else RECORD_VALUE_BITS
    longs = None
    if value_bits == WIDE_VALUE_BITS:  # each worker's, merged (few: the DTMs of 254 plies or more)
        parts = cluster.get(cluster.calls("long_values"))
        longs = LongValues.of(_joined([c for c, _ in parts], np.int64), _joined([v for _, v in parts], np.uint16))
    found = value_counts(sum(cluster.get(cluster.calls("histogram", value_bits))))
    start_wdl, start_dtm = cluster.get(cluster.call(home, "value_of", start_key))
    no_move_keys = np.sort(_joined(cluster.get([cluster.call(i, "no_move_keys", s["no_moves"])
                                                for i, s in enumerate(seeded)]), np.int64))
    sample = np.sort(np.concatenate(cluster.get(cluster.calls("sample", SAMPLE))))
    bounds = range_bounds(sample, math.ceil(counts["nonterminal"] / config.CLUSTER_RANGE_RECORDS))
    ranges = list(zip(bounds[:-1], bounds[1:]))
    meta = Metadata(start=start.text(), variant=game.variant, wins=found["wins"], draws=found["draws"],
                    losses=found["losses"], start_wdl=start_wdl, start_dtm=start_dtm, max_dtm=found["max_dtm"],
                    seconds=seconds, **counts)
    seconds["sort"] = time.perf_counter() - t0

    def blocks():
        upcoming = cluster.calls("records", *ranges[0])
        for i in range(len(ranges)):  # the next range is made while this one is written
            interrupt.check()
            pending = upcoming
            upcoming = cluster.calls("records", *ranges[i + 1]) if i + 1 < len(ranges) else None
            block = np.concatenate(cluster.get(pending))
            del pending  # the workers' parts leave the object store
            block.sort(kind="stable")  # sorted runs, one per worker: a merge
            yield block
            del block

    phase("write")
    t0 = time.perf_counter()
    with tqdm(total=2 * counts["nonterminal"], desc="write", unit=" entries", unit_scale=True,
              disable=disable, file=sys.stderr) as bar:
        write_file(tmp, RecordBlocks(counts["nonterminal"], blocks, longs), meta, progress=bar.update)
    seconds["write"] = time.perf_counter() - t0
    report = ClusterReport(cluster.address, cluster.get(cluster.calls("report")), rounds)
    phase("check")
    check_start_value(tmp, start, start_wdl, start_dtm)
    return meta, report, no_move_keys


__all__ = ["ClusterError", "ClusterOptions", "ClusterReport", "LocalRay", "ShardWorker", "build_on_cluster",
           "check_address", "cluster_threads", "local_threads", "usable_cpus", "LOCAL", "SERIAL"]
