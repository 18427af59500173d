"""The thread pool of the search drivers: one Python thread per share of the work.

The kernels are compiled with ``nogil=True`` (:mod:`dobutsu_tb.encoding.jit`), so threads that
call them run at the same time; the pool only starts them, waits for them and passes on the
first exception.
"""

from __future__ import annotations

import threading


def run_threads(work, n: int) -> list:
    """Call ``work(k)`` for k = 0 .. n - 1, each on its own thread, and wait for all of them.

    Parameters
    ----------
    work : callable
        ``work(k)``: one share of the work (typically a jitted kernel that releases the GIL).
    n : int
        Number of shares and threads; with 1, ``work(0)`` runs on the calling thread.

    Returns
    -------
    list
        ``work(k)``'s answer for each k, in order.

    Raises
    ------
    ValueError
        If ``n`` is less than 1.
    Exception
        The first exception a share raised (after every thread has finished).
    """
    if n < 1:
        raise ValueError(f"the number of threads must be >= 1, got {n}")
    if n == 1:
        return [work(0)]
    answers: list = [None] * n
    errors: list = []

    def run(k):
        try:
            answers[k] = work(k)
        except BaseException as exc:  # handed to the caller below
            errors.append(exc)

    pool = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    if errors:
        raise errors[0]
    return answers
