"""The ``puzzle`` command group: Last One, Tank Change, cooperative Othello, squares, Room Sweeper."""

from __future__ import annotations

import re

import click

from dobutsu_tb.analysis.cli.common import PATH
from dobutsu_tb.analysis.textfiles import MAX_PUZZLE_BYTES, read_text
from dobutsu_tb.encoding.config import MAX_THREADS
from dobutsu_tb.encoding.words import counted


@click.group()
def puzzle():
    """Exact solvers for small puzzles (Last One, Tank Change, cooperative Othello, the Cross
    Squared Number Puzzle, Room Sweeper)."""


@puzzle.command("lastone")
@click.argument("file", type=PATH)
@click.option("--goal", default=16, show_default=True, type=click.IntRange(0, 32),
              help="Hole (0..32, row by row) of the last peg.")
@click.option("--count", "do_count", is_flag=True,
              help="Count the boards reachable per peg count (distinct and up to symmetry) and the solutions.")
@click.option("--fewest-moves", is_flag=True,
              help="Find a solution with the fewest moves (a move: consecutive jumps of one peg).")
def lastone_cmd(file, goal, do_count, fewest_moves):
    """Last One (peg solitaire) from FILE: 33 cells 'o' (peg) or '.' (hole) in row order.

    Prints the solution board by board, or 'No solution.'.
    """
    if do_count and fewest_moves:
        raise click.UsageError("--count and --fewest-moves exclude each other")
    text = _text(file, "a Last One board")  # before the solver's kernels load: a bad file is said at once
    from dobutsu_tb.analysis.puzzles import lastone

    start = _parse(file, text, lastone.parse_board)
    if start == 1 << goal and not do_count:
        click.echo(f"The goal already holds: one peg is left, in hole {goal}; no jump is needed.")
        click.echo(lastone.board_text(start))
        return
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
        click.echo("No solution." if lastone.class_allows(start, goal) else
                   f"No solution. (A jump keeps the board's position class, and one peg in hole {goal} has "
                   "another: docs/puzzles.md, §1.)")
        return
    if fewest_moves:
        click.echo(f"{len(boards) - 1} moves")
    else:
        click.echo(f"{len(boards) - 1} jumps")
    for board in boards:
        click.echo(lastone.board_text(board))
        click.echo()


def _plazas(ctx, param, text):
    """A list of distinct plaza numbers 1..18 like ``1,2,3`` (ASCII digits), as a tuple of int;
    anything else is a usage error, as a number out of range is for any option."""
    from dobutsu_tb.analysis.puzzles.tankchange import N_PLAZAS

    if text is None:  # (a goal not given: the exchange, made from the start)
        return None
    parts = [p.strip() for p in text.split(",")]
    if not all(re.fullmatch(r"[0-9]{1,3}", p) for p in parts):
        raise click.BadParameter(f"{text[:40]!r}: give plaza numbers like 1,2,3")
    plazas = tuple(int(p) for p in parts)
    bad = next((p for p in plazas if not 1 <= p <= N_PLAZAS), None)
    if bad is not None:
        raise click.BadParameter(f"plaza {bad} does not exist (plazas are 1..{N_PLAZAS})")
    twice = next((p for p in plazas if plazas.count(p) > 1), None)
    if twice is not None:
        raise click.BadParameter(f"plaza {twice} is given twice")
    return plazas


@puzzle.command("tankchange")
@click.option("--blue", default="1,2,3", show_default=True, callback=_plazas,
              help="Plazas of the blue tanks at the start.")
@click.option("--red", default="16,17,18", show_default=True, callback=_plazas,
              help="Plazas of the red tanks at the start.")
@click.option("--goal-blue", default=None, callback=_plazas,
              help="Plazas of the blue tanks at the goal.  [default: the red tanks' start plazas]")
@click.option("--goal-red", default=None, callback=_plazas,
              help="Plazas of the red tanks at the goal.  [default: the blue tanks' start plazas]")
