"""Commands that check lines and files: ``verify-line``, ``verify``, ``stats``."""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path

import click

from dobutsu_tb.analysis.cli.common import (
    FILE_OUT,
    PATH,
    default_tb,
    picture_file,
    picture_folder,
    png_path,
    resolve_variant,
    tb_file,
    tb_option,
    variant_options,
)
from dobutsu_tb.analysis.pictures import draw_plies
from dobutsu_tb.encoding.words import counted

#: Said of damage in a tablebase that ``verify-line`` built into the cache for its start.
_REBUILD_HINT = "(a tablebase this command built for its start: delete it, and the next run builds it again)"


def _tablebase_for(start_text: str | None, tb_path: Path | None, variant, variant_given: bool = False):
    """A tablebase and the start position (``start_text``, or the variant's start) it covers: the
    given file (whose variant reads the start), else ``$DOBUTSU_TB``/``dobutsu.h5`` if it is of the
    variant and covers the start, else one built for that start in the cache folder (reused next
    time). Commands run at once share that build: the others wait for it (saying so) and then
    use it."""
    from dobutsu_tb.analysis.reports import parse_position
    from dobutsu_tb.encoding.jit import cache_root
    from dobutsu_tb.tablebase.build import build_tablebase
    from dobutsu_tb.tablebase.game.position import Position
    from dobutsu_tb.tablebase.output import OutputError, describe_os_error, wait_for_writer
    from dobutsu_tb.tablebase.probe import open_tablebase
    from dobutsu_tb.tablebase.schema import TablebaseFileError

    def start_of(v):
        return Position.start(v) if start_text is None else parse_position(start_text, v)

    if tb_path is not None:
        tb = open_tablebase(tb_path)
        try:
            if variant_given and tb.variant != variant:  # (the file's rules would judge the line; prose apart)
                if tb.variant.name != variant.name:
                    wrong = f"is a tablebase of {tb.variant.name}, not of {variant.name}: give a tablebase of " \
                            f"{variant.name}"
                else:
                    wrong = (f"is a tablebase of another variant named {variant.name}, with rules other than those "
                             f"asked for: give a tablebase built from the rules asked for")
                raise click.UsageError(f"{tb_path} {wrong}, or leave out --variant/--variant-file to use the file's "
                                       f"own rules")
            start = start_of(tb.variant)
            tb.probe_wdl(start)  # MissingPositionError if it does not cover the start
        except BaseException:
            tb.close()
            raise
        return tb, start
    start = start_of(variant)
    default = default_tb()
    if default.exists():
        tb = open_tablebase(default)
        if tb.variant == variant and tb.get_wdl(start) is not None:  # (== leaves titles and prose apart)
            return tb, start
        tb.close()
    folder = Path(cache_root()) / "tablebases"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot make {folder}, the cache folder of the tablebases built for a start "
                          f"({describe_os_error(exc)}); give --tb, or set DOBUTSU_TB_CACHE to a writable "
                          f"folder") from None
    name = f"{start.key():016x}.h5"
    if variant.name != "dobutsu":
        name = f"{variant.name}-{variant.digest}-{name}"
    path = folder / name

    def waiting(holder):
        who = f"process {holder}" if holder.isdigit() else "another command"
        click.echo(f"waiting for {who}, which is building the tablebase for {start.text()} into {path} ...",
                   err=True)

    while not path.exists():
        if wait_for_writer(path, waiting):
            continue  # the other build ended: its file is there, or this command builds it
        click.echo(f"building the tablebase for {start.text()} into {path} ...", err=True)
        try:
            build_tablebase(path, start, progress=None, variant=variant)
        except OutputError:
            if wait_for_writer(path, waiting) or path.exists():
                continue  # another command started the same build just now
            raise
    tb = None
    try:
        tb = open_tablebase(path)
        tb.probe_wdl(start)
    except TablebaseFileError as exc:  # (this folder's files are ours to make again)
        if tb is not None:
            tb.close()
        raise TablebaseFileError(f"{exc} {_REBUILD_HINT}") from None
    except BaseException:
        if tb is not None:
            tb.close()
        raise
    return tb, start


@click.command("verify-line")
@click.option("--start", default=None, metavar="POSITION",
              help="Start position of the line (default: the variant's start).")
@variant_options
@click.argument("moves", nargs=-1)
@click.option("--file", "move_file", type=PATH,
              help="Read the moves from a file: one move per line, or one game per line (at most 32 MiB).")
@click.option("--tb", "tb_path", type=PATH, default=None,
              help="Tablebase to use (default: $DOBUTSU_TB or dobutsu.h5 if it covers the start, "
                   "else one built for the start and cached).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--png-dir", type=PATH, default=None,
              help="Also draw the board after every ply into this folder (one folder gameN per game when "
                   "there are several; the pictures of an earlier run there are removed).")
