"""The ``dobutsu-tb`` command line, one module per command group.

Results go to stdout (text, or ``--json``); progress and logs to stderr. Exit codes: 0 success,
1 an expected error (bad position, missing or corrupt file, ...; one line, no traceback),
2 a usage error, 130 after Ctrl-C (SIGINT), 143 after SIGTERM, 129 after SIGHUP.

:func:`run` is the process's entry (the ``dobutsu-tb`` script, ``python -m
dobutsu_tb.analysis.cli``): it makes SIGINT, SIGTERM and SIGHUP stop the process first
(:func:`~dobutsu_tb.encoding.interrupt.install`), before click, numpy or numba are imported, so
that Ctrl-C in a command's first milliseconds is its ``error:`` line too. This module imports
nothing else: the group :data:`main` (``group.py``) is loaded on first use.
"""

from __future__ import annotations


def run() -> None:
    """The command line's process: signals first, then the group; the process ends with the
    command's exit code (:func:`~dobutsu_tb.encoding.interrupt.finish`)."""
    from dobutsu_tb.encoding import interrupt

    try:
        interrupt.install()  # (a signal while it starts its thread: the handler below)
        try:
            from dobutsu_tb.analysis.cli.group import main

            main(prog_name="dobutsu-tb")
            code = 0
        except SystemExit as exc:
            code = exc.code
        interrupt.finish(code)
    except BaseException as exc:  # a signal that landed where no handler of ours stood (an import)
        if isinstance(exc, KeyboardInterrupt) or interrupt.requested():
            signum = getattr(exc, "signum", interrupt.requested() or 2)
            what = str(exc) if isinstance(exc, interrupt.Interrupted) else "interrupted"
            interrupt.exit_now(128 + signum, f"error: {what}")
        raise


def __getattr__(name):
    """``main`` (the click group), ``LazyGroup`` and ``COMMANDS``, from ``group.py`` when first asked."""
    if name in ("main", "LazyGroup", "COMMANDS"):
        from dobutsu_tb.analysis.cli import group

        return getattr(group, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
