"""What every command shares: the error handling of the group, the default tablebase, ``--tb``,
paths, and never writing over an input.

Exit codes: 0 success; 1 bad data: what the command line names is wrong (a file missing, a
folder, too large, damaged or malformed, a position that is malformed or not covered, an illegal
move, an output that is one of the inputs; one line on stderr starting with ``error:``, no
traceback); 2 bad usage: the command line itself is (an unknown option, a missing argument, a
value of the wrong form or out of its range, options that exclude each other, an environment
variable of the wrong form; click's ``Error:`` line); 130 after SIGINT, 143 after SIGTERM, 129 after SIGHUP.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import click

#: The tablebase file a command reads when neither ``--tb`` nor ``$DOBUTSU_TB`` names one.
DEFAULT_TB = "dobutsu.h5"


def default_tb() -> Path:
    """The tablebase file used when none is named: ``$DOBUTSU_TB`` or ``dobutsu.h5``."""
    return Path(os.environ.get("DOBUTSU_TB", DEFAULT_TB))


class PathType(click.ParamType):
    """A path on the command line, checked for its form only (not empty, no NUL character):
    whether it exists, is a file or a folder, is the command's to say (exit code 1), as for
    the same path given by an environment variable."""

    name = "path"

    def __init__(self, file: bool = False):
        self.file = file

    def convert(self, value, param, ctx):
        if isinstance(value, Path):
            return value
        if not value:
            self.fail("the path is empty", param, ctx)
        if "\0" in value:
            self.fail("the path holds a NUL character", param, ctx)
        if self.file and value.endswith(("/", os.sep)):
            self.fail(f"{value[:80]!r} ends with '/': give the name of a file, not of a folder", param, ctx)
        return Path(value)


#: The type of every path option and argument.
PATH = PathType()
#: The type of a file to write (``build --out``, ``--png``): a path that ends with '/' names a
#: folder, never the file (``Path`` would drop the '/').
FILE_OUT = PathType(file=True)


def same_file(a, b) -> bool:
    """Whether two paths name the same existing file (however named: links, ``..``, hard links)."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def refuse_inputs(outputs, inputs: dict) -> None:
    """Refuse to write over a file the command reads.

    Parameters
    ----------
    outputs : iterable of Path
        Files the command would write or replace.
    inputs : dict of str to Path or None
        What each input is ("the tablebase") and its path.

    Raises
    ------
    dobutsu_tb.tablebase.output.OutputError
        If an output is an input (the same file, however named).
    """
    from dobutsu_tb.tablebase.output import OutputError

    for out in outputs:
        for what, path in inputs.items():
            if path is not None and same_file(out, path):
                raise OutputError(f"{out} is {what} this command reads ({path}): not writing over it; "
                                  f"name another file")

#: The exception types that the commands turn into one ``error:`` line and exit code 1, by the
#: module that defines each.
EXPECTED_ERRORS = (("dobutsu_tb.tablebase.game.position", "PositionError"),
                   ("dobutsu_tb.tablebase.game.notation", "IllegalMoveError"),
                   ("dobutsu_tb.tablebase.game.variant", "VariantError"),
                   ("dobutsu_tb.tablebase.schema", "TablebaseFileError"),
                   ("dobutsu_tb.tablebase.probe", "MissingPositionError"),
                   ("dobutsu_tb.encoding.hashtable", "HashTableFullError"),
                   ("dobutsu_tb.encoding.compact_layout", "CompactTableFullError"),
                   ("dobutsu_tb.tablebase.enumeration", "StartPositionError"),
                   ("dobutsu_tb.tablebase.export", "ExportError"),
                   ("dobutsu_tb.tablebase.cluster", "ClusterError"),
                   ("dobutsu_tb.analysis.puzzles", "PuzzleInputError"),
                   ("dobutsu_tb.analysis.textfiles", "InputFileError"),
                   ("dobutsu_tb.encoding.binding", "SourceChangedError"))


