"""Commands that build and read a tablebase: ``build``, ``probe``, ``show``, ``line``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from dobutsu_tb.analysis.cli.common import (
    DEFAULT_TB,
    FILE_OUT,
    PATH,
    picture_file,
    picture_folder,
    png_path,
    refuse_inputs,
    resolve_variant,
    tb_option,
    variant_options,
)
from dobutsu_tb.analysis.pictures import draw_plies
from dobutsu_tb.encoding.words import counted


def default_output(variant, position) -> Path:
    """The file a build writes when ``--out`` is not given: ``dobutsu.h5`` for the standard game's
    start, ``NAME.h5`` for another variant's start, else a name made from the variant and start."""
    from dobutsu_tb.tablebase.game.position import Position

    if position.key() == Position.start(variant).key():
        return Path(DEFAULT_TB if variant.name == "dobutsu" else f"{variant.name}.h5")
    return Path(f"{variant.name}-" + position.text().replace("/", "_") + ".h5")


@click.command()
@click.option("--start", default=None, metavar="POSITION",
              help="Start position (default: the variant's start, S/gle/-c-/-C-/ELG/- for dobutsu).")
@variant_options
@click.option("--out", type=FILE_OUT, default=None,
              help=f"File to write (default: {DEFAULT_TB} for the standard start, NAME.h5 for another variant's "
                   f"start, else a name from the start).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bars or per-ply lines on stderr.")
@click.option("--force", is_flag=True, help="Replace --out even if it is a file other than a dobutsu tablebase.")
@click.option("--max-memory", default=None, metavar="SIZE",
              help="The most memory the build may use, e.g. 20G or 512M (default: what the machine has "
                   "available). The build plans passes to fit it, and refuses at once if it cannot.")
@click.option("--work-dir", type=PATH, default=None,
              help="Where what the build spills to disk when memory is short goes (the analysis's lists, "
                   "terminal positions set aside; default: the output's folder); removed at the end.")
@click.option("--ignore-memory", is_flag=True,
              help="Build even when the estimated memory need exceeds what the machine has available.")
@click.option("--cluster", default=None, metavar="ADDRESS",
              help="Build on a Ray cluster (pip install 'dobutsu-tablebase[cluster]'; docs/cluster.md): 'local' "
                   "starts one on this machine, else the address of a running cluster (HOST:6379, auto, "
                   "ray://HOST:10001).")
@click.option("--workers", default=None, type=click.IntRange(1, 4096), metavar="N",
              help="With --cluster: the workers that share the positions (default 2; with 'local', their threads "
                   "at most twice the CPUs).")
@click.option("--worker-threads", default=None, type=click.IntRange(1, 256), metavar="T",
              help="With --cluster: the threads (and CPUs) of each worker (default: the cluster's CPUs shared).")
def build(start, variant, variant_file, out, max_memory, work_dir, quiet, force, ignore_memory, cluster, workers,
          worker_threads):
    """Enumerate every position reachable from a start, solve them all, write an HDF5 file.

    Prints the counts and the start position's value. The full build from the standard start
    takes a minute or two and about 1.5 GiB of memory (the first build of a board shape compiles
    its kernels first, in about 20 seconds for the standard board; every variant of that shape
    then compiles nothing). The file appears only when complete; Ctrl-C,
    SIGTERM or SIGHUP stops the build (exit code 130, 143 or 129) and leaves nothing behind.
    """
    from dobutsu_tb.analysis.reports import parse_position
    from dobutsu_tb.tablebase.build import build_tablebase
    from dobutsu_tb.tablebase.game.position import Position
    from dobutsu_tb.tablebase.memory import gib, parse_size, total_memory

    budget = None
    if max_memory is not None and ignore_memory:
        raise click.UsageError("--ignore-memory builds without a budget and --max-memory sets one: give one of them")
    if max_memory is not None:
        try:
            budget = parse_size(max_memory)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'--max-memory'") from None
        total = total_memory()
        if cluster is None and total is not None and budget > total:
            raise click.BadParameter(f"{max_memory!r} is more than this machine has ({gib(total)} in all); the "
                                     f"build would be killed before it used it", param_hint="'--max-memory'")
    options = cluster_options(cluster, workers, worker_threads, max_memory=max_memory, work_dir=work_dir,
                              ignore_memory=ignore_memory)
    game = resolve_variant(variant, variant_file)
    position = Position.start(game) if start is None else parse_position(start, game)
    if out is None:
        out = default_output(game, position)
    if variant_file is not None:  # (--force replaces a file that is not a tablebase: never the rules it builds)
        files = sorted(Path(variant_file).glob("*.toml")) if Path(variant_file).is_dir() else [Path(variant_file)]
        for path in files:
            refuse_inputs([out], {"a variant file": path})
    result = build_tablebase(out, position, progress=False if quiet else None, force=force,
                             memory_check=not ignore_memory, variant=game, max_memory=budget, work_dir=work_dir,
                             cluster=options)
    click.echo(result.summary())
    if result.metadata.no_moves:
        click.echo(jh85_line(result.path, result.no_move_keys))