def verify_line_cmd(start, variant, variant_file, moves, move_file, tb_path, as_json, png_dir):
    """Replay a line of MOVES and judge every ply against the tablebase.

    Prints, for each ply, the move, the value before and after it and whether it is optimal
    (keeps the value, wins as fast or loses as slowly as possible); then the verdict: the start
    position's true value, whether the line is perfect play, and the first mistake. A move that
    is illegal ends its game's report; the command then says which on stderr and exits with 1.
    """
    from dobutsu_tb.analysis.lines import read_games
    from dobutsu_tb.analysis.textfiles import InputFileError
    from dobutsu_tb.tablebase.game.notation import IllegalMoveError

    game = resolve_variant(variant, variant_file)
    if not moves and not move_file:
        raise click.UsageError("give the moves as arguments or with --file")
    games = read_games(move_file) if move_file else []
    if move_file and not games and not moves:
        raise InputFileError(f"{move_file}: no moves in the file (only blank lines, # comments and move numbers)")
    if moves:
        games.insert(0, list(moves))
    gc.freeze()  # the games live to the end: the collector need not walk their lists again and again
    try:
        illegal = _judge_and_write(start, game, tb_path, move_file, games, as_json, png_dir,
                                   variant is not None or variant_file is not None)
    finally:
        gc.unfreeze()
    if illegal:
        n, (ply, move, reason) = illegal[0]
        where = f"game {n}, ply {ply}" if len(games) > 1 else f"ply {ply}"
        more = f" ({len(illegal):,} of the {len(games):,} games hold an illegal move)" if len(illegal) > 1 else ""
        raise IllegalMoveError(f"{where} ({move}) is illegal: {reason}{more}")  # (move: shortened by the report)


def _judge_and_write(start_text, variant, tb_path, move_file, games, as_json, png_dir,
                     variant_given: bool = False) -> list:
    """Judge the games and write their reports on stdout; returns (game number, (ply, move,
    reason)) for each game that holds an illegal move."""
    from dobutsu_tb.encoding.jit import cache_root
    from dobutsu_tb.tablebase.schema import TablebaseFileError

    tb, start_pos = _tablebase_for(start_text, tb_path, variant, variant_given)
    try:
        return _judge_and_write_with(tb, start_pos, move_file, games, as_json, png_dir)
    except TablebaseFileError as exc:  # damage found while judging, in a file of the cache: ours to make again
        if Path(tb.path).parent != Path(cache_root()) / "tablebases":
            raise
        raise TablebaseFileError(f"{exc} {_REBUILD_HINT}") from None


def _judge_and_write_with(tb, start_pos, move_file, games, as_json, png_dir) -> list:
    """:func:`_judge_and_write` once the tablebase is open."""
    from tqdm import tqdm

    from dobutsu_tb.analysis.lines import reads_whole_file
    from dobutsu_tb.analysis.reports import line_report_json
    from dobutsu_tb.tablebase.probe import open_tablebase

    with tb:
        if png_dir is not None:
            picture_folder(png_dir, {"the tablebase": tb.path, "the file of games": move_file})
        if reads_whole_file(tb, sum(len(g) for g in games)):
            if sys.stderr.isatty():
                click.echo(f"reading {tb.path} into memory ...", err=True)
            with open_tablebase(tb.path, in_memory=True) as whole:
                reports = _judge(whole, start_pos, games)
        else:
            reports = _judge(tb, start_pos, games)
    out = _Output()
    described = _Described()
    illegal = []
    with tqdm(reports, desc="report", unit=" games", total=len(games), disable=None, file=sys.stderr) as bar:
        if as_json:
            out.write("[")
        for n, report in enumerate(bar, 1):
            if report.illegal is not None:
                illegal.append((n, report.illegal))
            if png_dir is not None:
                draw_plies(png_dir / (f"game{n}" if len(games) > 1 else ""), report.start,
                           [(p.ply, p.side, p.move, p.position) for p in report.plies])
            if as_json:  # json.dumps(list, indent=2), one game at a time
                text = json.dumps(line_report_json(report), indent=2).replace("\n", "\n  ")
                out.write(("  " if n == 1 else ",\n  ") + text, newline=False)
                continue
            if len(games) > 1:
                out.write(f"game {n}:")
            _write_text(out, report, described)
        if as_json:
            out.write("\n]")
    out.flush()
    return illegal


#: The head of a verify-line report's table.
_HEAD = f"{'ply':>3}  {'side':<5} {'move':<9} {'before (mover)':<15} {'after (opponent)':<17} verdict"