def expected_errors() -> tuple:
    """The exception types of :data:`EXPECTED_ERRORS` whose modules are loaded (an exception of
    a module never loaded cannot have been raised: so an error path imports nothing, numba
    above all), and ``OSError``."""
    return tuple(getattr(sys.modules[module], name) for module, name in EXPECTED_ERRORS
                 if module in sys.modules) + (OSError,)


#: Environment variables read as whole numbers (numba reads them at import: a bad value is a
#: ValueError traceback or a warning there), with the smallest and largest value allowed. A value
#: of the wrong form is a usage error (exit code 2), as the same mistake in an option is.
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
    if "\0" in os.environ.get("DOBUTSU_TB", ""):
        return "$DOBUTSU_TB holds a NUL character"
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
    return "; ".join(part.strip() for part in msg.splitlines() if part.strip()) or type(exc).__name__


def interrupted(exc: BaseException | None = None) -> None:
    """End the command after SIGINT, SIGTERM or SIGHUP (``exc``: the :class:`Interrupted`, a plain
    ``KeyboardInterrupt``, or whatever a signal made fail): one ``error: interrupted ...`` line,
    exit code 130, 143 or 129. In the command line's process (:func:`~dobutsu_tb.encoding.interrupt.install`)
    the process ends at once (:func:`~dobutsu_tb.encoding.interrupt.exit_now`), whatever threads
    still run; in-process (the tests) it raises ``SystemExit``."""
    from dobutsu_tb.encoding import interrupt

    signum = getattr(exc, "signum", None) or interrupt.requested() or 2
    message = str(exc) if isinstance(exc, interrupt.Interrupted) and str(exc) else (
        f"interrupted by {signal_name(signum)}")
    if interrupt.installed():
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        interrupt.exit_now(128 + signum, f"error: {message}")
    click.echo(f"error: {message}", err=True)
    sys.exit(128 + signum)


def signal_name(signum: int) -> str:
    """``SIGINT`` for 2, ``SIGTERM`` for 15."""
    import signal

    return signal.Signals(signum).name


def _signalled() -> bool:
    from dobutsu_tb.encoding import interrupt

    return bool(interrupt.requested())


class ErrorHandlingGroup(click.Group):
    """Turns the project's expected errors into one line on stderr and exit code 1, and signals
    into one line and exit code 130 or 143 (:func:`interrupted`)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """click's ``main``, but Ctrl-C while the command line is read or a command's module is
        imported is ``error: interrupted`` and exit code 130, as during a command (not click's
        ``Aborted!`` and exit code 1)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except (click.exceptions.Abort, KeyboardInterrupt) as exc:
            interrupted(exc if isinstance(exc, KeyboardInterrupt) else exc.__context__)
        except click.ClickException as exc:
            if _signalled():
                interrupted(exc)
            exc.show()
            sys.exit(exc.exit_code)
        sys.exit(code if isinstance(code, int) else 0)

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent, **extra)
        except KeyboardInterrupt as exc:  # before click's own handler (a blank line, then "Aborted!")
            interrupted(exc)

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except KeyboardInterrupt as exc:  # before click's own handler (a blank line, then "Aborted!")
            interrupted(exc)

    def invoke(self, ctx):
        try:
            problem = environment_problem()
        except KeyboardInterrupt as exc:  # a signal in the first milliseconds: no blank line of click's first
            interrupted(exc)
        if problem is not None:
            raise click.UsageError(problem, ctx)
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException):
            raise
        except KeyboardInterrupt as exc:  # Interrupted: SIGINT or SIGTERM, after the job cleaned up
            interrupted(exc)
        except BrokenPipeError:  # output piped into a program that stopped reading (head)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(0)
        except expected_errors() as exc:
            if _signalled():
                interrupted(exc)
            click.echo(f"error: {error_message(exc)}", err=True)
            ctx.exit(1)
        except MemoryError as exc:
            click.echo(f"error: {str(exc) or 'out of memory'}", err=True)
            ctx.exit(1)
        except Exception as exc:
            if _signalled():  # whatever a signal made fail (an import cut short)
                interrupted(exc)
            raise


