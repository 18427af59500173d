"""What every command shares: the error handling of the group, the default tablebase, ``--tb``.

Exit codes: 0 success, 1 an expected error (bad position, missing or corrupt file, ...; one line
on stderr starting with ``error:``, no traceback), 2 a usage error (click's).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

#: The tablebase file a command reads when neither ``--tb`` nor ``$DOBUTSU_TB`` names one.
DEFAULT_TB = "dobutsu.h5"


def default_tb() -> Path:
    """The tablebase file used when none is named: ``$DOBUTSU_TB`` or ``dobutsu.h5``."""
    return Path(os.environ.get("DOBUTSU_TB", DEFAULT_TB))

def expected_errors() -> tuple:
    """The exception types that the commands turn into one ``error:`` line and exit code 1."""
    from dobutsu_tb.analysis.puzzles import PuzzleInputError
    from dobutsu_tb.encoding.compact_layout import CompactTableFullError
    from dobutsu_tb.encoding.hashtable import HashTableFullError
    from dobutsu_tb.tablebase.enumeration import StartPositionError
    from dobutsu_tb.tablebase.game.notation import IllegalMoveError
    from dobutsu_tb.tablebase.game.position import PositionError
    from dobutsu_tb.tablebase.probe import MissingPositionError
    from dobutsu_tb.tablebase.schema import TablebaseFileError

    return (PositionError, IllegalMoveError, TablebaseFileError, MissingPositionError,
            HashTableFullError, CompactTableFullError, StartPositionError, PuzzleInputError, OSError)


class ErrorHandlingGroup(click.Group):
    """Turns the project's expected errors into one line on stderr and exit code 1."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:  # output piped into a program that stopped reading (head)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(0)
        except expected_errors() as exc:
            msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            click.echo(f"error: {msg}", err=True)
            ctx.exit(1)
        except MemoryError as exc:
            click.echo(f"error: {exc or 'out of memory'}", err=True)
            ctx.exit(1)
        except KeyboardInterrupt as exc:  # Interrupted: SIGINT or SIGTERM, after the job cleaned up
            click.echo(f"error: {exc or 'interrupted'}", err=True)
            ctx.exit(getattr(exc, "exit_code", 130))


def tb_option(f):
    """The ``--tb PATH`` option (default: :func:`default_tb`), passed as ``tb_path``."""
    return click.option(
        "--tb", "tb_path", type=click.Path(dir_okay=False, path_type=Path),
        default=default_tb, show_default=f"$DOBUTSU_TB or {DEFAULT_TB}",
        help="Tablebase file to read.")(f)