def _write_text(out, report, described) -> None:
    """The text of one game's report: a row per ply, the illegal move, the verdict."""
    from dobutsu_tb.tablebase.game.position import SIDE_NAMES

    lines = [_HEAD]
    for p in report.plies:
        after = f"{report.start.variant.royal.name} lost" if p.ending and "captures" in p.ending else described[p.after]
        mark = "optimal" if p.optimal else f"MISTAKE: {described[p.result]}; best {', '.join(p.best)}"
        lines.append(f"{p.ply:>3}  {SIDE_NAMES[p.side]:<5} {p.move:<9} {described[p.before]:<15} {after:<17} {mark}")
        if p.ending:
            lines.append(f"     {p.ending}: the game is over")
    if report.illegal:
        ply, move, reason = report.illegal
        lines.append(f"{ply:>3}  {move}: ILLEGAL: {reason}")
    lines.append(report.verdict())
    out.write("\n".join(lines))


class _Described(dict):
    """``describe_value(*value, unit=False)`` of each (wdl, dtm), made once."""

    def __missing__(self, value):
        from dobutsu_tb.tablebase.values import describe_value

        text = self[value] = describe_value(*value, unit=False)
        return text


def _judge(tb, start, games):
    """``verify_games`` with a progress bar on stderr (hidden when it is not a terminal)."""
    from tqdm import tqdm

    from dobutsu_tb.analysis.lines import verify_games

    with tqdm(desc="judge", unit=" games", total=len(games), disable=None, file=sys.stderr) as bar:
        return verify_games(tb, start, games, progress=lambda done: bar.update(done - bar.n))


class _Output:
    """Lines for stdout, written in batches (``click.echo`` flushes every call)."""

    def __init__(self, batch: int = 4096):
        self.parts: list[str] = []
        self.batch = batch

    def write(self, text: str, newline: bool = True) -> None:
        self.parts.append(text + "\n" if newline else text)
        if len(self.parts) >= self.batch:
            self.flush()

    def flush(self) -> None:
        if self.parts:
            click.echo("".join(self.parts), nl=False)
            self.parts.clear()


@click.command()
@click.argument("legacy_path", metavar="[FILE]", required=False, type=PATH)
@tb_option
@click.option("--max-problems", default=20, show_default=True, type=click.IntRange(min=0),
              help="How many inconsistencies to list.")
@click.pass_context
def verify(ctx, legacy_path, tb_path, max_problems):
    """Check a tablebase file independently: the one of --tb ($DOBUTSU_TB or dobutsu.h5). The
    positional FILE still works, but is deprecated: write --tb FILE.

    Verifies the HDF5 checksums, the metadata against the data, and every stored value against
    its children's stored values. Exits with 1 if anything is inconsistent.
    """
    from tqdm import tqdm

    from dobutsu_tb.analysis.verify import verify_file

    path = tb_file(ctx, legacy_path, tb_path)
    with tqdm(desc="verify", unit=" pos", unit_scale=True, disable=None, file=sys.stderr) as bar:
        def progress(done, total):
            bar.total = total
            bar.update(done - bar.n)
        report = verify_file(path, limit=max_problems, progress=progress)
    secs = ", ".join(f"{k} {v:.1f} s" for k, v in report.seconds.items())
    click.echo(f"{path}: checked {report.checked:,} positions ({secs})")
    if report.ok:
        click.echo("OK: checksums, metadata and every value agree with their children")
        return
    n = report.total_problems
    click.echo(f"FAILED: {n:,} inconsistencies; the first {len(report.problems)}:" if n != 1 else
               "FAILED: 1 inconsistency:")
    for problem in report.problems:
        click.echo(f"  {problem}")
    from dobutsu_tb.tablebase.schema import TablebaseFileError

    raise TablebaseFileError(f"{path} fails verification: {counted(n, 'inconsistency', 'inconsistencies')} "
                             f"(listed above)")


@click.command()
@click.argument("legacy_path", metavar="[FILE]", required=False, type=PATH)
@tb_option
@click.option("--longest", default=10, show_default=True, type=click.IntRange(min=0),
              help="How many of the longest wins to list.")
@click.option("--plot", "plot", type=FILE_OUT, default=None, callback=png_path,
              help="Draw positions per DTM (wins and losses) into this PNG file.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def stats(ctx, legacy_path, tb_path, longest, plot, as_json):
    """Counts of the tablebase of --tb ($DOBUTSU_TB or dobutsu.h5): per value, per DTM, per
    material on the board and in hand, and the longest wins. The positional FILE still works,
    but is deprecated: write --tb FILE."""
    from dobutsu_tb.analysis.reports import stats_json
    from dobutsu_tb.analysis.stats import tablebase_stats

    path = tb_file(ctx, legacy_path, tb_path)
    if plot is not None:
        picture_file(plot, {"the tablebase": path})
    result = tablebase_stats(path, longest)
    click.echo(json.dumps(stats_json(result), indent=2) if as_json else result.text())
    if plot is not None:
        result.plot(plot)
        click.echo(f"plot written to {plot}", err=as_json)