@click.option("--red-first", is_flag=True, help="Red moves first.")
@click.option("--count", "do_count", is_flag=True, help="Also count the shortest sequences.")
def tankchange_cmd(blue, red, goal_blue, goal_red, red_first, do_count):
    """Tank Change: the fewest moves for the armies to exchange sides, and one shortest sequence."""
    from dobutsu_tb.analysis.puzzles import tankchange

    start = tankchange.make_state(blue, red, red_first)
    if goal_blue is None and goal_red is None and len(blue) != len(red):
        raise tankchange.PuzzleInputError(f"the default goal, the exchange, needs as many blue tanks as red ones "
                                          f"({len(blue)} and {len(red)} here): give --goal-blue and --goal-red")
    result = tankchange.solve(start, red if goal_blue is None else goal_blue, blue if goal_red is None else goal_red,
                              count=do_count)
    if result.moves == 0:
        click.echo("The goal already holds: the tanks stand on the goal's plazas; no move is needed.")
        click.echo(tankchange.board_text(start))
        return
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
@click.option("--start", "start_file", type=PATH,
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
    if start_file is None and to_move != "black":
        raise click.UsageError("--to-move is the side to move in --start: give --start too")
    if check is not None and do_count:
        raise click.UsageError("--check and --count exclude each other")
    if check is not None and not check.replace(",", " ").split():
        raise click.BadParameter("give placements like 'c4 c3 c2'", param_hint="'--check'")
    text = _text(start_file, "an Othello board") if start_file else None
    from dobutsu_tb.analysis.puzzles import PuzzleInputError, othello

    start = _parse(start_file, text, lambda text: othello.parse_board(text, to_move)) if start_file else None
    moves = othello.parse_moves(check) if check is not None else None
    result = othello.solve(start, colour)
    if check is not None:
        problems, (black, white) = othello.replay(moves, start)
        if problems:
            raise PuzzleInputError(f"not valid: {problems[0]}")
        placements = counted(len(moves), "placement")
        if black and white:
            raise PuzzleInputError(f"not a solution: both colours are still on the board after {placements}")
        left = "black" if black else "white"
        if colour is not None and left != colour:
            raise PuzzleInputError(f"not a solution: only {left} discs are left; --colour {colour} asks for {colour}")
        fewest = (f"the fewest possible is {result.placements}" if result.placements is not None
                  else "the search found no sequence within its limit")  # (only when it stopped at its limit)
        click.echo(f"{placements}, legal; only {left} discs are left; {fewest}")
        return
    if result.placements == 0:
        click.echo(f"The goal already holds: {othello.goal_text(*(start or othello.START)[:2])}; "
                   "no placement is needed.")
        return
    if result.placements is None:
        goal = "only one colour" if colour is None else f"only {colour} discs"
        click.echo(f"No solution: no sequence of placements leaves {goal}." if result.exhausted
                   else "No solution within the search limit.")
        return
    click.echo(f"fewest placements: {result.placements}")
    if do_count:
        click.echo(f"shortest sequences: {result.count:,}")
    click.echo("sequence: " + " ".join(result.moves))
    for k, (mv, pos) in enumerate(zip(result.moves, result.positions), 1):
        click.echo(f"\n{k}. {mv}")
        click.echo(othello.board_text(pos[0], pos[1]))


@puzzle.command("squares")
@click.argument("file", type=PATH)
@click.option("--first", type=click.IntRange(1, 1_000_000), default=None,
              help="Print only the first N solutions (N up to 1,000,000; each is kept in memory).")
@click.option("--count", "count_only", is_flag=True, help="Print only the number of solutions.")
def squares_cmd(file, first, count_only):
    """Cross Squared Number Puzzle on the grid in FILE ('.' white, '#' black, up to 8 x 8):
    every run of two or more white cells must read as a perfect square."""
    if first is not None and count_only:
        raise click.UsageError("--first and --count exclude each other")
    text = _text(file, "a squares grid")
    from dobutsu_tb.analysis.puzzles import squares

    grid = _parse(file, text, squares.parse_grid)
    result = squares.solve(grid, limit=0 if count_only else first)
    for k, text in enumerate(result.solutions, 1):
        click.echo(f"solution {k}:\n{text}\n")
    click.echo(counted(result.count, "solution"))


@puzzle.command("sweep")
@click.argument("file", type=PATH)
@click.option("--check", "routes_file", type=PATH,
              default=None, help="Validate the routes in this file with the rules' simulator instead.")
@click.option("--threads", default=2, show_default=True, type=click.IntRange(1, MAX_THREADS),
              help="Threads for the search (the SAT solver runs on one).")
@click.option("--engine", default="auto", show_default=True, type=click.Choice(["auto", "sat", "search"]),
              help="The SAT solver (CaDiCaL), our search, or auto: the two in turns, with growing "
                   "budgets, until one answers (the search alone when the formula is large).")
def sweep_cmd(file, routes_file, threads, engine):
    """Room Sweeper: routes for every cleaner that leave the room clean, or proof that none exist.

    Routes are printed one line per cleaner (kind, start row,column, steps U D L R), the form
    --check reads, then the final board.
    """
    text = _text(file, "a Room Sweeper problem")
    routes_text = _text(routes_file, "a file of routes") if routes_file is not None else None
    from dobutsu_tb.analysis.puzzles import PuzzleInputError, sweep

    problem = _parse(file, text, sweep.parse_problem)
    if routes_file is None and _room_is_clean(problem):
        click.echo("The room is already clean: no cleaner needs to move.")
        click.echo(problem.board_text())
        return
    if routes_file is not None:
        routes = _parse(routes_file, routes_text, lambda text: sweep.parse_routes(problem, text))
        problems, tiles = sweep.simulate(problem, routes)
        if problems:
            raise PuzzleInputError("not a solution: " + "; ".join(problems))
        click.echo("valid: the routes leave the room clean")
        return
    result = sweep.solve(problem, threads=threads, engine=engine)
    if result.engine == "sat":
        searched = f"SAT solver: {result.conflicts:,} conflicts, {result.nodes:,} decisions"
    else:
        searched = f"search: {result.nodes:,} nodes, {result.dead:,} dead nodes remembered"
    if result.routes is None:
        if not result.complete:
            raise PuzzleInputError(f"gave up: no routes found, and no proof that none exist ({searched})")
        click.echo(f"No solution: no routes within the budgets clean the room (proved by the {searched}).")
        return
    click.echo(sweep.routes_text(problem, result.routes))
    _, tiles = sweep.simulate(problem, result.routes)
    steps, met = sum(len(route) for route in result.routes), sweep.count_meetings(problem, result.routes)
    click.echo(("found with meetings" if result.with_meetings else "found without meetings")
               + f" ({searched}): {counted(steps, 'step')}, {counted(met, 'meeting')} of cleaners; final board:")
    click.echo(problem.board_text(tiles))


def _text(path, what: str) -> str:
    """A puzzle file's text, read strictly (at most
    :data:`~dobutsu_tb.analysis.textfiles.MAX_PUZZLE_BYTES`, UTF-8, no NUL byte); ``what`` it is
    names the limit in the message."""
    return read_text(path, MAX_PUZZLE_BYTES, what)


def _parse(path, text: str, parse):
    """``parse(text)``, the file's name in front of the message of a :class:`PuzzleInputError`."""
    from dobutsu_tb.analysis.puzzles import PuzzleInputError

    try:
        return parse(text)
    except PuzzleInputError as exc:
        raise PuzzleInputError(f"{path}: {exc}") from None


def _room_is_clean(problem) -> bool:
    """The goal already holds: no dirty floor, puddle, apple or bottle in the room."""
    from dobutsu_tb.analysis.puzzles import sweep

    return not any(t in (sweep.DIRTY, sweep.PUDDLE, sweep.APPLE, sweep.BOTTLE) for row in problem.tiles for t in row)
