"""The build on a Ray cluster: ``dobutsu-tb build --cluster ADDRESS --workers N`` (docs/cluster.md).

Each worker is a Ray actor (:class:`ShardWorker`) that owns the positions whose canonical key's
hash falls to it (:func:`~dobutsu_tb.encoding.routing.owner_of`): it holds their compact
table, tags, values and counters, its share of the terminal positions and its frontier lists,
and runs the in-process build's kernels on them (tablebase/enumeration.py, tablebase/retrograde.py),
which deal what they generate out by owner instead of by shard. The driver (:func:`build_on_cluster`, in the process
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

The file is the in-process build's, key for key and value for value. Ray is imported only here,
when a build asks for a cluster (``pip install 'dobutsu-tablebase[cluster]'``).
"""

from __future__ import annotations

import gc
import importlib.util
import math
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from dobutsu_tb.encoding import config, interrupt
from dobutsu_tb.encoding.compact import CompactTable
from dobutsu_tb.encoding.compact_layout import CompactTableFullError, key_hash, make_layout
from dobutsu_tb.encoding.compact_set import CompactSet
from dobutsu_tb.encoding.routing import group_by_shard, owner_of
from dobutsu_tb.encoding.words import counted
from dobutsu_tb.tablebase import enumeration, retrograde
from dobutsu_tb.tablebase.build import (
    LOG_EVERY,
    _keys_with_value,
    _log,
    check_start_value,
    range_bounds,
    records_between,
    sample_codes,
    value_histogram,
)
from dobutsu_tb.tablebase.enumeration import (
    CLASS_BITS,
    CLASS_MASK,
    add_terminals_grouped,
    insert_grouped,
    sort_shares,
    thread_counters,
)
from dobutsu_tb.tablebase.game.game import Game, game_of
from dobutsu_tb.tablebase.game.layout import CATCH, TRY
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.game.variant import variant_from_json
from dobutsu_tb.tablebase.memory import InsufficientMemoryError, peak_resident_memory
from dobutsu_tb.tablebase.retrograde import Solution, apply_predecessors, seed_cells, slot_dtype, value_code
from dobutsu_tb.tablebase.schema import Metadata, value_counts
from dobutsu_tb.tablebase.values import LONG
from dobutsu_tb.tablebase.writer import RECORD_VALUE_BITS, WIDE_VALUE_BITS, RecordBlocks, write_file

#: ``--cluster local``: a Ray instance of this machine's own, started for the build and stopped after it.
LOCAL = "local"
#: ``--cluster serial``: no Ray; the workers are objects of this process, run one after another
#: (the same rounds and messages: for the tests).
SERIAL = "serial"
#: Seconds the workers may take to start (a remote node imports numpy, numba and this package).
STARTUP_SECONDS = 300.0
#: Codes each worker samples to split the records into key ranges.
SAMPLE = 1 << 16
#: The phases whose messages are counted (bytes a worker sends to the others, or to the driver).
PHASES = ("enumeration", "retrograde", "records")
#: ``--cluster local``: the workers' threads together may be at most this many times the CPUs this
#: process may run on (:func:`usable_cpus`), and one worker's at most the CPUs: so 4 workers of one
#: thread run on 2 CPUs (slower, as a check of the rounds), 64 are refused (each worker is a process
#: of its own, a third of a GiB before its tables, and they would only take turns).
LOCAL_OVERCOMMIT = 2
#: The longest folder a local Ray instance's files may go in: Ray puts its unix sockets at
#: ``FOLDER/session_<date>_<time>_<microseconds>_<pid>/sockets/plasma_store`` (64 bytes after
#: ``FOLDER``), and a socket's path has at most 107 bytes on Linux, 103 on macOS.
RAY_FOLDER_LENGTH = 39
#: Ray Client's port when a ``ray://HOST`` address names none.
RAY_CLIENT_PORT = 10001


class ClusterError(Exception):
    """Raised when a build on a cluster cannot go on: Ray is not installed, the cluster cannot be
    reached or has too few CPUs, or a worker failed or died. Nothing is written then."""