def jh85_line(path, no_move_keys) -> str:
    """The counts of all reachable positions as jh85/dobutsushogi's solver makes them, which
    leaves the positions without a move undecided (:mod:`~dobutsu_tb.analysis.no_moves`)."""
    from dobutsu_tb.analysis.no_moves import jh85_counts
    from dobutsu_tb.tablebase.probe import open_tablebase

    with open_tablebase(path) as tb:
        c = jh85_counts(tb, no_move_keys)
    others = len(c.changes) - len(c.no_moves)
    return (f"with the {counted(len(c.no_moves), 'position')} without a move and the {counted(others, 'value')} "
            f"that hinge on them "
            f"undecided, as jh85's solver leaves them: {c.wins:,} wins, {c.draws:,} draws, {c.losses:,} losses")


def cluster_options(address, workers, worker_threads, **in_process):
    """The :class:`~dobutsu_tb.tablebase.cluster.ClusterOptions` of ``build --cluster`` (None
    without it); usage errors for options that need it or that only an in-process build takes."""
    if address is None:
        for name, value in (("--workers", workers), ("--worker-threads", worker_threads)):
            if value is not None:
                raise click.UsageError(f"{name} needs --cluster")
        return None
    if not address.strip():
        raise click.BadParameter("the address is empty", param_hint="'--cluster'")
    for name, value in in_process.items():
        if value:
            raise click.UsageError(f"--{name.replace('_', '-')} applies to a build in this process, not to --cluster")
    from dobutsu_tb.tablebase.cluster import ClusterOptions, check_address

    try:
        check_address(address.strip())
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--cluster'") from None
    return ClusterOptions(address.strip(), workers or 2, worker_threads)


@click.command()
@click.argument("position")
@tb_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def probe(position, tb_path, as_json):
    """Value of POSITION and of every legal move, best first.

    A position's value is its side to move's, a move's is its player's (docs/rules.md §7): a
    win, draw or loss, with the signed DTM in plies (+n wins in n, -n loses in n), a move's
    counted from the position before it; so the best moves' value is the position's.
    """
    from dobutsu_tb.analysis.reports import move_note, parse_position, probe_json
    from dobutsu_tb.tablebase.game.position import SIDE_NAMES
    from dobutsu_tb.tablebase.probe import open_tablebase
    from dobutsu_tb.tablebase.values import Terminal, describe_value, signed_text

    with open_tablebase(tb_path) as tb:
        pos = parse_position(position, tb.variant)
        if as_json:
            click.echo(json.dumps(probe_json(tb, pos), indent=2))
            return
        wdl, dtm, terminal = tb.value(pos)
        moves = tb.probe_moves(pos)
    side = SIDE_NAMES[pos.turn]
    royal = pos.variant.royal.name
    note = {Terminal.CATCH: f" (it can capture the enemy {royal})",
            Terminal.TRY: f" (the enemy {royal} has reached its far rank safely: the game is over)"}.get(terminal, "")
    click.echo(f"{pos.text()}: {describe_value(wdl, dtm)} for {side}, DTM {signed_text(dtm)}{note}")
    for m in moves:
        if m.wdl is None:  # only after a catch-terminal position, which the tablebase never expands
            click.echo(f"  {m.move:<9} {'unknown':<18}       {move_note(m, royal)}")
            continue
        click.echo(f"  {m.move:<9} {describe_value(m.wdl, m.dtm):<18} {signed_text(m.dtm):>5}  "
                   f"{move_note(m, royal)}".rstrip())


@click.command()
@click.argument("position")
@click.option("--png", "png", type=FILE_OUT, required=True, callback=png_path,
              help="The PNG file to write.")
@variant_options
def show(position, png, variant, variant_file):
    """Draw POSITION into a PNG file (--png): pieces, hands, side to move, coordinates."""
    from dobutsu_tb.analysis.pictures import draw_position
    from dobutsu_tb.analysis.reports import parse_position

    pos = parse_position(position, resolve_variant(variant, variant_file))
    picture_file(png, {})
    draw_position(pos, png)
    click.echo(f"wrote {png}")


@click.command()
@click.argument("position")
@tb_option
@click.option("--max-plies", default=200, show_default=True, type=click.IntRange(min=1),
              help="Stop the line after this many plies (a drawn line stops earlier only where a position "
                   "repeats); the output says so.")
@click.option("--png-dir", type=PATH, default=None,
              help="Also draw the board after every ply into this folder (plyNNN.png, the last ply's "
                   "included; the pictures of an earlier line there are removed).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (no boards drawn in text).")
