"""The ``dobutsu-tb`` command line.

Results go to stdout (text, or ``--json``); progress and logs to stderr. Exit codes: 0 success,
1 an expected error (bad position, missing or corrupt file, ...; one line, no traceback),
2 a usage error.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

DEFAULT_TB = "dobutsu.h5"


def _expected_errors():
    from encoding.hashtable import HashTableFullError
    from encoding.position import PositionError

    from .generate import StartPositionError
    from .notation import IllegalMoveError
    from .probe import MissingPositionError
    from .storage import TablebaseFileError

    return (PositionError, IllegalMoveError, TablebaseFileError, MissingPositionError,
            HashTableFullError, StartPositionError, OSError)


class _Group(click.Group):
    """Turns the project's expected errors into one line on stderr and exit code 1."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except _expected_errors() as exc:
            msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            click.echo(f"error: {msg}", err=True)
            ctx.exit(1)
        except MemoryError:
            click.echo("error: out of memory", err=True)
            ctx.exit(1)


def _tb_option(f):
    return click.option(
        "--tb", "tb_path", type=click.Path(dir_okay=False, path_type=Path),
        default=lambda: os.environ.get("DOBUTSU_TB", DEFAULT_TB), show_default=f"$DOBUTSU_TB or {DEFAULT_TB}",
        help="Tablebase file to read.")(f)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dobutsu-tablebase")
def main():
    """Build and probe the dobutsu shogi endgame tablebase.

    Positions are written as in SPEC §1.6, e.g. the start position S/gle/-c-/-C-/ELG/-
    (side to move, ranks 1 to 4 from files a to c, pieces in hand; upper case Sente).
    """


@main.command()
@click.option("--start", default=None, metavar="POSITION",
              help="Start position (default: the standard start S/gle/-c-/-C-/ELG/-).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help=f"File to write (default: {DEFAULT_TB} for the standard start, else a name from the start).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bars or per-ply lines on stderr.")
def build(start, out, quiet):
    """Enumerate every position reachable from a start, solve them all, write an HDF5 file.

    Prints the counts and the start position's value. The full build from the standard start
    takes a few minutes and about 4 GiB of memory.
    """
    import signal

    from encoding.position import Position

    from .build import build_tablebase

    # Stop on SIGTERM as on Ctrl-C: the partial output file is removed on the way out.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    position = Position.start() if start is None else Position.from_text(start)
    if out is None:
        out = Path(DEFAULT_TB if start is None or position.key() == Position.start().key()
                   else "dobutsu-" + position.text().replace("/", "_") + ".h5")
    result = build_tablebase(out, position, progress=False if quiet else None)
    click.echo(result.summary())


def _move_json(mv):
    from .values import WDL_NAMES

    return {"move": mv.move, "position": mv.position.text() if mv.position else None,
            "category": WDL_NAMES[mv.wdl], "dtm": mv.dtm, "terminal": mv.terminal}


@main.command()
@click.argument("position")
@_tb_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def probe(position, tb_path, as_json):
    """Value of POSITION, its DTM and every move with its value, best first.

    As in the Lichess tablebase API, each move's category and DTM are those of the position
    after it, for the side then to move: a move to a 'loss' wins.
    """
    from encoding.position import Position

    from .build import describe_value
    from .probe import open_tablebase
    from .values import WDL_NAMES

    pos = Position.from_text(position)
    with open_tablebase(tb_path) as tb:
        wdl, dtm, terminal = tb._value(pos)
        moves = tb.probe_moves(pos)
    from .values import signed_dtm

    if as_json:
        click.echo(json.dumps({"position": pos.text(), "category": WDL_NAMES[wdl],
                               "dtm": signed_dtm(wdl, dtm), "terminal": terminal,
                               "moves": [_move_json(m) for m in moves]}, indent=2))
        return
    side = ("Sente", "Gote")[pos.turn]
    note = {"catch": " (it can capture the enemy lion)",
            "try": " (the enemy lion has reached its home rank: the game is over)"}.get(terminal, "")
    click.echo(f"{pos.text()}: {describe_value(wdl, dtm)} for {side}{note}")
    for m in moves:
        mover = -m.wdl
        total = abs(m.dtm) + 1 if m.wdl != 0 else 0
        if m.terminal == "lion captured":
            mover, total = 1, 1
        click.echo(f"  {m.move:<9} {describe_value(mover, total):<18} (then {WDL_NAMES[m.wdl]}, DTM {m.dtm:+d})")


@main.command()
@click.argument("position")
@_tb_option
@click.option("--max-plies", default=200, show_default=True, help="Stop a drawn line after this many plies.")
def line(position, tb_path, max_plies):
    """A perfect-play line from POSITION to the end of the game, move by move with the board."""
    from encoding.position import Position

    from .build import describe_value
    from .probe import open_tablebase

    pos = Position.from_text(position)
    with open_tablebase(tb_path) as tb:
        wdl, dtm, _ = tb._value(pos)
        pv = tb.principal_variation(pos, max_plies=max_plies)
    side = ("Sente", "Gote")[pos.turn]
    click.echo(f"{pos.text()}: {describe_value(wdl, dtm)} for {side}")
    click.echo(pos.diagram())
    for ply, m in enumerate(pv, 1):
        mover = ("Sente", "Gote")[(pos.turn + ply - 1) % 2]
        click.echo(f"\n{ply}. {mover} {m.move}")
        if m.position is not None:
            click.echo(m.position.diagram())
        if m.terminal == "lion captured":
            click.echo(f"  {mover} captures the lion and wins.")
        elif m.terminal == "try":
            click.echo(f"  {mover}'s lion has reached the far rank safely and wins.")
    if wdl == 0:
        click.echo(f"\ndraw: the line stops after {len(pv)} plies")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
