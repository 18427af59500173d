"""Stopping long jobs cleanly on SIGINT (Ctrl-C) and SIGTERM.

Python runs a signal handler only between bytecodes of the main thread, so a signal that
arrives while a jitted kernel runs waits until the kernel returns; and a ``KeyboardInterrupt``
raised at an arbitrary bytecode can land inside a library's callback or clean-up code (HDF5's,
a thread pool's) and be lost there. Inside :func:`stop_on_signals` a signal only sets a flag;
long jobs call :func:`check` between kernel calls, batches and chunk writes, and it raises
:class:`Interrupted` at that known place, from which the job's clean-up runs as for any error.
A second signal of the same kind raises at once (an escape hatch for a job stuck without
checks).

>>> with stop_on_signals():                                   # doctest: +SKIP
...     for batch in batches:
...         check()                                           # raises Interrupted after Ctrl-C
...         kernel(batch)
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

#: The signals :func:`stop_on_signals` turns into :class:`Interrupted`.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_pending: list[int] = []  # the signals received inside stop_on_signals and not yet raised


class Interrupted(KeyboardInterrupt):
    """Raised by :func:`check` after SIGINT or SIGTERM.

    Attributes
    ----------
    signum : int
        The signal received.
    exit_code : int
        ``128 + signum``, the shell's convention: 130 for SIGINT, 143 for SIGTERM.
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
    """The signal received inside :func:`stop_on_signals` (0 if none)."""
    return _pending[0] if _pending else 0


def _handler(signum, frame) -> None:
    if signum in _pending:  # the second time: stop now
        raise Interrupted(signum)
    _pending.append(signum)


@contextmanager
def stop_on_signals():
    """Within the block, SIGINT and SIGTERM set a flag that :func:`check` raises.

    The previous handlers come back afterwards. A signal that arrived after the block's last
    :func:`check` is raised as the block ends (when it ends without another error), so nothing
    the block meant to finish counts as finished. Outside the main thread (where Python cannot
    install handlers) the block runs with the handlers as they are.

    Raises
    ------
    Interrupted
        At the end of the block if a signal arrived and was not raised yet.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    outer = list(_pending)
    _pending.clear()
    for s in STOP_SIGNALS:
        signal.signal(s, _handler)
    failed = False
    try:
        yield
    except BaseException:
        failed = True
        raise
    finally:
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
        received = list(_pending)
        _pending[:] = outer
        if received and not failed:
            raise Interrupted(received[0])
