"""The thread pool of the search drivers: one Python thread per share of the work.

The kernels are compiled with ``nogil=True`` (:mod:`dobutsu_tb.encoding.jit`), so threads that
call them run at the same time; the pool only starts them, waits for them and passes on the
first exception. The calling thread only waits, even for a single share, so that a signal
handler can run meanwhile (a kernel on the main thread would keep Ctrl-C waiting until it
returns): an exception there (:class:`~dobutsu_tb.encoding.interrupt.Interrupted`) asks the
shares to stop and goes on.
"""

from __future__ import annotations

import threading

#: Seconds the shares get to return after being asked to stop.
STOP_WAIT = 0.25


def run_threads(work, n: int, stop=None) -> list:
    """Call ``work(k)`` for k = 0 .. n - 1, each on its own thread, and wait for all of them.

    Parameters
    ----------
    work : callable
        ``work(k)``: one share of the work (typically a jitted kernel that releases the GIL).
    n : int
        Number of shares and threads.
    stop : callable, optional
        Asks every share to return soon (sets a flag the kernels poll); called when the wait is
        cut short by an exception in the calling thread (Ctrl-C), which is then raised again
        once the shares returned or :data:`STOP_WAIT` seconds passed. The threads are daemon
        threads: one that does not stop does not keep the process alive.

    Returns
    -------
    list
        ``work(k)``'s answer for each k, in order.

    Raises
    ------
    ValueError
        If ``n`` is less than 1.
    Exception
        The first exception a share raised (after every thread has finished), or the calling
        thread's own (a signal's).
    """
    if n < 1:
        raise ValueError(f"the number of threads must be >= 1, got {n}")
    answers: list = [None] * n
    errors: list = []

    def run(k):
        try:
            answers[k] = work(k)
        except BaseException as exc:  # handed to the caller below
            errors.append(exc)

    pool = [threading.Thread(target=run, args=(k,), daemon=True, name=f"share-{k}") for k in range(n)]
    try:
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()  # interruptible: a signal handler's exception comes out here
    except BaseException:
        if stop is not None:
            stop()
        import time

        deadline = time.monotonic() + STOP_WAIT
        for thread in pool:
            if thread.ident is not None:
                thread.join(max(0.0, deadline - time.monotonic()))
        raise
    if errors:
        raise errors[0]
    return answers
