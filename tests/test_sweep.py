"""Room Sweeper: the simulator accepts both engines' answers (the SAT solver and our search) and
rejects broken routes; small problems are cross-checked by brute force over all routes, and the
two engines against each other."""

import itertools
import math
import os
import random

import pytest

from dobutsu_tb.analysis.puzzles import sweep

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "sweep")


def problem(name):
    return sweep.read_problem(os.path.join(DATA, f"{name}.txt"))


def all_routes(budget):
    for n in range(budget + 1):
        for steps in itertools.product("UDLR", repeat=n):
            yield "".join(steps)


def brute_force_solvable(p):
    return any(not sweep.simulate(p, list(routes))[0]
               for routes in itertools.product(*[list(all_routes(b)) for _, _, _, b in p.cleaners]))


ENGINES = ("sat", "search")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", ["tiny", "meeting-5x5", "items-4x4", "trio-5x5", "six-7x7", "six-7x7-long",
                                  "seven-8x8", "meeting-7x7", "wide-10x10", "wide-16x16"])
def test_solutions_pass_the_simulator(name, engine):
    p = problem(name)
    result = sweep.solve(p, engine=engine)
    assert result.routes is not None and result.engine == engine and result.complete
    assert sweep.simulate(p, result.routes)[0] == []


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", ["sample", "q44", "q46", "q49"])
def test_sweepoptimizer_problems_solve(name, engine):
    """SweepOptimizer's problems (data/sweep/sweepoptimizer/), replayed by the simulator."""
    p = sweep.read_problem(os.path.join(DATA, "sweepoptimizer", f"{name}.txt"))
    result = sweep.solve(p, engine=engine)
    assert result.routes is not None and sweep.simulate(p, result.routes)[0] == []


def test_q64_is_solved(cli):
    """SweepOptimizer's q64 (68 cells for 60 steps, so meetings must clean at least 8 cells),
    which SweepOptimizer2 and our search do not solve in 10 minutes: the SAT solver (the default
    engine) finds routes, which the simulator accepts, but not without their meetings."""
    path = os.path.join(DATA, "sweepoptimizer", "q64.txt")
    p = sweep.read_problem(path)
    result = sweep.solve(p)
    assert result.engine == "sat" and result.with_meetings and result.conflicts > 0
    assert sweep.simulate(p, result.routes)[0] == []
    assert sweep.simulate(p, result.routes, meetings=False)[0] != []
    out = cli("puzzle", "sweep", path)
    assert out.exit_code == 0 and "found with meetings (SAT solver:" in out.output
    routes = sweep.parse_routes(p, out.output.split("found")[0])
    assert sweep.simulate(p, routes)[0] == []
    met = sweep.count_meetings(p, routes)  # (the README's figures: 60 steps, 7 meetings)
    assert met >= 1 and f"): {sum(map(len, routes))} steps, {met} meetings of cleaners; final board:" in out.output


def test_sat_solver_gives_up_on_its_conflict_budget():
    """q64 takes the SAT solver a few hundred conflicts: with a budget of 10 it gives up, and
    says that it has no proof either."""
    result = sweep.solve(sweep.read_problem(os.path.join(DATA, "sweepoptimizer", "q64.txt")), engine="sat",
                         max_nodes=10)
    assert result.routes is None and not result.complete


def test_engines_and_the_formula_size(cli, monkeypatch):
    """``auto`` runs the SAT solver unless its formula is larger than AUTO_SAT_ARRIVALS, then the
    search; ``sat`` refuses a formula larger than MAX_ARRIVALS (one line from the command, exit
    1); an unknown engine is refused."""
    from dobutsu_tb.analysis.puzzles.sweep import sat, search

    p = problem("six-7x7")
    assert sweep.solve(p).engine == "sat"
    rows = [["0"] * 16 for _ in range(16)]
    rows[0][0], rows[15][15], rows[0][15], rows[15][0] = "2", "2", "3", "4"
    long = sweep.parse_problem("16 16\n" + "\n".join(" ".join(r) for r in rows) + "\n2 300 300\n1 300\n1 300")
    result = sweep.solve(long)  # 146,684 arrival variables: the search (the SAT solver takes 40 s)
    assert result.engine == "search" and sweep.simulate(long, result.routes)[0] == []
    monkeypatch.setattr(search, "AUTO_SAT_ARRIVALS", 10)
    monkeypatch.setattr(sat, "MAX_ARRIVALS", 10)
    result = sweep.solve(p)
    assert result.engine == "search" and sweep.simulate(p, result.routes)[0] == []
    with pytest.raises(ValueError, match="arrival variables"):
        sweep.solve(p, engine="sat")
    with pytest.raises(ValueError, match="engine must be one of"):
        sweep.solve(p, engine="fast")
    out = cli("puzzle", "sweep", os.path.join(DATA, "six-7x7.txt"), "--engine", "sat")
    assert out.exit_code == 1 and "try --engine search" in out.output and out.output.count("\n") == 1