def line(position, tb_path, max_plies, png_dir, as_json):
    """A perfect-play line from POSITION to the end of the game, move by move with the board."""
    from dobutsu_tb.analysis.reports import parse_position, perfect_line_json
    from dobutsu_tb.tablebase.game.position import SIDE_NAMES
    from dobutsu_tb.tablebase.probe import open_tablebase
    from dobutsu_tb.tablebase.values import Terminal, describe_value, signed_text

    with open_tablebase(tb_path) as tb:
        pos = parse_position(position, tb.variant)
        if png_dir is not None:
            picture_folder(png_dir, {"the tablebase": tb.path})
        if as_json:
            text = json.dumps(perfect_line_json(tb, pos, max_plies), indent=2)
            if png_dir is None:
                click.echo(text)
                return
        wdl, dtm, _ = tb.value(pos)
        pv = tb.principal_variation(pos, max_plies=max_plies)
    plies = [(ply, (pos.turn + ply - 1) % 2, m.move, m.position) for ply, m in enumerate(pv, 1)]
    if png_dir is not None:  # first: a picture that cannot be written (a full disk) is the one line said
        draw_plies(png_dir, pos, plies)
    if as_json:
        click.echo(text)
        return
    royal = pos.variant.royal.name
    click.echo(f"{pos.text()}: {describe_value(wdl, dtm)} for {SIDE_NAMES[pos.turn]}, DTM {signed_text(dtm)}")
    click.echo(pos.diagram())
    for (ply, side, move, _), m in zip(plies, pv):
        mover = SIDE_NAMES[side]
        click.echo(f"\n{ply}. {mover} {move}")
        if m.position is not None:
            click.echo(m.position.diagram())
        if m.terminal == Terminal.ROYAL_CAPTURED:
            click.echo(f"  {mover} captures the {royal} and wins.")
        elif m.terminal == Terminal.TRY:
            click.echo(f"  {mover}'s {royal} has reached the far rank safely and wins.")
    if wdl == 0:
        seen = [pos.text()] + [m.position.text() for m in pv if m.position is not None]
        repeats = len(seen) > 1 and seen[-1] in seen[:-1]
        why = "at --max-plies" if len(pv) == max_plies and not repeats else "where a position repeats"
        click.echo(f"\ndraw: the line stops after {counted(len(pv), 'ply', 'plies')}, {why}")
    elif not pv and pos.game.game_over(pos.state()):
        click.echo(f"\nthe game is already over: the enemy {royal} has reached {SIDE_NAMES[pos.turn]}'s home rank "
                   f"safely")
    elif not pv:
        click.echo(f"\n{SIDE_NAMES[pos.turn]} has no legal move: a loss, as in shogi (docs/rules.md §3)")
    elif not pv[-1].ends_game:
        click.echo(f"\nstopped early: after {len(pv)} of the {abs(dtm)} plies to the end of the game (--max-plies)")


def _rules_said(v) -> list[str]:
    """The ``variants`` listing's words for a variant's options: drops, the try, and each kind
    that cannot be dropped (while others can) or not on some ranks."""
    rules = [("drops" if v.drops else "no drops"), ("try" if v.try_rule else "no try")]
    promoted = {p.promotes_to for p in v.pieces if p.promotes_to}
    for p in v.pieces:
        if v.drops and not p.drop and not p.royal and p.letter not in promoted:  # (drop = false)
            rules.append(f"the {p.name} cannot be dropped (captured, it leaves the game)")
        elif p.drop and p.forbidden_drop_ranks:
            ranks = p.forbidden_drop_ranks
            rules.append(f"no {p.name} drops on rank{'s' if len(ranks) > 1 else ''} "
                         + ", ".join(str(r) for r in ranks) + " from the far side")
    return rules


@click.command()
@click.option("--variant-file", "variant_file", type=PATH, default=None, metavar="PATH",
              help="Also load the variants of a TOML file, or of every *.toml of a folder.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output: each variant's whole description.")
def variants(variant_file, as_json):
    """List the game variants: the shipped ones and those of --variant-file, with their board,
    pieces and start position (docs/variants.md says how to write one)."""
    from dobutsu_tb.tablebase.game.layout import key_width_problem
    from dobutsu_tb.tablebase.game.variant import add_variants, known_variants

    loaded = {v.name for v in add_variants(variant_file)} if variant_file is not None else set()
    found = known_variants()
    if as_json:
        click.echo(json.dumps([v.to_dict() for v in found.values()], indent=2))
        return
    for v in found.values():
        click.echo(f"{v.name}  ({f'loaded from {variant_file}' if v.name in loaded else 'shipped'})\n  {v.title}\n"
                   f"  board: {v.size}; " + "; ".join(_rules_said(v)))
        pieces = ", ".join(f"{p.letter} {p.name}" + (" (royal)" if p.royal else "")
                           + (f" -> {p.promotes_to}" if p.promotes_to else "") for p in v.pieces)
        click.echo(f"  pieces: {pieces}\n  start: {v.start}")
        problem = key_width_problem(v)
        if problem is not None:  # described and drawn, but not built
            click.echo(f"  not buildable: {problem.removeprefix('pieces: ')}")
