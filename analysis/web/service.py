"""The tablebase behind the web server.

:class:`~dobutsu_tb.tablebase.probe.Tablebase` objects are not written for concurrent use (a
chunk cache in an ``OrderedDict``, an open h5py file), so every call goes to one worker thread:
requests wait their turn there while the event loop goes on serving the page. The answers to
recent probes are kept (positions are revisited: the start, back and forward), and the file's
statistics, which read the whole file (seconds for a big one), are counted once, on first
demand, in a child process, so that probes are not held up meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from dobutsu_tb.analysis.lines import verify_line
from dobutsu_tb.analysis.reports import line_report_json, metadata_json, perfect_line_json, probe_json
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.probe import open_tablebase

#: Probe answers kept, most recent first out last.
PROBE_CACHE = 4096


class StatsError(RuntimeError):
    """Raised when the child process that counts the statistics fails."""


class Busy(RuntimeError):
    """Raised by :meth:`TablebaseService.call` when too many calls wait already (a 503)."""


class TablebaseService:
    """One open tablebase file, used from one worker thread.

    Parameters
    ----------
    path : str or Path
    in_memory : bool, optional
        Read the whole file into memory on open (:func:`~dobutsu_tb.tablebase.probe.open_tablebase`).
    max_queued : int, optional
        Calls waiting or running at once; :meth:`call` refuses more (:class:`Busy`).

    Raises
    ------
    dobutsu_tb.tablebase.schema.TablebaseFileError
        If the file is missing, corrupt or not a tablebase.
    """

    def __init__(self, path, in_memory: bool = False, max_queued: int = 64):
        self.path = Path(path)
        self._tb = open_tablebase(self.path, in_memory=in_memory)
        self.metadata = self._tb.metadata
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tablebase")
        self._probes: OrderedDict[str, dict] = OrderedDict()  # touched by the worker thread only
        self._stats: asyncio.Task | None = None  # the count under way
        self._stats_result: dict | None = None
        self._stats_process = None
        self._running = 0  # calls under way on the worker thread (0 or 1)
        self._queued = 0  # calls waiting or under way
        self.max_queued = max_queued

    def info(self) -> dict:
        """The file's name and what it says about itself (:func:`~dobutsu_tb.analysis.reports.metadata_json`)."""
        return {"file": self.path.name, **metadata_json(self.metadata)}

    async def call(self, fn, *args):
        """Run ``fn(*args)`` on the worker thread and return its result (or raise its error).

        Raises
        ------
        Busy
            If :attr:`max_queued` calls wait or run already.
        """
        if self._queued >= self.max_queued:
            raise Busy(f"busy: {self.max_queued} requests wait for the tablebase already; try again")
        self._queued += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._worker, self._counted, fn, *args)
        finally:
            self._queued -= 1

    def _counted(self, fn, *args):
        self._running += 1
        try:
            return fn(*args)
        finally:
            self._running -= 1

    # --- run on the worker thread ------------------------------------------------------------

    def probe(self, position: Position) -> dict:
        """:func:`~dobutsu_tb.analysis.reports.probe_json` of ``position``, from the cache when
        it was asked recently.

        Raises
        ------
        dobutsu_tb.tablebase.probe.MissingPositionError
            If the tablebase does not cover the position.
        """
        text = position.text()
        found = self._probes.get(text)
        if found is None:
            found = probe_json(self._tb, position)
            self._probes[text] = found
            if len(self._probes) > PROBE_CACHE:
                self._probes.popitem(last=False)
        else:
            self._probes.move_to_end(text)
        return found

    def line(self, position: Position, max_plies: int) -> dict:
        """:func:`~dobutsu_tb.analysis.reports.perfect_line_json` of ``position``."""
        return perfect_line_json(self._tb, position, max_plies)

    def verify(self, start: Position, moves: list[str]) -> dict:
        """``moves`` from ``start`` judged ply by ply (:func:`~dobutsu_tb.analysis.reports.line_report_json`).

        Raises
        ------
        dobutsu_tb.tablebase.probe.MissingPositionError
            If the tablebase does not cover the start position.
        """
        return line_report_json(verify_line(self._tb, start, moves))

    # --- the statistics, in a child process --------------------------------------------------

    async def stats(self) -> dict:
        """:func:`~dobutsu_tb.analysis.reports.stats_json` of the file, counted on first demand in
        a child process and kept; concurrent callers share one count.

        Raises
        ------
        StatsError
            If the count failed (the next call tries again).
        """
        if self._stats_result is not None:
            return self._stats_result
        if self._stats is None:
            self._stats = asyncio.get_running_loop().create_task(self._count_stats())
        task = self._stats
        try:
            self._stats_result = await asyncio.shield(task)
        finally:
            if self._stats is task and task.done():
                self._stats = None
        return self._stats_result

    async def _count_stats(self) -> dict:
        from dobutsu_tb.encoding import interrupt

        code = f"from {__name__} import print_stats; print_stats()"
        # In a session of its own: Ctrl-C at the terminal is the server's to handle (it stops the child).
        # The child is in the server's process group from its fork to its setsid, and a Ctrl-C (a
        # signal to the group) then killed it ('counting the statistics failed: exit code -2' beside
        # the server's own line, under load): it is made with the stop signals blocked in this
        # thread, a mask it keeps through exec, so that none reaches it (the server kills it).
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, interrupt.STOP_SIGNALS)
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-c", code, str(self.path), start_new_session=True,
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        self._stats_process = process
        token = interrupt.at_exit(lambda: _kill(process.pid))  # a server ended by a signal leaves no child
        try:
            out, err = await process.communicate()
        finally:
            self._stats_process = None
            interrupt.forget(token)
        if process.returncode != 0:
            lines = err.decode(errors="replace").strip().splitlines()
            why = lines[-1] if lines else f"exit code {process.returncode}"
            raise StatsError(f"counting the statistics failed: {why}")
        return json.loads(out)

    async def aclose(self, wait: float = 0.2) -> None:
        """Stop a statistics count under way (its child killed and reaped), drop the queued
        calls, and close the file once the call under way (if any) returned, within ``wait``
        seconds (else the file is left to the process's end)."""
        process = self._stats_process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(process.wait(), wait)
        if self._stats is not None:
            self._stats.cancel()
        self._worker.shutdown(wait=False, cancel_futures=True)
        loop = asyncio.get_running_loop()
        end = loop.time() + wait
        while self._running and loop.time() < end:
            await asyncio.sleep(0.005)
        if not self._running:
            self._tb.close()

    def close(self) -> None:
        """Stop a statistics count under way, finish the queued calls and close the file."""
        process = self._stats_process
        if process is not None and process.returncode is None:
            _kill(process.pid)
        self._worker.shutdown(wait=True, cancel_futures=True)
        self._tb.close()


def _kill(pid: int) -> None:
    """Kill a child process and reap it (briefly: asyncio's child watcher may reap it first)."""
    import os
    import signal
    import time

    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 0.2
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                return
        except ChildProcessError:
            return
        time.sleep(0.005)


def print_stats() -> None:
    """In the child process: print :func:`~dobutsu_tb.analysis.reports.stats_json` of the file
    named by the first argument as JSON on stdout (an error goes to stderr, exit code 1)."""
    from dobutsu_tb.analysis.reports import stats_json
    from dobutsu_tb.analysis.stats import tablebase_stats

    try:
        data = stats_json(tablebase_stats(sys.argv[1]))
    except Exception as exc:  # noqa: BLE001 (any failure is reported by the parent, which reads the last line)
        sys.exit(f"error: {exc}")
    json.dump(data, sys.stdout)