def picture_folder(folder: Path, inputs: dict) -> None:
    """Make ``folder`` ready for the pictures of a line (``--png-dir``), before any output: make it
    (an error now, not after the line was printed), refuse a file of that name and pictures of an
    earlier run that are inputs of this one, then remove those pictures
    (:func:`~dobutsu_tb.analysis.pictures.clear_pictures`), so that none is left behind.

    Raises
    ------
    dobutsu_tb.tablebase.output.OutputError
        If ``folder`` is a file or cannot be made, or holds an input under a picture's name.
    OSError
        If an old picture cannot be removed.
    """
    from dobutsu_tb.analysis.pictures import clear_pictures, pictures_in
    from dobutsu_tb.tablebase.output import OutputError, describe_os_error

    if folder.exists() and not folder.is_dir():
        raise OutputError(f"{folder} is a file, not a folder for the pictures")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot make the folder {folder} for the pictures ({describe_os_error(exc)})") from None
    refuse_inputs(pictures_in(folder), inputs)
    clear_pictures(folder)


def picture_file(path: Path, inputs: dict) -> None:
    """Refuse a picture's path (``--png``, ``--plot``) that is a folder or one of the inputs.

    Raises
    ------
    dobutsu_tb.tablebase.output.OutputError
    """
    from dobutsu_tb.tablebase.output import OutputError, describe_os_error, folder_error

    if path.is_dir():
        raise OutputError(f"{path} is a folder; name a .png file")
    if not path.parent.is_dir():  # said before any work
        raise folder_error(path.parent)
    refuse_inputs([path], inputs)
    try:  # a folder the user may not write to (or /proc, /sys): said before the work too
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".dobutsu-tb-", suffix=".png"):
            pass
    except OSError as exc:
        raise OutputError(f"cannot write {path} ({describe_os_error(exc)})") from None


def png_path(ctx, param, value):
    """Click callback: a picture's path must end in ``.png`` (matplotlib picks the format by it)."""
    if value is not None and value.suffix.lower() != ".png":
        raise click.BadParameter(f"{str(value)[:80]!r} does not end in .png")
    return value


def tb_option(f):
    """The ``--tb PATH`` option (default: :func:`default_tb`), passed as ``tb_path``."""
    return click.option(
        "--tb", "tb_path", type=PATH,
        default=default_tb, show_default=f"$DOBUTSU_TB or {DEFAULT_TB}",
        help="Tablebase file to read.")(f)


def tb_file(ctx: click.Context, legacy: Path | None, tb_path: Path) -> Path:
    """The tablebase file of a command that used to take it as a positional argument (``verify``,
    ``stats``): ``--tb``'s, or the deprecated positional one's with a note on stderr.

    Raises
    ------
    click.UsageError
        If both are given.
    """
    if legacy is None:
        return tb_path
    if ctx.get_parameter_source("tb_path") is not click.core.ParameterSource.DEFAULT:
        raise click.UsageError("give the tablebase file once, with --tb (the positional FILE is deprecated)", ctx)
    click.echo(f"warning: 'dobutsu-tb {ctx.info_name} FILE' is deprecated; write 'dobutsu-tb {ctx.info_name} "
               f"--tb FILE'", err=True)
    return legacy


def variant_options(f):
    """``--variant NAME`` and ``--variant-file PATH`` (a TOML file or a folder of them, loaded
    first so that ``--variant`` can name its variants), passed as ``variant`` and
    ``variant_file``; resolve them with :func:`resolve_variant`."""
    f = click.option("--variant-file", "variant_file", type=PATH, default=None,
                     metavar="PATH", help="Load variants from a TOML file, or from every *.toml of a folder "
                                          "(docs/variants.md).")(f)
    return click.option("--variant", "variant", default=None, metavar="NAME",
                        help="The game variant (default: dobutsu, or the variant of --variant-file when it "
                             "holds one); 'dobutsu-tb variants' lists them.")(f)


def variant_rules(variant) -> dict:
    """A variant's rules: its description less its title and prose (two files of the same rules
    are of one game, whatever their names say)."""
    return {k: v for k, v in variant.to_dict().items() if k not in ("title", "description")}


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
