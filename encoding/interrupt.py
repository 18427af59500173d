"""Stopping on SIGINT (Ctrl-C), SIGTERM and SIGHUP (the terminal closed): at once, cleanly, and
within a second whatever runs.

Python runs a signal handler only between bytecodes of the main thread, so a signal that
arrives while a jitted kernel runs (without the GIL) waits until the kernel returns; and a
``KeyboardInterrupt`` raised at an arbitrary bytecode can land inside a library's callback or
clean-up code (HDF5's, a thread pool's) and be lost there. Three pieces make every command stop
within a second:

- :func:`install`, first thing in the command line's process: the :data:`STOP_SIGNALS` raise
  :class:`Interrupted` in the main thread (a ``KeyboardInterrupt`` that knows its signal), so
  plain Python code stops at once and unwinds through its ``finally`` blocks; the command line
  then prints its one ``error:`` line and ends the process with :func:`exit_now`. A signal
  inherited as ignored (SIGINT in a background job of a shell, SIGHUP under ``nohup``) stays
  ignored.
- A watcher thread, woken through ``signal.set_wakeup_fd`` even while the main thread runs a
  kernel without the GIL, ends the process :data:`EXIT_DEADLINE` seconds after the signal if it
  has not ended by itself (a kernel that cannot see the signal, threads that do not stop): it
  runs the clean-ups registered with :func:`at_exit` (temporary files removed, children
  killed), prints the error line and calls ``os._exit``. A second signal ends it at once.
- Inside :func:`stop_on_signals` (a build), a signal only sets a flag; long jobs call
  :func:`check` between kernel calls, batches and chunk writes, and it raises
  :class:`Interrupted` at that known place, from which the job's clean-up runs as for any error.

Outside the command line (no :func:`install`: the tests, a Python session) only
:func:`stop_on_signals` changes anything, for its block.

>>> with stop_on_signals():                                   # doctest: +SKIP
...     for batch in batches:
...         check()                                           # raises Interrupted after Ctrl-C
...         kernel(batch)
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
from contextlib import contextmanager

#: The signals :func:`stop_on_signals` turns into :class:`Interrupted` (each unless ignored).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: Seconds from a signal to the forced end of a process that has not ended by itself
#: (:func:`install`); the command line promises less than a second.
EXIT_DEADLINE = 0.6

_pending: list[int] = []  # the signals received and not yet raised (inside stop_on_signals)
_state = {"installed": False, "defer": 0}
_cleanups: dict[int, object] = {}  # at_exit's clean-ups, in the order registered
_next_token = [0]
_exit_lock = threading.Lock()


class Interrupted(KeyboardInterrupt):
    """Raised after SIGINT, SIGTERM or SIGHUP (by :func:`check`, or at once after :func:`install`).

    Attributes
    ----------
    signum : int
        The signal received.
    exit_code : int
        ``128 + signum``, the shell's convention: 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP.
    """

    def __init__(self, signum: int, message: str = ""):
        super().__init__(message or f"interrupted by {signal.Signals(signum).name}")
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def __str__(self) -> str:
        return str(self.args[0])


def check() -> None:
    """Raise :class:`Interrupted` if a signal arrived since :func:`stop_on_signals` began.

    Raises
    ------
    Interrupted
        For the first signal received.
    """
    if _pending:
        raise Interrupted(_pending[0])


def requested() -> int:
    """The first stop signal received and not yet dealt with (0 if none)."""
    return _pending[0] if _pending else 0


def installed() -> bool:
    """Whether :func:`install` runs this process (the command line)."""
    return _state["installed"]


def _handler(signum, frame) -> None:
    if signum in _pending and _state["defer"]:  # the second time inside stop_on_signals: stop now
        raise Interrupted(signum)
    if signum not in _pending:
        _pending.append(signum)
    if not _state["defer"]:
        raise Interrupted(signum)


def install(deadline: float = EXIT_DEADLINE) -> None:
    """Make the :data:`STOP_SIGNALS` end this process within ``deadline`` seconds (module docstring).

    For the command line's process only, called before anything slow is imported. Signals
    inherited as ignored stay ignored. Outside the main thread it does nothing.
    """
    if _state["installed"] or threading.current_thread() is not threading.main_thread():
        return
    watched = [s for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN]
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    for fd in (read_end, write_end):
        os.set_inheritable(fd, False)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    threading.Thread(target=_watch, args=(read_end, deadline, set(watched)), name="signal-watch",
                     daemon=True).start()
    for s in watched:
        signal.signal(s, _handler)
    sys.unraisablehook = _unraisable(sys.unraisablehook)
    _state["installed"] = True


def _watch(fd: int, deadline: float, watched: set) -> None:
    """The watcher thread: after a stop signal, wait ``deadline`` seconds (or for a second
    signal), then end the process if it is still there."""
    first = 0
    end = None
    while True:
        timeout = None if end is None else max(0.0, end - time.monotonic())
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            break  # the deadline passed
        signals = [s for s in os.read(fd, 64) if s in watched]
        if not signals:
            continue
        if first:
            break  # a second signal: at once
        first = signals[0]
        end = time.monotonic() + deadline
        if len(signals) > 1:
            break
    if first not in _pending:
        _pending.append(first)
    exit_now(128 + first, f"error: interrupted by {signal.Signals(first).name}")


def _unraisable(previous):
    """A ``sys.unraisablehook`` that ends the process when the signal's exception was raised where
    Python cannot pass it on (a destructor, a callback): it would be lost otherwise."""
    def hook(unraisable):
        exc = unraisable.exc_value
        if isinstance(exc, KeyboardInterrupt) and _pending:
            signum = getattr(exc, "signum", _pending[0])
            exit_now(128 + signum, f"error: interrupted by {signal.Signals(signum).name}")
        previous(unraisable)
    return hook


def at_exit(cleanup) -> int:
    """Register ``cleanup()`` to run if :func:`exit_now` ends the process (a temporary file to
    remove, a child to kill); returns a token for :func:`forget`. Clean-ups must be quick, may
    run on another thread than the one that registered them, and their errors are ignored."""
    _next_token[0] += 1
    _cleanups[_next_token[0]] = cleanup
    return _next_token[0]


def forget(token: int) -> None:
    """Unregister a clean-up of :func:`at_exit` (its job ended normally)."""
    _cleanups.pop(token, None)


def exit_now(code: int, line: str) -> None:
    """End the process now: the clean-ups of :func:`at_exit` (newest first), ``line`` on stderr,
    ``os._exit(code)``. Threads still running (a kernel that cannot be told to stop) end with the
    process. Called by the command line after an :class:`Interrupted` (its buffered output
    flushed first) and by the watcher thread; the first caller wins, later ones wait for the end."""
    _exit_lock.acquire()  # never released: the process ends here
    for token in sorted(_cleanups, reverse=True):
        try:
            _cleanups[token]()
        except BaseException:  # noqa: BLE001 (the process ends anyway)
            pass
    try:
        os.write(2, (line.rstrip("\n") + "\n").encode("utf-8", "replace"))
    except OSError:
        pass
    os._exit(code)


def finish(code) -> None:
    """End the command line's process with ``code`` (as ``sys.exit`` takes it), its output
    flushed, without Python's own finalization: its handlers are no longer ours by then (a
    signal there would end the process silently by its default action, or print a traceback
    from the join of threads), and it only frees what the process's end frees anyway."""
    if code is None:
        code = 0
    elif not isinstance(code, int):
        try:
            sys.stderr.write(f"{code}\n")
        except (OSError, ValueError):
            pass
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (head): nothing more to say
            pass
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    os._exit(code & 0xFF)