def shorter(p, cut):
    """The problem with every step budget ``cut`` steps shorter (at least 0)."""
    return sweep.Problem(p.width, p.height, p.tiles, [(k, r, c, max(0, b - cut)) for k, r, c, b in p.cleaners])


@pytest.mark.parametrize("name", ["tiny", "items-4x4", "trio-5x5", "six-7x7", "six-7x7-long", "meeting-7x7",
                                  "wide-10x10", "wide-16x16", "sweepoptimizer/q46", "sweepoptimizer/q49",
                                  "sweepoptimizer/sample"])
def test_engines_agree_on_shorter_budgets(name):
    """The shipped problems with every budget 1 and 2 steps shorter (some still solvable, some
    not): the SAT solver and the search (each complete) agree on which, and every answer is
    replayed by the simulator."""
    base = problem(name)
    answers = []
    for cut in (1, 2):
        p = shorter(base, cut)
        sat, search = sweep.solve(p, engine="sat"), sweep.solve(p, engine="search")
        assert sat.complete and search.complete
        assert (sat.routes is None) == (search.routes is None), (name, cut)
        for result in (sat, search):
            if result.routes is not None:
                assert sweep.simulate(p, result.routes)[0] == []
        answers.append(sat.routes is None)
    if name == "six-7x7":
        assert answers == [True, True]  # no routes: proved both ways


def empty_room(w, h, budget):
    """Every cell dirty floor but a boy's in the top left corner."""
    rows = [["0"] * w for _ in range(h)]
    rows[0][0] = "2"
    return sweep.parse_problem(f"{w} {h}\n" + "\n".join(" ".join(r) for r in rows) + f"\n1 {budget}\n0\n0")


def test_auto_takes_turns_where_the_sat_solver_is_weak():
    """One boy sweeping an empty 10 x 10 room in 99 steps (a tight single sweep), and one that is
    a step short in an 8 x 8 room (more cells than steps): the SAT solver has no answer within
    its first round, and the search answers (routes, and a proof), both under ``auto``."""
    sweep_all = empty_room(10, 10, 99)
    result = sweep.solve(sweep_all)
    assert result.engine == "search" and result.conflicts > 0 and sweep.simulate(sweep_all, result.routes)[0] == []
    short = empty_room(8, 8, 62)
    result = sweep.solve(short)
    assert result.engine == "search" and result.routes is None and result.complete
    assert not sweep.solve(short, engine="sat", max_nodes=20_000).complete


def test_q64_has_a_solution(cli):
    """q64's routes found by hand (data/sweep/q64-routes.txt, before we used the SAT solver): the
    simulator and ``--check`` accept them, and they use all 60 steps."""
    path = os.path.join(DATA, "sweepoptimizer", "q64.txt")
    routes_path = os.path.join(DATA, "q64-routes.txt")
    p = sweep.read_problem(path)
    routes = sweep.parse_routes(p, open(routes_path).read())
    assert sweep.simulate(p, routes)[0] == []
    assert sum(len(r) for r in routes) == 60
    out = cli("puzzle", "sweep", path, "--check", routes_path)
    assert out.exit_code == 0 and out.output.startswith("valid")


@pytest.mark.parametrize("engine", ENGINES)
def test_meetings_needed(engine):
    p = problem("meeting-5x5")
    result = sweep.solve(p, engine=engine)
    assert result.with_meetings
    # Without the meeting the walled-in centre stays dirty.
    no_meet = ["DD", "UR"]
    assert sweep.simulate(p, no_meet)[0] == ["dirty floor is left at 3,3"]
    assert sweep.solve(problem("meeting-7x7"), engine=engine).with_meetings
    assert not sweep.solve(problem("tiny"), engine=engine).with_meetings


