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
    from dobutsu_tb.analysis.textfiles import InputFileError
    from dobutsu_tb.encoding.compact_layout import CompactTableFullError
    from dobutsu_tb.encoding.hashtable import HashTableFullError
    from dobutsu_tb.tablebase.enumeration import StartPositionError
    from dobutsu_tb.tablebase.game.notation import IllegalMoveError
    from dobutsu_tb.tablebase.game.position import PositionError
    from dobutsu_tb.tablebase.game.variant import VariantError
    from dobutsu_tb.tablebase.probe import MissingPositionError
    from dobutsu_tb.tablebase.schema import TablebaseFileError

    return (PositionError, IllegalMoveError, VariantError, TablebaseFileError, MissingPositionError,
            HashTableFullError, CompactTableFullError, StartPositionError, PuzzleInputError, InputFileError,
            OSError)


#: Environment variables read as whole numbers (numba reads them at import: a bad value is a
#: ValueError traceback or a warning there), with the smallest and largest value allowed.
NUMERIC_ENVIRONMENT = {"NUMBA_NUM_THREADS": (1, None), "NUMBA_DISABLE_JIT": (0, 1), "NUMBA_BOUNDSCHECK": (0, 1)}


def environment_problem() -> str | None:
    """What is wrong with the environment variables the commands read, or None.

    ``$NUMBA_NUM_THREADS`` must be a whole number from 1 to
    :data:`~dobutsu_tb.encoding.config.MAX_THREADS`, ``$NUMBA_DISABLE_JIT`` and
    ``$NUMBA_BOUNDSCHECK`` 0 or 1; ``$DOBUTSU_TB``, when set, must not be empty.
    """
    from dobutsu_tb.encoding.config import MAX_THREADS

    for name, (low, high) in NUMERIC_ENVIRONMENT.items():
        value = os.environ.get(name)
        if value is None:
            continue
        high = MAX_THREADS if high is None else high
        if not (value.isascii() and value.strip().isdigit() and low <= int(value) <= high):
            return f"${name} is {value[:20]!r}; it must be a whole number from {low} to {high}"
    if os.environ.get("DOBUTSU_TB") == "":
        return "$DOBUTSU_TB is set but empty; unset it or name a tablebase file"
    return None


def error_message(exc: BaseException) -> str:
    """The one-line message of an expected error: a ``KeyError``'s text without quotes, an
    ``OSError`` as ``file: reason``, the lines of a longer message joined."""
    if isinstance(exc, KeyError) and exc.args:
        msg = str(exc.args[0])
    elif isinstance(exc, OSError) and exc.strerror and exc.filename is not None:
        msg = f"{exc.filename}: {exc.strerror}"
    else:
        msg = str(exc)
    return "; ".join(part.strip() for part in msg.splitlines() if part.strip())


class ErrorHandlingGroup(click.Group):
    """Turns the project's expected errors into one line on stderr and exit code 1."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """click's ``main``, but Ctrl-C while the command line is read or a command's module is
        imported is ``error: interrupted`` and exit code 130, as during a command (not click's
        ``Aborted!`` and exit code 1)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except (click.exceptions.Abort, KeyboardInterrupt):
            click.echo("error: interrupted", err=True)
            sys.exit(130)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx):
        problem = environment_problem()
        if problem is not None:
            click.echo(f"error: {problem}", err=True)
            ctx.exit(1)
        try:
            return super().invoke(ctx)
        except BrokenPipeError:  # output piped into a program that stopped reading (head)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(0)
        except expected_errors() as exc:
            click.echo(f"error: {error_message(exc)}", err=True)
            ctx.exit(1)
        except MemoryError as exc:
            click.echo(f"error: {exc or 'out of memory'}", err=True)
            ctx.exit(1)
        except KeyboardInterrupt as exc:  # Interrupted: SIGINT or SIGTERM, after the job cleaned up
            click.echo(f"error: {str(exc) or 'interrupted'}", err=True)
            ctx.exit(getattr(exc, "exit_code", 130))


def png_path(ctx, param, value):
    """Click callback: a picture's path must end in ``.png`` (matplotlib picks the format by it)."""
    if value is not None and value.suffix.lower() != ".png":
        raise click.BadParameter(f"{str(value)[:80]!r} does not end in .png")
    return value


def tb_option(f):
    """The ``--tb PATH`` option (default: :func:`default_tb`), passed as ``tb_path``."""
    return click.option(
        "--tb", "tb_path", type=click.Path(dir_okay=False, path_type=Path),
        default=default_tb, show_default=f"$DOBUTSU_TB or {DEFAULT_TB}",
        help="Tablebase file to read.")(f)


def variant_options(f):
    """``--variant NAME`` and ``--variant-file PATH`` (a TOML file or a folder of them, loaded
    first so that ``--variant`` can name its variants), passed as ``variant`` and
    ``variant_file``; resolve them with :func:`resolve_variant`."""
    f = click.option("--variant-file", "variant_file", type=click.Path(path_type=Path), default=None,
                     metavar="PATH", help="Load variants from a TOML file, or from every *.toml of a folder "
                                          "(docs/variants.md).")(f)
    return click.option("--variant", "variant", default=None, metavar="NAME",
                        help="The game variant (default: dobutsu, or the variant of --variant-file when it "
                             "holds one); 'dobutsu-tb variants' lists them.")(f)


def resolve_variant(name: str | None, variant_file: Path | None):
    """The variant of ``--variant``/``--variant-file``: the named one (shipped, or loaded from the
    file), the file's only variant, or dobutsu shogi.

    Raises
    ------
    VariantError
        For an unknown name, a bad file, or a file of several variants without ``--variant``.
    """
    from dobutsu_tb.tablebase.game.variant import VariantError, add_variants, get_variant, standard_variant

    loaded = add_variants(variant_file) if variant_file is not None else []
    if name is not None:
        return get_variant(name)
    if len(loaded) == 1:
        return loaded[0]
    if len(loaded) > 1:
        raise VariantError(f"{variant_file} holds {len(loaded)} variants "
                           f"({', '.join(v.name for v in loaded)}): name one with --variant")
    return standard_variant()
