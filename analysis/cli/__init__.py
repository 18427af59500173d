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


def _default_tb() -> Path:
    """The tablebase file used when none is named: ``$DOBUTSU_TB`` or ``dobutsu.h5``."""
    return Path(os.environ.get("DOBUTSU_TB", DEFAULT_TB))


def _expected_errors():
    from dobutsu_tb.analysis.puzzles import PuzzleInputError
    from dobutsu_tb.encoding.hashtable import HashTableFullError
    from dobutsu_tb.tablebase.enumeration import StartPositionError
    from dobutsu_tb.tablebase.game.notation import IllegalMoveError
    from dobutsu_tb.tablebase.game.position import PositionError
    from dobutsu_tb.tablebase.probe import MissingPositionError
    from dobutsu_tb.tablebase.storage import TablebaseFileError

    return (PositionError, IllegalMoveError, TablebaseFileError, MissingPositionError,
            HashTableFullError, StartPositionError, PuzzleInputError, OSError)


class _Group(click.Group):
    """Turns the project's expected errors into one line on stderr and exit code 1."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:  # output piped into a program that stopped reading (head)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(0)
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
        default=_default_tb, show_default=f"$DOBUTSU_TB or {DEFAULT_TB}",
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

    from dobutsu_tb.tablebase.build import build_tablebase
    from dobutsu_tb.tablebase.game.position import Position

    # Stop on SIGTERM as on Ctrl-C: the partial output file is removed on the way out.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    position = Position.start() if start is None else Position.from_text(start)
    if out is None:
        out = Path(DEFAULT_TB if start is None or position.key() == Position.start().key()
                   else "dobutsu-" + position.text().replace("/", "_") + ".h5")
    result = build_tablebase(out, position, progress=False if quiet else None)
    click.echo(result.summary())


def _move_json(mv):
    from dobutsu_tb.tablebase.values import WDL_NAMES

    return {"move": mv.move, "position": mv.position.text() if mv.position else None,
            "category": "unknown" if mv.wdl is None else WDL_NAMES[mv.wdl], "dtm": mv.dtm,
            "terminal": mv.terminal}


@main.command()
@click.argument("position")
@_tb_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def probe(position, tb_path, as_json):
    """Value of POSITION, its DTM and every move with its value, best first.

    As in the Lichess tablebase API, each move's category and DTM are those of the position
    after it, for the side then to move: a move to a 'loss' wins.
    """
    from dobutsu_tb.analysis.lines import mover_value
    from dobutsu_tb.tablebase.game.position import SIDE_NAMES, Position
    from dobutsu_tb.tablebase.probe import open_tablebase
    from dobutsu_tb.tablebase.values import WDL_NAMES, describe_value, signed_dtm

    pos = Position.from_text(position)
    with open_tablebase(tb_path) as tb:
        wdl, dtm, terminal = tb.value(pos)
        moves = tb.probe_moves(pos)
    if as_json:
        click.echo(json.dumps({"position": pos.text(), "category": WDL_NAMES[wdl],
                               "dtm": signed_dtm(wdl, dtm), "terminal": terminal,
                               "moves": [_move_json(m) for m in moves]}, indent=2))
        return
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


@main.command()
@click.argument("position")
@click.option("--png", "png", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The PNG file to write.")
def show(position, png):
    """Draw POSITION (pieces, hands, side to move, coordinates) into a PNG file."""
    from dobutsu_tb.analysis.pictures import draw_position
    from dobutsu_tb.tablebase.game.position import Position

    draw_position(Position.from_text(position), png)
    click.echo(f"wrote {png}")


@main.command()
@click.argument("position")
@_tb_option
@click.option("--max-plies", default=200, show_default=True, help="Stop a drawn line after this many plies.")
@click.option("--png-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also draw the board after every ply into this folder.")
def line(position, tb_path, max_plies, png_dir):
    """A perfect-play line from POSITION to the end of the game, move by move with the board."""
    from dobutsu_tb.tablebase.game.position import SIDE_NAMES, Position
    from dobutsu_tb.tablebase.probe import open_tablebase
    from dobutsu_tb.tablebase.values import describe_value

    pos = Position.from_text(position)
    with open_tablebase(tb_path) as tb:
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
    if png_dir is not None:
        _draw_plies(png_dir, pos, plies)


def _tablebase_for(start, tb_path: Path | None):
    """A tablebase covering ``start``: the given file, else ``$DOBUTSU_TB``/``dobutsu.h5`` if it
    covers it, else one built for that start in the cache folder (reused next time)."""
    from dobutsu_tb.encoding.jit import cache_root
    from dobutsu_tb.tablebase.build import build_tablebase
    from dobutsu_tb.tablebase.probe import open_tablebase

    if tb_path is not None:
        tb = open_tablebase(tb_path)
        tb.probe_wdl(start)  # MissingPositionError if it does not cover the start
        return tb
    default = _default_tb()
    if default.exists():
        tb = open_tablebase(default)
        if tb.get_wdl(start) is not None:
            return tb
        tb.close()
    folder = Path(cache_root()) / "tablebases"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{start.key():016x}.h5"
    if not path.exists():
        click.echo(f"building the tablebase for {start.text()} into {path} ...", err=True)
        build_tablebase(path, start, progress=None)
    tb = open_tablebase(path)
    tb.probe_wdl(start)
    return tb


@main.command("verify-line")
@click.option("--start", default=None, metavar="POSITION",
              help="Start position of the line (default: the standard start).")
@click.argument("moves", nargs=-1)
@click.option("--file", "move_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Read the moves from a file: one move per line, or one game per line.")
@click.option("--tb", "tb_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Tablebase to use (default: $DOBUTSU_TB or dobutsu.h5 if it covers the start, "
                   "else one built for the start and cached).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--png-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also draw the board after every ply into this folder.")
def verify_line_cmd(start, moves, move_file, tb_path, as_json, png_dir):
    """Replay a line of MOVES and judge every ply against the tablebase.

    Prints, for each ply, the move, the value before and after it and whether it is optimal
    (keeps the value, wins as fast or loses as slowly as possible); then the verdict: the start
    position's true value, whether the line is perfect play, and the first mistake. Exits with
    1 when a move is illegal.
    """
    from dobutsu_tb.analysis.lines import read_games, verify_line
    from dobutsu_tb.tablebase.game.position import SIDE_NAMES, Position
    from dobutsu_tb.tablebase.values import describe_value

    start_pos = Position.start() if start is None else Position.from_text(start)
    games = read_games(move_file) if move_file else []
    if moves:
        games.insert(0, list(moves))
    if not games:
        raise click.UsageError("give the moves as arguments or with --file")
    illegal = False
    results = []
    with _tablebase_for(start_pos, tb_path) as tb:
        for game in games:
            results.append(verify_line(tb, start_pos, game))
    for n, report in enumerate(results, 1):
        illegal |= report.illegal is not None
        if png_dir is not None:
            _draw_plies(png_dir / (f"game{n}" if len(results) > 1 else ""), report.start,
                        [(p.ply, p.side, p.move, p.position) for p in report.plies])
        if as_json:
            continue
        if len(results) > 1:
            click.echo(f"game {n}:")
        click.echo(f"{'ply':>3}  {'side':<5} {'move':<9} {'before (mover)':<15} {'after (opponent)':<17} verdict")
        for p in report.plies:
            after = describe_value(*p.after, unit=False) if not (p.ending and "captures" in p.ending) else "lion lost"
            mark = "optimal" if p.optimal else f"MISTAKE: {describe_value(*p.result, unit=False)}; best {', '.join(p.best)}"
            click.echo(f"{p.ply:>3}  {SIDE_NAMES[p.side]:<5} {p.move:<9} {describe_value(*p.before, unit=False):<15} "
                       f"{after:<17} {mark}")
            if p.ending:
                click.echo(f"     {p.ending}: the game is over")
        if report.illegal:
            ply, move, reason = report.illegal
            click.echo(f"{ply:>3}  {move}: ILLEGAL: {reason}")
        click.echo(report.verdict())
    if as_json:
        click.echo(json.dumps([_line_json(r) for r in results], indent=2))
    if illegal:
        sys.exit(1)


def _line_json(report):
    from dobutsu_tb.tablebase.values import WDL_NAMES

    def value(v):
        return None if v[0] is None else {"category": WDL_NAMES[v[0]], "dtm": v[1]}

    mistake = report.first_mistake
    return {
        "start": report.start.text(), "start_value": value(report.start_value),
        "plies": [{"ply": p.ply, "side": ("sente", "gote")[p.side], "move": p.move,
                   "before": value(p.before), "after": value(p.after), "result": value(p.result),
                   "optimal": p.optimal, "best": p.best, "ending": p.ending} for p in report.plies],
        "illegal": None if report.illegal is None else dict(zip(("ply", "move", "reason"), report.illegal)),
        "perfect": report.perfect, "first_mistake": mistake.ply if mistake else None,
        "verdict": report.verdict(),
    }


def _draw_plies(folder: Path, start, plies):
    """A picture of ``start`` and of the board after each of ``plies`` ((ply, side, move,
    position) with position None once a lion is captured) in ``folder``."""
    from dobutsu_tb.analysis.pictures import draw_position
    from dobutsu_tb.tablebase.game.position import SIDE_NAMES

    folder.mkdir(parents=True, exist_ok=True)
    draw_position(start, folder / "ply000.png", title="start")
    for ply, side, move, position in plies:
        if position is not None:
            draw_position(position, folder / f"ply{ply:03d}.png", title=f"{ply}. {SIDE_NAMES[side]} {move}")


@main.command()
@click.argument("path", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--max-problems", default=20, show_default=True, help="How many inconsistencies to list.")
def verify(path, max_problems):
    """Check a tablebase file independently (default: $DOBUTSU_TB or dobutsu.h5).

    Verifies the HDF5 checksums, the metadata against the data, and every stored value against
    its children's stored values. Exits with 1 if anything is inconsistent.
    """
    from tqdm import tqdm

    from dobutsu_tb.analysis.verify import verify_file

    path = path or _default_tb()
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
    click.echo(f"FAILED: {report.total_problems:,} inconsistencies; the first {len(report.problems)}:")
    for problem in report.problems:
        click.echo(f"  {problem}")
    sys.exit(1)


@main.command()
@click.argument("path", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--longest", default=10, show_default=True, help="How many of the longest wins to list.")
@click.option("--plot", "plot", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Draw positions per DTM (wins and losses) into this PNG file.")
def stats(path, longest, plot):
    """Counts of a tablebase (default: $DOBUTSU_TB or dobutsu.h5): per value, per DTM, per
    material on the board and in hand, and the longest wins."""
    from dobutsu_tb.analysis.stats import tablebase_stats

    result = tablebase_stats(path or _default_tb(), longest)
    click.echo(result.text())
    if plot is not None:
        result.plot(plot)
        click.echo(f"plot written to {plot}")


@main.group()
def puzzle():
    """Exact solvers for small puzzles (Last One, Tank Change, cooperative Othello, the Cross
    Squared Number Puzzle, Room Sweeper)."""


@puzzle.command("lastone")
@click.argument("file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--goal", default=16, show_default=True, help="Hole (0..32, row by row) of the last peg.")
@click.option("--count", "do_count", is_flag=True,
              help="Count the boards reachable per peg count (distinct and up to symmetry) and the solutions.")
@click.option("--fewest-moves", is_flag=True,
              help="Find a solution with the fewest moves (a move: consecutive jumps of one peg).")
def lastone_cmd(file, goal, do_count, fewest_moves):
    """Last One (peg solitaire) from FILE: 33 cells 'o' (peg) or '.' (hole) in row order.

    Prints the solution board by board, or 'No solution.'.
    """
    from dobutsu_tb.analysis.puzzles import lastone

    start = lastone.read_board(file)
    if do_count:
        result = lastone.count(start, goal)
        click.echo(f"{'pegs':>5}{'boards':>14}{'up to symmetry':>16}")
        for pegs, distinct, up_to in result.levels:
            click.echo(f"{pegs:>5}{distinct:>14,}{up_to:>16,}")
        click.echo(f"{'all':>5}{result.reachable:>14,}{result.reachable_up_to_symmetry:>16,}")
        click.echo(f"jump sequences that solve it: {result.solutions:,}")
        return
    boards = lastone.fewest_moves(start, goal) if fewest_moves else lastone.solve(start, goal)
    if boards is None:
        click.echo("No solution.")
        return
    if fewest_moves:
        click.echo(f"{len(boards) - 1} moves")
    else:
        click.echo(f"{len(boards) - 1} jumps")
    for board in boards:
        click.echo(lastone.board_text(board))
        click.echo()


def _plazas(text):
    try:
        return tuple(int(p) for p in text.split(","))
    except ValueError:
        raise click.BadParameter(f"{text!r}: give plaza numbers like 1,2,3") from None


@puzzle.command("tankchange")
@click.option("--blue", default="1,2,3", show_default=True, help="Plazas of the blue tanks at the start.")
@click.option("--red", default="16,17,18", show_default=True, help="Plazas of the red tanks at the start.")
@click.option("--goal-blue", default="16,17,18", show_default=True, help="Plazas of the blue tanks at the goal.")
@click.option("--goal-red", default="1,2,3", show_default=True, help="Plazas of the red tanks at the goal.")
@click.option("--red-first", is_flag=True, help="Red moves first.")
@click.option("--count", "do_count", is_flag=True, help="Also count the shortest sequences.")
def tankchange_cmd(blue, red, goal_blue, goal_red, red_first, do_count):
    """Tank Change: the fewest moves for the armies to exchange sides, and one shortest sequence."""
    from dobutsu_tb.analysis.puzzles import tankchange

    start = tankchange.make_state(_plazas(blue), _plazas(red), red_first)
    result = tankchange.solve(start, _plazas(goal_blue), _plazas(goal_red), count=do_count)
    if result.states is None:
        click.echo("No solution.")
        return
    click.echo(f"fewest moves: {result.moves}")
    if do_count:
        click.echo(f"shortest sequences: {result.count:,}")
    click.echo("moves (plaza numbers): " + " ".join(
        tankchange.move_text(a, b) for a, b in zip(result.states, result.states[1:])))
    click.echo()
    click.echo("start")
    click.echo(tankchange.board_text(result.states[0]))
    for k, (a, b) in enumerate(zip(result.states, result.states[1:]), 1):
        click.echo(f"\n{k}. {tankchange.move_text(a, b)}")
        click.echo(tankchange.board_text(b))


@puzzle.command("othello")
@click.option("--start", "start_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Start position: 8 rows of X (black), O (white), . (empty).")
@click.option("--to-move", type=click.Choice(["black", "white"]), default="black", show_default=True,
              help="Side to move in --start.")
@click.option("--colour", type=click.Choice(["black", "white"]), default=None,
              help="The colour that must remain (default: either).")
@click.option("--count", "do_count", is_flag=True, help="Also print the number of shortest sequences.")
@click.option("--check", default=None, metavar="MOVES",
              help="Validate a sequence like 'c4 c3 c2' instead: legal, one colour left, shortest?")
def othello_cmd(start_file, to_move, colour, do_count, check):
    """Cooperative shortest Othello: the fewest placements that leave discs of one colour only."""
    from dobutsu_tb.analysis.puzzles import othello

    start = othello.parse_board(start_file.read_text(), to_move) if start_file else None
    result = othello.solve(start, colour)
    if check is not None:
        moves = check.split()
        problems, (black, white) = othello.replay(moves, start)
        if problems:
            click.echo(f"not valid: {problems[0]}")
            sys.exit(1)
        one = (black == 0) != (white == 0)
        click.echo(f"{len(moves)} placements, legal; " + (
            "only one colour is left" if one else "both colours are still on the board") +
            f"; the fewest possible is {result.placements}")
        if not one:
            sys.exit(1)
        return
    if result.placements is None:
        click.echo("No solution within the search limit.")
        return
    click.echo(f"fewest placements: {result.placements}")
    if do_count:
        click.echo(f"shortest sequences: {result.count:,}")
    click.echo("sequence: " + " ".join(result.moves))
    for k, (mv, pos) in enumerate(zip(result.moves, result.positions), 1):
        click.echo(f"\n{k}. {mv}")
        click.echo(othello.board_text(pos[0], pos[1]))


@puzzle.command("squares")
@click.argument("file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--first", type=click.IntRange(min=1), default=None, help="Print only the first N solutions.")
@click.option("--count", "count_only", is_flag=True, help="Print only the number of solutions.")
def squares_cmd(file, first, count_only):
    """Cross Squared Number Puzzle on the grid in FILE ('.' white, '#' black, up to 8 x 8):
    every run of two or more white cells must read as a perfect square."""
    from dobutsu_tb.analysis.puzzles import squares

    grid = squares.read_grid(file)
    result = squares.solve(grid, limit=0 if count_only else first)
    for k, text in enumerate(result.solutions, 1):
        click.echo(f"solution {k}:\n{text}\n")
    click.echo(f"{result.count:,} solution{'s' if result.count != 1 else ''}")


@puzzle.command("sweep")
@click.argument("file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--check", "routes_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              default=None, help="Validate the routes in this file with the rules' simulator instead.")
@click.option("--threads", default=2, show_default=True, help="Threads for the search.")
def sweep_cmd(file, routes_file, threads):
    """Room Sweeper: routes for every cleaner that leave the room clean, or proof that none exist.

    Routes are printed one line per cleaner (kind, start row,column, steps U D L R), the form
    --check reads, then the final board.
    """
    from dobutsu_tb.analysis.puzzles import sweep

    problem = sweep.read_problem(file)
    if routes_file is not None:
        routes = sweep.parse_routes(problem, routes_file.read_text())
        problems, tiles = sweep.simulate(problem, routes)
        if problems:
            click.echo("not a solution: " + "; ".join(problems))
            sys.exit(1)
        click.echo("valid: the routes leave the room clean")
        return
    result = sweep.solve(problem, threads=threads)
    if result.routes is None:
        click.echo("No solution: no routes within the budgets clean the room.")
        return
    click.echo(sweep.routes_text(problem, result.routes))
    _, tiles = sweep.simulate(problem, result.routes)
    click.echo(("found with meetings" if result.with_meetings else "found without meetings") + "; final board:")
    click.echo(problem.board_text(tiles))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