@dataclass(frozen=True)
class ClusterOptions:
    """Where and how a build runs on a cluster (``build --cluster ADDRESS --workers N``).

    Attributes
    ----------
    address : str
        :data:`LOCAL` (a Ray instance started on this machine for the build), or the address of
        a running Ray cluster as ``ray.init(address=...)`` takes it (``HOST:6379``, ``auto``,
        ``ray://HOST:10001``). A process already connected to Ray (``ray.init`` called before)
        uses that connection whatever this says. :data:`SERIAL` runs the workers in this process
        without Ray (for the tests).
    workers : int
        Ray actors that share the positions (1 or more).
    worker_threads : int, optional
        numba threads of each worker (and the CPUs it reserves): default, the cluster's CPUs
        shared among the workers (at least 1).
    object_store_memory : int, optional
        Bytes of the object store of a local Ray instance (default
        :data:`~dobutsu_tb.encoding.config.CLUSTER_OBJECT_STORE`).
    batch, frontier : int
        Positions each worker expands per enumeration round, and unmoves per retrograde round.
    """

    address: str = LOCAL
    workers: int = 2
    worker_threads: int | None = None
    object_store_memory: int | None = None
    batch: int = config.CLUSTER_BATCH
    frontier: int = config.CLUSTER_FRONTIER

    def __post_init__(self):
        check_address(self.address)
        if not 1 <= self.workers <= 4096:
            raise ValueError(f"workers must be from 1 to 4096, got {self.workers}")
        if self.worker_threads is not None and not 1 <= self.worker_threads <= config.MAX_THREADS:
            raise ValueError(f"worker threads must be from 1 to {config.MAX_THREADS}, got {self.worker_threads}")
        if self.batch < 1 or self.frontier < 1:
            raise ValueError("batch and frontier must be positive")