@contextmanager
def stop_on_signals():
    """Within the block, the :data:`STOP_SIGNALS` (those not ignored) set a flag that :func:`check` raises.

    A signal that arrived after the block's last :func:`check` is raised as the block ends
    (when it ends without another error), so nothing the block meant to finish counts as
    finished. After :func:`install` the handlers stay and only defer their exception (the
    watcher's deadline still holds); otherwise the block installs its own and puts the previous
    ones back. Outside the main thread the block runs with the handlers as they are.

    Raises
    ------
    Interrupted
        At the end of the block if a signal arrived and was not raised yet.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = None if _state["installed"] else {s: h for s in STOP_SIGNALS
                                                 if (h := signal.getsignal(s)) is not signal.SIG_IGN}
    outer = list(_pending)
    _pending.clear()
    _state["defer"] += 1
    if previous is not None:
        for s in previous:
            signal.signal(s, _handler)
    failed = False
    try:
        yield
    except BaseException:
        failed = True
        raise
    finally:
        _state["defer"] -= 1
        if previous is not None:
            for s, h in previous.items():
                signal.signal(s, h if h is not None else signal.SIG_DFL)
        received = list(_pending)
        # The command line keeps what it received (the process is ending); a Python session not.
        _pending[:] = outer + [s for s in received if s not in outer] if _state["installed"] else outer
        if received and not failed:
            raise Interrupted(received[0])