def test_no_solution_is_proved(cli):
    p = problem("short-budget")
    assert sweep.solve(p).routes is None and sweep.solve(p, engine="search").routes is None
    assert not brute_force_solvable(p)
    assert brute_force_solvable(problem("tiny"))
    assert cli("puzzle", "sweep", os.path.join(DATA, "short-budget.txt")).output.startswith("No solution")


def test_simulator_rejects_broken_routes():
    p = problem("items-4x4")
    good = sweep.solve(p).routes
    assert sweep.simulate(p, good)[0] == []
    girl = [i for i, c in enumerate(p.cleaners) if c[0] == "girl"][0]
    cases = {
        "wrong step": lambda r: r[:girl] + ["L" * 9] + r[girl + 1:],
        "missed cell": lambda r: [""] * len(r),
    }
    for what, broken in cases.items():
        assert sweep.simulate(p, broken(good))[0], what
    tiny = problem("tiny")
    assert "cannot be entered" in sweep.simulate(tiny, ["RD"])[0][0]          # into the obstacle
    assert "steps straight back" in sweep.simulate(tiny, ["RL"])[0][0]
    assert "budget" in sweep.simulate(tiny, ["RRDDLLUUR"])[0][0]
    assert "off the board" in sweep.simulate(tiny, ["U"])[0][0]


def test_unmet_dump():
    # A girl picks up the apple but never passes the bin: she still holds it.
    p = sweep.parse_problem("4 1\n3 6 0 8\n0\n1 3\n0")
    assert sweep.simulate(p, ["R"])[0] == ["dirty floor is left at 1,3", "the girl from 1,1 still holds 1 item"]
    assert sweep.simulate(p, ["RR"])[0] == []  # next to the bin at 1,4: dumped in the same step
    assert sweep.solve(p).routes == ["RR"]


def test_meeting_cleans_the_block_only_of_dirty_floor():
    p = sweep.parse_problem("3 3\n2 0 1\n1 5 1\n2 1 1\n2 1 1\n0\n0")
    # Both boys step onto 2,1 at once: the dirty floor at 1,2 is cleaned, the puddle is not.
    problems, tiles = sweep.simulate(p, ["D", "U"])
    assert tiles[0][1] == sweep.CLEAN and problems == ["a puddle is left at 2,2"]


def test_check_cli(cli, tmp_path):
    routes = tmp_path / "routes.txt"
    out = cli("puzzle", "sweep", os.path.join(DATA, "meeting-5x5.txt"))
    assert out.exit_code == 0 and "found with meetings" in out.output
    routes.write_text(out.output)
    ok = cli("puzzle", "sweep", os.path.join(DATA, "meeting-5x5.txt"), "--check", str(routes))
    assert ok.exit_code == 0 and ok.output.startswith("valid")
    routes.write_text("boy 1,1 DD\nboy 3,1 UR\n")
    bad = cli("puzzle", "sweep", os.path.join(DATA, "meeting-5x5.txt"), "--check", str(routes))
    assert bad.exit_code == 1 and "dirty floor is left at 3,3" in bad.output


@pytest.mark.parametrize("text,message", [
    ("2 2\n2 0\n0 11\n1 3\n0\n0", "unknown tile code 11"),
    ("2 2\n2 0\n0 0\n2 3 3\n0\n0", "the file gives a boy count of 2 but the board has 1 boy\n"),
    ("2 2\n2 0\n0 0\n1 3\n0\n0 5", "1 number left over after the robots' budgets\n"),
    ("2 2\n2 0\n0 0\n-1\n0\n0", "the boy count must be 0 or more, got -1\n"),
    ("2 2\n1 0\n0 0\n0\n0\n0", "no cleaner"),
    ("2 2\n2 0\n0 0\n1 5000\n0\n0", "must be 0..1000"),
    ("8 8\n" + "2 " * 64 + "\n64 " + "1 " * 64 + "\n0\n0", "64 cleaners: at most 62"),
    ("2 2\n2 0\n0", "needs 4 tile codes"),
    ("2 2\n2 0\n0 x\n1 3\n0\n0", "not an integer"),
])
def test_bad_problem_files(cli, tmp_path, text, message):
    path = tmp_path / "p.txt"
    path.write_text(text)
    result = cli("puzzle", "sweep", str(path))
    assert result.exit_code == 1 and message in result.output and result.output.count("\n") == 1


@pytest.mark.parametrize("name", ["tiny", "short-budget", "items-4x4", "trio-5x5", "meeting-5x5", "six-7x7",
                                  "meeting-7x7"])
