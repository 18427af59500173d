"""Commands that build and read a tablebase: ``build``, ``probe``, ``show``, ``line``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from dobutsu_tb.analysis.cli.common import DEFAULT_TB, PATH, picture_file, picture_folder, png_path, tb_option
from dobutsu_tb.analysis.pictures import draw_plies


@click.command()
@click.option("--start", default=None, metavar="POSITION",
              help="Start position (default: the standard start S/gle/-c-/-C-/ELG/-).")
@click.option("--out", type=PATH, default=None,
              help=f"File to write (default: {DEFAULT_TB} for the standard start, else a name from the start).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bars or per-ply lines on stderr.")
@click.option("--force", is_flag=True, help="Replace --out even if it is a file other than a dobutsu tablebase.")
@click.option("--ignore-memory", is_flag=True,
              help="Build even when the estimated memory need exceeds what the machine has available.")
def build(start, out, quiet, force, ignore_memory):
    """Enumerate every position reachable from a start, solve them all, write an HDF5 file.

    Prints the counts and the start position's value. The full build from the standard start
    takes a few minutes and about 2 GiB of memory. The file appears only when complete; Ctrl-C
    or SIGTERM stops the build (exit code 130 or 143) and leaves nothing behind.
    """
    from dobutsu_tb.analysis.reports import parse_position
    from dobutsu_tb.tablebase.build import build_tablebase
    from dobutsu_tb.tablebase.game.position import Position

    position = Position.start() if start is None else parse_position(start)
    if out is None:
        out = Path(DEFAULT_TB if start is None or position.key() == Position.start().key()
                   else "dobutsu-" + position.text().replace("/", "_") + ".h5")
    result = build_tablebase(out, position, progress=False if quiet else None, force=force,
                             memory_check=not ignore_memory)
    click.echo(result.summary())


@click.command()
@click.argument("position")
@tb_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def probe(position, tb_path, as_json):
    """Value of POSITION, its DTM and every move with its value, best first.

    As in the Lichess tablebase API, each move's category and DTM are those of the position
    after it, for the side then to move: a move to a 'loss' wins.
    """
    from dobutsu_tb.analysis.lines import mover_value
    from dobutsu_tb.analysis.reports import parse_position, probe_json
    from dobutsu_tb.tablebase.game.position import SIDE_NAMES
    from dobutsu_tb.tablebase.probe import open_tablebase
    from dobutsu_tb.tablebase.values import WDL_NAMES, describe_value

    pos = parse_position(position)
    with open_tablebase(tb_path) as tb:
        if as_json:
            click.echo(json.dumps(probe_json(tb, pos), indent=2))
            return
        wdl, dtm, terminal = tb.value(pos)
        moves = tb.probe_moves(pos)
    side = SIDE_NAMES[pos.turn]
    note = {"catch": " (it can capture the enemy lion)",
            "try": " (the enemy lion has reached its home rank: the game is over)"}.get(terminal, "")
    click.echo(f"{pos.text()}: {describe_value(wdl, dtm)} for {side}{note}")
    for m in moves:
        if m.wdl is None:  # only after a catch-terminal position, which the tablebase never expands
            click.echo(f"  {m.move:<9} {'unknown':<18} (not in this tablebase)")
            continue
        if m.terminal == "lion captured":
            click.echo(f"  {m.move:<9} {describe_value(*mover_value(m)):<18} (captures the lion)")
            continue
        click.echo(f"  {m.move:<9} {describe_value(*mover_value(m)):<18} (then {WDL_NAMES[m.wdl]}, DTM {m.dtm:+d})")


@click.command()
@click.argument("position")
@click.option("--png", "png", type=PATH, required=True, callback=png_path,
              help="The PNG file to write.")
def show(position, png):
    """Draw POSITION (pieces, hands, side to move, coordinates) into a PNG file."""
    from dobutsu_tb.analysis.pictures import draw_position
    from dobutsu_tb.analysis.reports import parse_position

    pos = parse_position(position)
    picture_file(png, {})
    draw_position(pos, png)
    click.echo(f"wrote {png}")


@click.command()
@click.argument("position")
@tb_option
@click.option("--max-plies", default=200, show_default=True, type=click.IntRange(min=1),
              help="Stop the line after this many plies (a drawn line goes on for ever); the output says so.")
@click.option("--png-dir", type=PATH, default=None,
              help="Also draw the board after every ply into this folder (plyNNN.png, the last ply's "
                   "included; the pictures of an earlier line there are removed).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (no pictures).")
def line(position, tb_path, max_plies, png_dir, as_json):
    """A perfect-play line from POSITION to the end of the game, move by move with the board."""
    from dobutsu_tb.analysis.reports import parse_position, perfect_line_json
    from dobutsu_tb.tablebase.game.position import SIDE_NAMES
    from dobutsu_tb.tablebase.probe import open_tablebase
    from dobutsu_tb.tablebase.values import describe_value

    pos = parse_position(position)
    with open_tablebase(tb_path) as tb:
        if as_json:
            click.echo(json.dumps(perfect_line_json(tb, pos, max_plies), indent=2))
            return
        if png_dir is not None:
            picture_folder(png_dir, {"the tablebase": tb.path})
        wdl, dtm, _ = tb.value(pos)
        pv = tb.principal_variation(pos, max_plies=max_plies)
    click.echo(f"{pos.text()}: {describe_value(wdl, dtm)} for {SIDE_NAMES[pos.turn]}")
    click.echo(pos.diagram())
    plies = [(ply, (pos.turn + ply - 1) % 2, m.move, m.position) for ply, m in enumerate(pv, 1)]
    for (ply, side, move, _), m in zip(plies, pv):
        mover = SIDE_NAMES[side]
        click.echo(f"\n{ply}. {mover} {move}")
        if m.position is not None:
            click.echo(m.position.diagram())
        if m.terminal == "lion captured":
            click.echo(f"  {mover} captures the lion and wins.")
        elif m.terminal == "try":
            click.echo(f"  {mover}'s lion has reached the far rank safely and wins.")
    if wdl == 0:
        click.echo(f"\ndraw: the line stops after {len(pv)} plies")
    elif not pv:
        click.echo(f"\nthe game is already over: the enemy lion has reached {SIDE_NAMES[pos.turn]}'s home rank")
    elif pv[-1].terminal not in ("lion captured", "try"):
        click.echo(f"\nstopped early: after {len(pv)} of the {dtm} plies to the end of the game (--max-plies)")
    if png_dir is not None:
        draw_plies(png_dir, pos, plies)
