"""Ray for the build on a cluster: the options, connecting to a cluster or starting a Ray instance
of this machine's own and leaving nothing of it behind, the workers as Ray actors, and every
failure of Ray's as one line (:class:`ClusterError`). The rounds the workers run are
:mod:`~dobutsu_tb.tablebase.cluster`'s (docs/cluster.md).

Ray is imported only here, when a build asks for a cluster (``pip install 'dobutsu-tablebase[cluster]'``).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from dobutsu_tb.encoding import config, interrupt
from dobutsu_tb.encoding.compact_layout import CompactTableFullError
from dobutsu_tb.encoding.words import counted
from dobutsu_tb.tablebase.game.game import Game
from dobutsu_tb.tablebase.memory import InsufficientMemoryError

#: ``--cluster local``: a Ray instance of this machine's own, started for the build and stopped after it.
LOCAL = "local"
#: ``--cluster serial``: no Ray; the workers are objects of this process, run one after another
#: (the same rounds and messages: for the tests).
SERIAL = "serial"
#: Seconds the workers may take to start (a remote node imports numpy, numba and this package).
STARTUP_SECONDS = 300.0
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


class RayCluster:
    """The driver's side: the connection to Ray, the workers, and calls whose failures become
    :class:`ClusterError` (a context manager: the workers go, and a Ray instance started for the
    build stops and leaves nothing behind, whatever happens)."""

    def __init__(self, options: ClusterOptions, game: Game, expected, out, worker):
        self.options, self.game, self.expected, self.out = options, game, expected, out
        self.worker = worker  # the workers' class (cluster.ShardWorker)
        self.ray = None
        self.started = False
        self.local: LocalRay | None = None
        self.workers: list = []
        self.infos: list = []
        self.address = options.address
        self._printer = None

    def __enter__(self) -> "RayCluster":
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
        actor = ray.remote(self.worker).options(num_cpus=threads, max_restarts=0, scheduling_strategy="SPREAD")
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


class SerialCluster:
    """The driver's side with the workers as objects of this process, one after another (no Ray):
    the same rounds and messages as on a cluster (``--cluster serial``, for the tests)."""

    def __init__(self, options: ClusterOptions, game: Game, expected, out, worker):
        variant = game.variant.to_json()
        self.address = SERIAL
        self.workers = [worker(variant, i, options.workers, options.worker_threads or 1, expected)
                        for i in range(options.workers)]

    def __enter__(self) -> "SerialCluster":
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