def test_one_and_two_threads_agree(name):
    """Either thread count solves the same problems (and proves the same ones unsolvable), with
    or without meetings alike; the routes may differ, and each set is checked by the simulator."""
    p = problem(name)
    one, two = sweep.solve(p, threads=1, engine="search"), sweep.solve(p, threads=2, engine="search")
    assert (one.routes is None, one.with_meetings) == (two.routes is None, two.with_meetings)
    assert (one.routes is None) == (name == "short-budget")
    for result in (one, two):
        if result.routes is not None:
            assert sweep.simulate(p, result.routes)[0] == []


def test_an_item_goes_to_whoever_reaches_it_first():
    """Two robots pass the bottle: the one on the right reaches it at step 1 (and could never
    dump it), the one on the left at step 2. Only the left one may fetch it; routes in which the
    right one walks over it first leave it holding the bottle."""
    p = sweep.parse_problem("6 1\n1 4 0 7 4 9\n0\n0\n2 3 4")
    assert sweep.simulate(p, ["RRR", "LLLL"])[0] == ["the robot from 1,5 still holds 1 item"]
    assert sweep.simulate(p, ["RRR", ""])[0] == []
    assert brute_force_solvable(p)
    for threads, engine in ((1, "search"), (2, "search"), (1, "sat")):
        result = sweep.solve(p, threads=threads, engine=engine)
        assert result.routes is not None and sweep.simulate(p, result.routes)[0] == []


def legal_routes(p, r, c, budget):
    """Every route of at most ``budget`` steps that stays on enterable cells and never steps
    straight back (the simulator would reject the others anyway)."""
    out = [""]

    def walk(r, c, prev, route):
        if len(route) == budget:
            return
        for d, (dr, dc) in sweep.STEPS.items():
            rr, cc = r + dr, c + dc
            if (0 <= rr < p.height and 0 <= cc < p.width and (rr, cc) != prev
                    and p.tiles[rr][cc] not in (sweep.BIN, sweep.BOX, sweep.OBSTACLE)):
                out.append(route + d)
                walk(rr, cc, (r, c), route + d)

    walk(r, c, None, "")
    return out


def test_items_by_arrival_time_agree_with_brute_force():
    """200 small random boards with two girls or two robots and their items: each engine's answer
    (routes replayed by the simulator, or no solution) agrees with brute force over all legal
    routes."""
    import random

    rng = random.Random(2)
    for _ in range(200):
        w, h = rng.choice([(3, 2), (4, 2), (5, 1), (6, 1), (3, 3)])
        tiles = [sweep.DIRTY] * (w * h)
        cells = rng.sample(range(w * h), w * h)
        kind = rng.choice(["girl", "robot"])
        code, item, dump = ((sweep.GIRL, sweep.APPLE, sweep.BIN) if kind == "girl"
                            else (sweep.ROBOT, sweep.BOTTLE, sweep.BOX))
        tiles[cells[0]] = tiles[cells[1]] = code
        tiles[cells[2]] = dump
        for c in cells[3:]:
            roll = rng.random()
            tiles[c] = item if roll < 0.3 else sweep.CLEAN if roll < 0.45 else sweep.DIRTY
        counts = ["0", "0", "0"]
        counts[sweep.KINDS.index(kind)] = f"2 {rng.randint(1, 5)} {rng.randint(1, 5)}"
        text = f"{w} {h}\n" + "\n".join(" ".join(map(str, tiles[r * w:(r + 1) * w])) for r in range(h))
        p = sweep.parse_problem(text + "\n" + "\n".join(counts))
        solvable = any(not sweep.simulate(p, list(routes))[0] for routes in itertools.product(
            *[legal_routes(p, r, c, b) for _, r, c, b in p.cleaners]))
        for engine in ENGINES:
            result = sweep.solve(p, threads=1, engine=engine)
            assert (result.routes is not None) == solvable, (engine, text)
            if result.routes is not None:
                assert sweep.simulate(p, result.routes)[0] == [], (engine, text)