def check_address(address: str) -> None:
    """Check the form of a cluster's address (not whether anything answers there).

    Parameters
    ----------
    address : str
        :data:`LOCAL`, :data:`SERIAL`, ``auto`` (the cluster this machine is a node of),
        ``HOST:PORT`` (a head's GCS port, 6379 by default) or ``ray://HOST[:PORT]`` (Ray Client,
        :data:`RAY_CLIENT_PORT` by default); ``HOST`` may be an IPv6 address in brackets.

    Raises
    ------
    ValueError
        For anything else, with a line that says what an address looks like.
    """
    if address in (LOCAL, SERIAL, "auto"):
        return
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if address.startswith("ray://") and not sep and rest:
        host, port = rest, str(RAY_CLIENT_PORT)
    if (host.strip("[]") and port.isascii() and port.isdigit() and 1 <= int(port) <= 65535
            and not re.search(r"[\s/@?#]", host)):
        return
    hint = (" (an http:// address is the dashboard's or the job server's; the build connects to the head's GCS "
            "port, 6379 by default)") if address.startswith(("http://", "https://")) else ""
    raise ValueError(f"{address[:60]!r} is not a Ray address: give local, auto, HOST:PORT or ray://HOST:PORT{hint}")


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity mask (``os.sched_getaffinity``; a container's
    or ``taskset``'s limit), else ``os.cpu_count()``."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def local_threads(workers: int, worker_threads: int | None = None, cpus: int | None = None) -> int:
    """The threads of each worker of a ``--cluster local`` build, once this machine is found big
    enough for them (:data:`LOCAL_OVERCOMMIT`).

    Parameters
    ----------
    workers : int
    worker_threads : int, optional
        As asked (default: the CPUs shared among the workers, at least 1 each).
    cpus : int, optional
        The machine's CPUs (default :func:`usable_cpus`).

    Returns
    -------
    int

    Raises
    ------
    ClusterError
        When a worker has more threads than the machine has CPUs, or the workers' threads together
        are more than :data:`LOCAL_OVERCOMMIT` times the CPUs.
    """
    cpus = usable_cpus() if cpus is None else cpus
    threads = worker_threads or max(1, cpus // workers)
    most = LOCAL_OVERCOMMIT * cpus
    if threads > cpus:
        raise ClusterError(f"--cluster local: a worker of {threads} threads, and this machine has {cpus} CPU(s); "
                           f"ask for --worker-threads {cpus} or fewer")
    if workers * threads > most:
        raise ClusterError(f"--cluster local: {workers} workers of {threads} thread(s) are {workers * threads} "
                           f"threads, and this machine runs at most {most} ({LOCAL_OVERCOMMIT} for each of its "
                           f"{cpus} CPU(s)); ask for fewer workers or --worker-threads")
    return threads


def cluster_threads(node_cpus: list, workers: int, worker_threads: int | None = None) -> int:
    """The threads of each worker on a Ray cluster whose nodes have ``node_cpus``, once the cluster
    is found able to host the workers: a worker's threads are CPUs of one node, so a node of ``c``
    CPUs hosts ``c // threads`` workers.

    Parameters
    ----------
    node_cpus : list of int
        Each live node's CPUs (as Ray counts them).
    workers : int
    worker_threads : int, optional
        As asked (default: the most with which every worker finds room, at least 1).

    Returns
    -------
    int

    Raises
    ------
    ClusterError
        When the nodes cannot host ``workers`` workers of that many threads.
    """
    def hosted(t: int) -> int:
        return sum(c // t for c in node_cpus)

    threads = worker_threads or next((t for t in range(max(node_cpus, default=1), 0, -1) if hosted(t) >= workers), 1)
    if hosted(threads) < workers:
        nodes = counted(len(node_cpus), "node")
        largest = f", the largest {max(node_cpus)}" if len(node_cpus) > 1 else ""
        raise ClusterError(f"the Ray cluster has {sum(node_cpus)} CPUs on {nodes}{largest}: it can host "
                           f"{hosted(threads)} workers of {threads} thread(s), not {workers}; ask for fewer workers "
                           f"or --worker-threads")
    return threads


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


#: A table or set grows when its room (keys it may still take) falls below this many and more keys
#: come; until then the keys of a round go in parts that fit its room.
_LEAST_ROOM = 1 << 16


def _within_room(values: np.ndarray, keys, grow):
    """``values`` in parts that ``keys`` (a compact table or set) surely has room for: a part at
    most its room, which only the keys new to it use up; it is grown (``grow(expected)``) only when
    the room falls below :data:`_LEAST_ROOM` and more values come. (A round's values hold many
    keys already there: growing for all of them would double a table that is nearly full but big
    enough.)"""
    at = 0
    while at < values.shape[0]:
        left = values.shape[0] - at
        room = keys.room()
        if room < min(left, _LEAST_ROOM):
            grow(len(keys) + max(left, len(keys)))
            continue
        yield values[at: at + room]
        at += min(room, left)


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
        tags = np.zeros(self.table.capacity, np.uint8)
        used = remap >= 0
        tags[remap[used]] = self.tags[used]
        self.tags = tags
        self.fresh = [remap[a].astype(slot_dtype(self.table.capacity)) for a in self.fresh]

    def _insert_nonterminal(self, hashes: np.ndarray) -> None:
        for part in _within_room(hashes, self.table, self._grow_table):
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
        for part in _within_room(items, self.terminal, self.terminal.grow):
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
            with ThreadPoolExecutor(t) as pool:
                sort_shares(keys, t, pool)
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
        values = np.ascontiguousarray(self.cells.view(np.uint8)[0::2])
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

    def records(self, lo: int, hi: int, value_bits: int) -> np.ndarray:
        """The sorted records of its positions whose code lies in ``[lo, hi)``."""
        self._threaded()
        out = records_between(self.table, self.solution, self.shift, value_bits, lo, hi)
        self.sent["records"] += out.nbytes
        return out

    def report(self) -> dict:
        """``host``, ``pid``, ``threads``, ``positions``, ``capacity`` (slots of its table),
        ``peak_rss`` (bytes), ``sent`` (bytes by phase)."""
        return dict(self.ready(), positions=len(self.table), capacity=self.table.capacity, peak_rss=_peak_rss(),
                    sent=dict(self.sent))


class LocalRay:
    """A Ray instance of this machine's own, whose files go in a new folder of its own and whose
    end leaves nothing behind: :meth:`stop` stops it, ends any of its processes still running and
    removes the folder. A signal that ends the process before that (the command line's watcher,
    :func:`~dobutsu_tb.encoding.interrupt.exit_now`) does the same (:func:`~dobutsu_tb.encoding.interrupt.at_exit`).
    A Ray instance started otherwise (``ray start``, another process's) is never touched: its
    folder and processes are not this one's.

    Attributes
    ----------
    folder : str or None
        The folder (``$TMPDIR/dobutsu-ray-XXXXXXXX``, or ``/tmp/...`` when ``$TMPDIR`` is too long
        for Ray's sockets, :data:`RAY_FOLDER_LENGTH`) while the instance runs.
    """

    def __init__(self):
        self.folder: str | None = None
        self._token = None
        self._ending = False
        self._excepthook = None

    def start(self, ray, **init) -> None:
        """``ray.init(address="local", **init)`` (a new instance, even if ``$RAY_ADDRESS`` is set
        or another instance runs here) with its files in :attr:`folder`.

        Raises
        ------
        OSError
            When no temporary folder short enough can be made.
        Exception
            What ``ray.init`` raises; the folder and any process already started are gone then.
        """
        self.folder = _ray_folder()
        self._token = interrupt.at_exit(self.remove)
        self._excepthook, threading.excepthook = threading.excepthook, self._thread_failed
        try:
            ray.init(address="local", _temp_dir=self.folder, **init)
        except BaseException:
            self.stop(ray)
            raise

    def stop(self, ray) -> None:
        """``ray.shutdown()``, then :meth:`remove`."""
        try:
            ray.shutdown()
        finally:
            self.remove()
            interrupt.forget(self._token)
            if self._excepthook is not None:
                threading.excepthook, self._excepthook = self._excepthook, None
            self._ending = False

    def _thread_failed(self, args) -> None:
        """``threading.excepthook`` while the instance runs: Ray's own threads in this process (the
        listeners of its GCS, named ``ray_...``) fail with a traceback when the instance's processes
        end under them, after a signal (Ctrl-C reaches them too) or in :meth:`remove`; nothing is
        said then (the build says its own line). Any other thread's error is printed as usual."""
        name = getattr(args.thread, "name", "") or ""
        if name.startswith("ray_") and (self._ending or interrupt.requested()):
            return
        (self._excepthook or threading.__excepthook__)(args)

    def remove(self) -> None:
        """End the processes of the instance still running (those whose command line names the folder:
        Ray's GCS, raylet and monitors, and their descendants: the workers) and remove the folder;
        quick enough for :func:`~dobutsu_tb.encoding.interrupt.at_exit`, errors ignored."""
        folder = self.folder
        if folder is None:
            return
        self._ending = True
        for _ in range(40):  # a process killed a moment ago may still have made a file: again
            for pid in _processes_of(folder):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            shutil.rmtree(folder, ignore_errors=True)
            if not os.path.lexists(folder):
                break
            time.sleep(0.025)
        self.folder = None


def _ray_folder() -> str:
    """A new empty folder for a local Ray instance: in the temporary folder (``$TMPDIR``), or in
    ``/tmp`` when that path is too long for Ray's unix sockets."""
    for base in dict.fromkeys((tempfile.gettempdir(), "/tmp")):
        if len(os.fsencode(os.path.join(os.path.abspath(base), "dobutsu-ray-12345678"))) <= RAY_FOLDER_LENGTH:
            return tempfile.mkdtemp(prefix="dobutsu-ray-", dir=os.path.abspath(base))
    raise OSError(f"no temporary folder short enough for Ray's sockets ({tempfile.gettempdir()!r} is too long); "
                  f"set TMPDIR to a shorter one")


def _processes_of(folder: str) -> list:
    """The processes whose command line names ``folder`` and their descendants, this one excepted
    (``/proc``; none where there is no ``/proc``)."""
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    needle, me = os.fsencode(folder), os.getpid()
    parents, found = {}, set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                named = needle in f.read()
            with open(f"/proc/{pid}/stat", "rb") as f:
                parents[pid] = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if named and pid != me:
            found.add(pid)
    while True:
        children = {pid for pid, parent in parents.items() if parent in found and pid not in found and pid != me}
        if not children:
            return sorted(found)
        found |= children


class _StderrCaught:
    """Within the block, what is written to file descriptor 2 (by Ray's C++ code too) goes to a
    temporary file, read by :meth:`text` before the block ends; it is put back at the block's end,
    and before a signal's error line if a signal ends the process meanwhile
    (:func:`~dobutsu_tb.encoding.interrupt.at_exit`)."""

    def __enter__(self) -> "_StderrCaught":
        sys.stderr.flush()
        self._file = tempfile.TemporaryFile()
        self._saved = os.dup(2)
        self._token = interrupt.at_exit(lambda: os.dup2(self._saved, 2))
        os.dup2(self._file.fileno(), 2)
        return self

    def text(self) -> str:
        """What was written so far (the last 64 KiB)."""
        self._file.seek(max(0, self._file.seek(0, os.SEEK_END) - (1 << 16)))
        return self._file.read().decode("utf-8", "replace")

    def __exit__(self, *exc) -> None:
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(self._saved, 2)
        interrupt.forget(self._token)
        os.close(self._saved)
        self._file.close()


#: The head of a line of Ray's C++ log: ``[2026-11-25 19:26:19,028 W 24492 24492] gcs_client.cc:210: ``.
_RAY_LOG_HEAD = re.compile(r"^\[[^\]]*\]\s+[\w.]+:\d+:\s*")


def _connect_failure(exc, printed: str) -> str:
    """One line for a ``ray.init`` that could not connect: what it raised, with the last thing
    Ray's client printed meanwhile (the reason, where ``Failed to connect`` alone does not say
    it), and what to do about a cluster that asks for a token."""
    said = [_RAY_LOG_HEAD.sub("", line).strip() for line in printed.splitlines()]
    said = [line for line in said if line]
    line = _gist(exc)
    if said and said[-1] not in line:
        line = f"{line.rstrip('.')} ({_gist(said[-1], limit=200).rstrip('.')})"
    if "InvalidAuthToken" in printed or "Unauthenticated" in printed:
        line += ("; the cluster asks for a token: set RAY_AUTH_MODE=token, and RAY_AUTH_TOKEN (or "
                 "~/.ray/auth_token) to the cluster's token")
    return line


def _ray_connected() -> bool:
    """Whether this process is connected to Ray already (``ray.init`` called), without importing Ray."""
    ray = sys.modules.get("ray")
    return ray is not None and getattr(ray, "is_initialized", lambda: False)()


class _Cluster:
    """The driver's side: the connection to Ray, the workers, and calls whose failures become
    :class:`ClusterError` (a context manager: the workers go, and a Ray instance started for the
    build stops and leaves nothing behind, whatever happens)."""

    def __init__(self, options: ClusterOptions, game: Game, expected, out):
        self.options, self.game, self.expected, self.out = options, game, expected, out
        self.ray = None
        self.started = False
        self.local: LocalRay | None = None
        self.workers: list = []
        self.infos: list = []
        self.address = options.address
        self._printer = None

    def __enter__(self) -> "_Cluster":
        connected = _ray_connected()
        if self.options.address == LOCAL and not connected:  # too many workers: refused whether Ray is here or not
            local_threads(self.options.workers, self.options.worker_threads)
        if importlib.util.find_spec("ray") is None:
            raise ClusterError(_NO_RAY)
        if not connected:
            self._check_before_ray()
        try:
            import ray
        except ImportError:
            raise ClusterError(_NO_RAY) from None
        self.ray = ray
        self._quiet_raylet()
        try:
            self._connect()
            self._start_workers()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _check_before_ray(self) -> None:
        """What can be refused before Ray is imported: a ``ray://`` address without Ray Client, an
        address where nothing answers as a Ray head."""
        options = self.options
        where = f"connect to the Ray cluster at {options.address}"
        if options.address == LOCAL:
            return
        if options.address.startswith("ray://") and importlib.util.find_spec("grpc") is None:
            raise ClusterError(f"cannot {where}: a ray:// address needs Ray Client: pip install 'ray[client]' "
                               f"(or 'dobutsu-tablebase[cluster]' again)")
        try:
            _reachable(options.address)
        except ConnectionError as exc:
            raise ClusterError(f"cannot {where}: {exc}") from None

    def _connect(self) -> None:
        ray, options = self.ray, self.options
        if ray.is_initialized():
            self.address = "(connected)" if options.address == LOCAL else options.address
            return
        import logging

        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        handlers = {s: signal.getsignal(s) for s in interrupt.STOP_SIGNALS}
        quiet = {"log_to_driver": False, "logging_level": logging.ERROR}
        try:
            if options.address == LOCAL:
                threads = local_threads(options.workers, options.worker_threads)
                self.local = LocalRay()
                self.local.start(ray, num_cpus=max(usable_cpus(), threads * options.workers), include_dashboard=False,
                                 object_store_memory=options.object_store_memory or config.CLUSTER_OBJECT_STORE,
                                 **quiet)
            else:
                with _StderrCaught() as said:  # Ray's client prints its retries there, a line a second
                    try:
                        ray.init(address=options.address, **quiet)
                    except Exception as exc:  # noqa: BLE001 (as below, with what Ray printed)
                        raise ClusterError(f"cannot connect to the Ray cluster at {options.address}: "
                                           f"{_connect_failure(exc, said.text())}") from None
        except SystemExit as exc:  # ray.init's own SIGTERM handler, in place while it runs
            self.local = None
            if exc.code == signal.SIGTERM:
                raise interrupt.Interrupted(signal.SIGTERM) from None
            raise
        except ClusterError:
            self.local = None
            raise
        except Exception as exc:  # noqa: BLE001 (Ray raises many kinds: one line says which)
            self.local = None
            where = "start a local Ray instance" if options.address == LOCAL else \
                f"connect to the Ray cluster at {options.address}"
            if options.address == "auto" and isinstance(exc, ConnectionError):
                raise ClusterError(f"cannot {where}: this machine is not a node of a running Ray cluster ('ray start' "
                                   f"makes it one), and $RAY_ADDRESS is not set; give the head's HOST:PORT") from None
            raise ClusterError(f"cannot {where}: {_gist(exc)}") from None
        finally:
            if threading.current_thread() is threading.main_thread():
                for s, h in handlers.items():  # ray.init sets its own SIGTERM handler: ours stay
                    signal.signal(s, h if h is not None else signal.SIG_DFL)
        self.started = True

    def _quiet_raylet(self) -> None:
        """Ray's driver prints the raylet's error messages (a worker that died, with advice) to
        stdout as they come; the build says what failed in its own one line (:meth:`get`), so
        they are dropped while it runs. (Ray's private ``print_to_stdstream``, looked up by its
        listening thread at each message; left alone if a version of Ray has none.)"""
        try:
            from ray._private import worker as ray_worker
        except ImportError:
            return
        printer = getattr(ray_worker, "print_to_stdstream", None)
        if printer is None:
            return

        def without_raylet(data, *args, **kwargs):
            if data.get("pid") != "raylet":
                printer(data, *args, **kwargs)

        self._printer = printer
        ray_worker.print_to_stdstream = without_raylet

    def _node_cpus(self) -> list:
        """Each live node's CPUs (the cluster's total as one node if Ray does not say)."""
        ray = self.ray
        try:
            cpus = [int(n.get("Resources", {}).get("CPU", 0)) for n in ray.nodes() if n.get("Alive")]
        except Exception:  # noqa: BLE001 (a Ray that cannot list its nodes)
            cpus = []
        return [c for c in cpus if c > 0] or [int(ray.cluster_resources().get("CPU", 0))]

    def _start_workers(self) -> None:
        ray, options = self.ray, self.options
        threads = cluster_threads(self._node_cpus(), options.workers, options.worker_threads)
        actor = ray.remote(ShardWorker).options(num_cpus=threads, max_restarts=0, scheduling_strategy="SPREAD")
        variant = self.game.variant.to_json()
        self.workers = [actor.remote(variant, i, options.workers, threads, self.expected)
                        for i in range(options.workers)]
        self.infos = self.get([w.ready.remote() for w in self.workers], timeout=STARTUP_SECONDS)

    def __exit__(self, *exc) -> None:
        ray = self.ray
        if ray is None:
            return
        for w in self.workers:
            try:
                ray.kill(w)
            except Exception:  # noqa: BLE001 (already gone)
                pass
        self.workers = []
        if self.started:
            if self.local is not None:
                self.local.stop(ray)  # and its folder and processes gone
                self.local = None
            else:
                ray.shutdown()
            self.started = False
        if self._printer is not None:
            from ray._private import worker as ray_worker

            ray_worker.print_to_stdstream, self._printer = self._printer, None

    def _which(self, exc) -> str:
        """The worker an error names, for the message: its number, process and host (from the
        workers' own report, else from what Ray's error says of the actor)."""
        actor_id = getattr(exc, "actor_id", None)
        said = dict(re.findall(r"^\s*(pid|ip): (\S+)\s*$", _ANSI.sub("", str(exc)), re.MULTILINE))
        for i, w in enumerate(self.workers):
            if actor_id is not None and w._actor_id.hex() == actor_id:
                info = self.infos[i] if i < len(self.infos) else {}
                pid, host = (info["pid"], info["host"]) if info else (said.get("pid"), said.get("ip"))
                where = f" (pid {pid}{f' on {host}' if host else ''})" if pid else ""
                return f"cluster worker {i}{where}"
        return "a cluster worker"

    def get(self, refs, timeout: float | None = None):
        """``ray.get``, its failures as :class:`ClusterError` (or the worker's own error when it is
        one of the build's: a full table, memory), or :class:`~.interrupt.Interrupted` after a
        signal."""
        ray = self.ray
        try:
            return ray.get(refs, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            interrupt.check()
            raise ClusterError(f"the cluster's workers did not start within {timeout:.0f} s (is dobutsu-tablebase "
                               f"installed on every node?)") from None
        except ray.exceptions.RayActorError as exc:
            interrupt.check()
            if getattr(exc, "actor_init_failed", False):  # the worker could not start: the error it raised
                raise ClusterError(f"{self._which(exc)} could not start: {_gist(exc, last=True)}") from None
            raise ClusterError(f"{self._which(exc)} died ({_death(exc)})") from None
        except ray.exceptions.RayTaskError as exc:
            interrupt.check()
            cause = getattr(exc, "cause", None)
            if isinstance(cause, (CompactTableFullError, InsufficientMemoryError, MemoryError)):
                raise cause from None
            what = f"{type(cause).__name__}: {cause}" if cause is not None else exc
            raise ClusterError(f"a cluster worker failed: {_gist(what)}") from None
        except ray.exceptions.RayError as exc:
            interrupt.check()
            raise ClusterError(f"the cluster failed: {_gist(exc)}") from None

    def calls(self, method: str, *args, messages: bool = False) -> list:
        """``worker.method.remote(*args)`` on every worker: one reference each, or with ``messages``
        (a method that returns one message for each worker) a list of references each."""
        n = len(self.workers)
        if not messages:
            return [getattr(w, method).remote(*args) for w in self.workers]
        out = [getattr(w, method).options(num_returns=n).remote(*args) for w in self.workers]
        return out if n > 1 else [[ref] for ref in out]

    def call(self, i: int, method: str, *args):
        """``worker.method.remote(*args)`` on worker ``i``."""
        return getattr(self.workers[i], method).remote(*args)

    def route(self, method: str, messages: list, *args) -> list:
        """``worker.method.remote(*args, *what the others sent it)`` on every worker: the messages
        go as references, from the object store to their owner, never through this process."""
        n = len(self.workers)
        return [getattr(w, method).remote(*args, *[messages[v][o] for v in range(n) if v != o])
                for o, w in enumerate(self.workers)]


class _SerialCluster:
    """The driver's side with the workers as objects of this process, one after another (no Ray):
    the same rounds and messages as on a cluster (``--cluster serial``, for the tests)."""

    def __init__(self, options: ClusterOptions, game: Game, expected, out):
        variant = game.variant.to_json()
        self.address = SERIAL
        self.workers = [ShardWorker(variant, i, options.workers, options.worker_threads or 1, expected)
                        for i in range(options.workers)]

    def __enter__(self) -> "_SerialCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.workers = []

    def calls(self, method: str, *args, messages: bool = False) -> list:
        out = [getattr(w, method)(*args) for w in self.workers]
        return [[m] for m in out] if messages and len(out) == 1 else out

    def call(self, i: int, method: str, *args):
        return getattr(self.workers[i], method)(*args)

    def route(self, method: str, messages: list, *args) -> list:
        n = len(self.workers)
        return [getattr(w, method)(*args, *[messages[v][o] for v in range(n) if v != o])
                for o, w in enumerate(self.workers)]

    def get(self, results, timeout: float | None = None):
        return results


#: The error without Ray.
_NO_RAY = "a build on a cluster needs Ray: pip install 'dobutsu-tablebase[cluster]'"
#: Seconds to wait for a cluster's head to accept a connection and answer, before Ray is asked to join it.
CONNECT_SECONDS = 10.0
#: What an HTTP/2 client sends first (RFC 9113 §3.4): the preface and an empty SETTINGS frame. A
#: gRPC server (a Ray head's GCS, a Ray Client server) answers with a SETTINGS frame of its own.
_HTTP2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def _endpoint(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a ``HOST:PORT`` or ``ray://HOST[:PORT]`` address (None for ``auto``)."""
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if address.startswith("ray://") and not sep:
        host, port = rest, str(RAY_CLIENT_PORT)
    if not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def _reachable(address: str) -> None:
    """Raise ``ConnectionError`` unless a gRPC server answers at ``HOST:PORT`` (or ``ray://HOST:PORT``)
    within :data:`CONNECT_SECONDS`: Ray itself retries a head that is absent, or a port that is not
    a head's (the dashboard's, say), for many minutes, printing warnings. Not checked: ``auto``, and
    the answer when ``$RAY_USE_TLS`` is set (then the head speaks TLS first)."""
    end = _endpoint(address)
    if end is None:
        return
    try:
        conn = socket.create_connection(end, timeout=CONNECT_SECONDS)
    except OSError as exc:
        raise ConnectionError(f"nothing answers at {address} ({exc.strerror or type(exc).__name__}); is "
                              f"'ray start --head' running there?") from None
    with conn:
        if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
            return
        answer = b""
        try:
            conn.sendall(_HTTP2_HELLO)
            while len(answer) < 9:
                part = conn.recv(9 - len(answer))
                if not part:
                    break
                answer += part
        except OSError:
            pass
    if len(answer) < 9 or answer[3] != 4:  # a frame's header: length (3 bytes), type (4: SETTINGS), ...
        port = "Ray Client's port (10001 by default)" if address.startswith("ray://") else \
            "the head's GCS port (6379 by default)"
        raise ConnectionError(f"something answers at {address}, but not as a Ray cluster does (no gRPC); "
                              f"give {port}")


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: A line that names an exception, as a traceback's last line does: ``ValueError: ...``.
_EXCEPTION_LINE = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)\b")


def _gist(exc, last: bool = False, limit: int = 300) -> str:
    """What an error says went wrong, in one line of at most ``limit`` characters.

    Ray's errors run over several lines, and their first line is often not the informative one
    ("The actor died unexpectedly", "Version mismatch: The cluster was started with:"). So: the
    last line that names an exception (``ValueError: ...``, as a traceback ends) if there is one;
    else, with ``last``, the last line; else all the lines joined, so that a list or a table of
    versions reads on one line. Traceback frames and colours are left out; past ``limit`` the text
    is cut at a sentence's end where one is near.
    """
    text = _ANSI.sub("", str(exc))
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and set(line) - set("^~ ")
             and not line.startswith(("Traceback (most recent call last)", 'File "'))]
    if not lines:
        return type(exc).__name__
    named = [line for line in lines if _EXCEPTION_LINE.match(line)]
    line = named[-1] if named else lines[-1] if last else " ".join(lines)
    if len(line) > limit:
        end = line.rfind(". ", 0, limit)
        line = line[:end + 1] if end >= limit // 3 else line[:limit - 3] + "..."
    return line


#: Lines of Ray's error for a dead actor that say nothing of why it died: its headline, the
#: fields of its context (``class_name: ...``, ``pid: ...``), and the line Ray adds when a worker
#: or the raylet is killed while calls to the actor wait, which reads as if it had never started.
_DEATH_NOISE = re.compile(r"The actor died unexpectedly before finishing this task\.?$|[a-z_]+: |"
                          r"The actor never ran - it was cancelled before it started running\.?$")


def _death(exc) -> str:
    """Why Ray says a worker died, in one line: its context's reason (``The actor is dead because
    its worker process has died ...``, ``... because its node has died ...``), not the lines around
    it (:data:`_DEATH_NOISE`); ``killed`` when it gives none."""
    lines = [line.strip() for line in _ANSI.sub("", str(exc)).splitlines()]
    reasons = [line for line in lines if line and not _DEATH_NOISE.match(line)]
    because = [line for line in reasons if "because" in line]
    return _gist((because or reasons or ["killed"])[0]).rstrip(".")


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
        with (_SerialCluster if options.address == SERIAL else _Cluster)(options, game, expected, out) as cluster:
            meta, report, no_move_keys = _run(cluster, tmp, game, start, expected, progress, phase, options)
            phase("stop")  # the workers end (and a local Ray instance stops) as the block is left
        return meta, report, no_move_keys
    except ClusterError as exc:
        raise ClusterError(f"{exc}; the build stopped{f', {out} was not written' if out else ''}") from None


def _run(cluster: _Cluster, tmp, game: Game, start: Position, expected, progress, phase,
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
        upcoming = cluster.calls("records", *ranges[0], value_bits)
        for i in range(len(ranges)):  # the next range is made while this one is written
            interrupt.check()
            pending = upcoming
            upcoming = cluster.calls("records", *ranges[i + 1], value_bits) if i + 1 < len(ranges) else None
            block = np.concatenate(cluster.get(pending))
            del pending  # the workers' parts leave the object store
            block.sort(kind="stable")  # sorted runs, one per worker: a merge
            yield block
            del block

    phase("write")
    t0 = time.perf_counter()
    with tqdm(total=2 * counts["nonterminal"], desc="write", unit=" entries", unit_scale=True,
              disable=disable, file=sys.stderr) as bar:
        write_file(tmp, RecordBlocks(counts["nonterminal"], blocks), meta, progress=bar.update,
                   value_bits=value_bits)
    seconds["write"] = time.perf_counter() - t0
    report = ClusterReport(cluster.address, cluster.get(cluster.calls("report")), rounds)
    phase("check")
    check_start_value(tmp, start, start_wdl, start_dtm)
    return meta, report, no_move_keys


__all__ = ["ClusterError", "ClusterOptions", "ClusterReport", "LocalRay", "ShardWorker", "build_on_cluster",
           "check_address", "cluster_threads", "local_threads", "usable_cpus", "LOCAL", "SERIAL"]