def random_problem(rng, w, h, near=None, cleaners=3, max_budget=4, max_combos=3000):
    """A random problem with a few cleaners of any kind (dirt, puddles, items, walls, a bin and a
    box); with ``near`` (a cell number) everything but clean floor lies within 3 steps of it, so
    that short routes matter on a large board. Budgets are drawn until brute force over all legal
    routes stays under ``max_combos`` combinations."""
    n = w * h
    centre = near if near is not None else rng.randrange(n)
    close = [x for x in range(n) if abs(x // w - centre // w) + abs(x % w - centre % w) <= 3]
    tiles = [sweep.CLEAN] * n
    for x in close:
        roll = rng.random()
        tiles[x] = (sweep.DIRTY if roll < 0.45 else sweep.CLEAN if roll < 0.6 else sweep.PUDDLE if roll < 0.7
                    else sweep.APPLE if roll < 0.78 else sweep.BOTTLE if roll < 0.86 else sweep.OBSTACLE)
    spots = rng.sample(close, min(len(close), cleaners + 2))
    tiles[spots[0]], tiles[spots[1]] = sweep.BIN, sweep.BOX
    codes = [rng.choice([sweep.BOY, sweep.GIRL, sweep.ROBOT]) for _ in spots[2:]]
    for x, code in zip(spots[2:], codes):
        tiles[x] = code
    text = f"{w} {h}\n" + "\n".join(" ".join(map(str, tiles[r * w:(r + 1) * w])) for r in range(h))
    while True:
        counts = [[b for b in [rng.randint(1, max_budget) for _ in range(codes.count(code))]]
                  for code in (sweep.BOY, sweep.GIRL, sweep.ROBOT)]
        p = sweep.parse_problem(text + "\n" + "\n".join(" ".join(map(str, [len(c)] + c)) for c in counts))
        per = [legal_routes(p, r, c, b) for _, r, c, b in p.cleaners]
        if math.prod(len(x) for x in per) <= max_combos:
            return p, per


@pytest.mark.parametrize("seed", range(4))
def test_random_boards_agree_with_brute_force(seed):
    """Random small boards with up to three cleaners of any kind, walls, items and room for
    meetings, and random boards wider than 64 cells (up to 16 x 16) whose dirt lies across the
    words of the bit sets: the search (one and two threads), the SAT solver and brute force over all legal routes
    agree on solvability, and every answer is replayed by the simulator."""
    rng = random.Random(seed)
    for k in range(40):
        if k % 2:
            w, h = rng.choice([(3, 3), (4, 3), (4, 4), (5, 2)])
            p, per = random_problem(rng, w, h)
        else:
            w, h = rng.choice([(16, 16), (13, 5), (9, 9), (70, 1), (11, 7)])
            p, per = random_problem(rng, w, h, near=rng.choice([63, 64, 127, 128, 200]) % (w * h))
        solvable = any(not sweep.simulate(p, list(routes))[0] for routes in itertools.product(*per))
        for threads, engine in ((1, "search"), (2, "search"), (1, "sat")):
            result = sweep.solve(p, threads=threads, engine=engine)
            assert (result.routes is not None) == solvable, (threads, engine, p)
            if result.routes is not None:
                assert sweep.simulate(p, result.routes)[0] == [], p


@pytest.mark.parametrize("name", ["wide-10x10", "wide-16x16"])
def test_boards_wider_than_64_cells(name):
    """Generated problems on 100 and 256 cells, solved and replayed by the simulator."""
    p = problem(name)
    assert p.width * p.height > 64
    result = sweep.solve(p)
    assert result.routes is not None and sweep.simulate(p, result.routes)[0] == []


def test_unsolvable_wide_board_reports_the_search(cli, tmp_path):
    """A 16 x 16 board on which one boy cannot clean both dirty cells: proved, and the command
    says how much was searched."""
    rows = [["1"] * 16 for _ in range(16)]
    rows[0][0], rows[0][6], rows[15][15] = "2", "0", "0"
    text = "16 16\n" + "\n".join(" ".join(r) for r in rows) + "\n1 29\n0\n0"
    for engine in ENGINES:
        result = sweep.solve(sweep.parse_problem(text), engine=engine)
        assert result.routes is None and result.complete and result.engine == engine
    assert sweep.solve(sweep.parse_problem(text), engine="search").nodes >= 1
    path = tmp_path / "unsolvable.txt"
    path.write_text(text)
    out = cli("puzzle", "sweep", path)
    assert out.exit_code == 0 and out.output.startswith("No solution") and "SAT solver:" in out.output
    out = cli("puzzle", "sweep", path, "--engine", "search")
    assert out.exit_code == 0 and out.output.startswith("No solution") and " nodes" in out.output
