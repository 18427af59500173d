"""Last One, Tank Change and cooperative Othello: answers replayed independently, optimality and
counts cross-checked with plain Python searches where the tests can afford them."""

import os
import random
from collections import deque
from functools import lru_cache

import pytest

from dobutsu_tb.analysis.puzzles import lastone, othello, tankchange

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "lastone")
T_SHAPE = "... ... ....... ..ooo.. ...o... .o. ..."
CENTRAL = ((1 << 33) - 1) ^ (1 << 16)


# --- Last One ------------------------------------------------------------------------------


def naive_successors(board):
    for f, o, t in lastone.JUMPS.tolist():
        if (board >> f) & 1 and (board >> o) & 1 and not (board >> t) & 1:
            yield board ^ (1 << f) ^ (1 << o) ^ (1 << t)


@lru_cache(maxsize=None)
def naive_solutions(board, goal_board):
    """Jump sequences from ``board`` to ``goal_board`` (plain recursion with memo)."""
    if board == goal_board:
        return 1
    return sum(naive_solutions(child, goal_board) for child in naive_successors(board))


def test_t_shape_solves_in_4_jumps_like_the_seed(cli):
    start = lastone.parse_board(T_SHAPE)
    boards = lastone.solve(start)
    assert len(boards) == 5 and lastone.replay(boards) == []
    assert boards[-1] == 1 << lastone.CENTRE
    result = cli("puzzle", "lastone", os.path.join(DATA, "t-shape-seed.dat"))
    assert result.exit_code == 0
    blocks = result.output.split("\n\n")
    assert blocks[0].splitlines()[0] == "4 jumps"
    assert blocks[0].splitlines()[1:] == ["  ...", "  ...", ".......", "..ooo..", "...o...", "  .o.", "  ..."]
    assert blocks[4].splitlines() == ["  ...", "  ...", ".......", "...o...", ".......", "  ...", "  ..."]


def test_central_game_solves():
    boards = lastone.solve(CENTRAL)
    assert len(boards) == 32 and lastone.replay(boards) == []
    assert boards[0] == CENTRAL and boards[-1] == 1 << 16


@pytest.mark.parametrize("name", ["cross", "plus", "pyramid", "arrow", "diamond", "central", "t-shape"])
def test_shipped_shapes_solve(name):
    start = lastone.read_board(os.path.join(DATA, f"{name}.txt"))
    boards = lastone.solve(start)
    assert boards is not None and lastone.replay(boards) == []
    assert len(boards) == lastone.pegs(start)


def test_no_solution(cli, tmp_path):
    assert lastone.solve((1 << 0) | (1 << 32)) is None  # two far-apart pegs
    path = tmp_path / "two-pegs.txt"
    path.write_text("o.. ... ....... ....... ....... ... ..o")
    result = cli("puzzle", "lastone", str(path))
    assert result.exit_code == 0 and result.output.strip() == "No solution."


def test_a_jump_keeps_the_position_class():
    """Every legal jump on random boards leaves the position class as it was (the invariant
    behind refusing a goal at once), checked jump by jump against the table of jumps."""
    rng = random.Random(3)
    jumps = 0
    for _ in range(300):
        board = rng.randrange(1, 1 << lastone.N_HOLES)
        for f, o, t in lastone.JUMPS:
            if (board >> f) & 1 and (board >> o) & 1 and not (board >> t) & 1:
                after = board ^ (1 << f) ^ (1 << o) ^ (1 << t)
                assert lastone.position_class(after) == lastone.position_class(board)
                jumps += 1
    assert jumps > 1000


def test_a_goal_of_another_position_class_has_no_solution_at_once(cli):
    """The central game ends in hole 16 or in one of the four holes three away (1, 13, 19, 31);
    any other goal is refused without a search (it had searched for hours)."""
    start = lastone.read_board(os.path.join(DATA, "central.txt"))
    assert [g for g in range(lastone.N_HOLES) if lastone.class_allows(start, g)] == [1, 13, 16, 19, 31]
    assert lastone.solve(start, 0) is None and lastone.fewest_moves(start, 4) is None
    for option in ((), ("--fewest-moves",)):
        result = cli("puzzle", "lastone", os.path.join(DATA, "central.txt"), "--goal", "0", *option)
        assert result.exit_code == 0 and result.output.startswith("No solution. (A jump keeps the board's position "
                                                                  "class"), result.output


def test_other_goal():
    start = lastone.parse_board(T_SHAPE)
    assert lastone.solve(start, goal=0) is None  # the corner of the top arm is out of reach
    plus = lastone.read_board(os.path.join(DATA, "plus.txt"))
    for goal in range(33):
        boards = lastone.solve(plus, goal)
        want = naive_solutions(plus, 1 << goal) > 0
        assert (boards is not None) == want, goal
        if boards:
            assert boards[-1] == 1 << goal and lastone.replay(boards) == []


@pytest.mark.parametrize("name", ["t-shape", "cross", "plus", "pyramid"])
def test_counts_match_naive_enumeration(name):
    start = lastone.read_board(os.path.join(DATA, f"{name}.txt"))
    result = lastone.count(start)
    # Distinct boards per peg count, by plain breadth-first search.
    level, seen_levels = {start}, []
    while level:
        seen_levels.append(level)
        level = {c for b in level for c in naive_successors(b)}
    assert [d for _, d, _ in result.levels] == [len(lv) for lv in seen_levels]
    # Up to symmetry: the smallest image under the 8 symmetries.
    def canon(b):
        return min(sum(1 << perm[i] for i in range(33) if (b >> i) & 1) for perm in lastone.SYMMETRIES)
    assert [s for _, _, s in result.levels] == [len({canon(b) for b in lv}) for lv in seen_levels]
    assert result.solutions == naive_solutions(start, 1 << 16)


@pytest.mark.parametrize("name,goal", [("plus", 16), ("pyramid", 16), ("arrow", 16), ("t-shape", 16),
                                       ("cross", 16), ("plus", 9), ("pyramid", 28), ("diamond", 16)])
def test_folded_counts_match_the_enumeration_of_every_board(name, goal):
    """The enumeration over one board per symmetry class (class totals of jump sequences) gives
    the figures of the enumeration of every board, for symmetric and lopsided starts and goals
    that fewer symmetries fix."""
    start = lastone.read_board(os.path.join(DATA, f"{name}.txt"))
    folded, every = lastone.count(start, goal), lastone.count(start, goal, fold=False)
    assert (folded.levels, folded.solutions) == (every.levels, every.solutions)
    if name == "pyramid" and goal == 16:
        assert folded.solutions == naive_solutions(start, 1 << 16)


@pytest.mark.parametrize("name", ["plus", "arrow"])
def test_counts_same_with_one_and_two_threads(name):
    start = lastone.read_board(os.path.join(DATA, f"{name}.txt"))
    one, two = lastone.count(start, threads=1), lastone.count(start, threads=2)
    assert (one.levels, one.solutions) == (two.levels, two.solutions)
    assert one.solutions > 0


def test_count_cli(cli):
    result = cli("puzzle", "lastone", os.path.join(DATA, "t-shape.txt"), "--count")
    assert result.exit_code == 0
    assert result.output.splitlines()[-1] == "jump sequences that solve it: 2"


def replay_moves(boards):
    """Each step is one or more consecutive jumps of the same peg."""
    for a, b in zip(boards, boards[1:]):
        frontier = {(a, None)}
        reached = False
        while frontier and not reached:
            nxt = set()
            for board, peg in frontier:
                for f, o, t in lastone.JUMPS.tolist():
                    if (peg is None or f == peg) and (board >> f) & 1 and (board >> o) & 1 and not (board >> t) & 1:
                        child = board ^ (1 << f) ^ (1 << o) ^ (1 << t)
                        reached |= child == b
                        nxt.add((child, t))
            frontier = nxt
        if not reached:
            return False
    return True


@pytest.mark.parametrize("name,moves", [("cross", 5), ("plus", 6), ("pyramid", 8), ("arrow", 9)])
def test_fewest_moves(name, moves):
    start = lastone.read_board(os.path.join(DATA, f"{name}.txt"))
    boards = lastone.fewest_moves(start)
    assert len(boards) - 1 == moves and replay_moves(boards)
    assert boards[-1] == 1 << 16


def naive_fewest_moves(start, goal):
    """Fewest moves from ``start`` to one peg in ``goal``, by plain breadth-first search over the
    boards one move (a chain of jumps of one peg) apart, or None."""
    level, seen = {start}, {start}
    for moves in range(lastone.pegs(start)):
        if 1 << goal in level:
            return moves
        nxt = set()
        for board in level:
            chain = [(board, f) for f in range(33) if (board >> f) & 1]
            while chain:
                b, peg = chain.pop()
                for f, o, t in lastone.JUMPS.tolist():
                    if f == peg and (b >> o) & 1 and not (b >> t) & 1:
                        child = b ^ (1 << f) ^ (1 << o) ^ (1 << t)
                        nxt.add(child)
                        chain.append((child, t))
        level = nxt - seen
        seen |= level
    return None


@pytest.mark.parametrize("name,goal,threads", [("t-shape", 16, 1), ("t-shape", 0, 2), ("cross", 16, 2),
                                               ("plus", 9, 1), ("plus", 23, 2)])
def test_fewest_moves_match_naive_search(name, goal, threads):
    """Other goals (fewer symmetries folded, or none reachable) and both thread counts."""
    start = lastone.read_board(os.path.join(DATA, f"{name}.txt"))
    boards = lastone.fewest_moves(start, goal, threads=threads)
    expected = naive_fewest_moves(start, goal)
    assert (None if boards is None else len(boards) - 1) == expected
    if boards is not None:
        assert boards[0] == start and boards[-1] == 1 << goal and replay_moves(boards)


def test_fewest_moves_of_random_boards_match_naive_search():
    """Boards made by undoing random jumps from the goal (solvable), then some with a peg moved."""
    rng = random.Random(12)
    answers = []
    for k in range(16):
        goal = rng.randrange(33)
        start = 1 << goal
        for _ in range(rng.randint(5, 10)):
            undo = [(f, o, t) for f, o, t in lastone.JUMPS.tolist()
                    if (start >> t) & 1 and not (start >> f) & 1 and not (start >> o) & 1]
            if undo:
                f, o, t = rng.choice(undo)
                start ^= (1 << f) | (1 << o) | (1 << t)
        if k % 4 == 3:
            start ^= 1 << rng.randrange(33)
        boards = lastone.fewest_moves(start, goal) if start else None
        answers.append(None if boards is None else len(boards) - 1)
        assert answers[-1] == (naive_fewest_moves(start, goal) if start else None)
        if boards is not None:
            assert replay_moves(boards)
    assert len({a for a in answers if a is not None}) >= 3


def test_central_game_fewest_moves_is_18():
    """The known minimum (Bell's 18 moves); the search drops the boards whose complement the
    start cannot reach, so this also checks that pruning (about 20 s of CPU)."""
    boards = lastone.fewest_moves(CENTRAL)
    assert len(boards) - 1 == 18 and boards[0] == CENTRAL and boards[-1] == 1 << 16 and replay_moves(boards)


def test_fewest_moves_max_depth():
    cross = lastone.read_board(os.path.join(DATA, "cross.txt"))
    assert lastone.fewest_moves(cross, max_depth=4) is None
    assert len(lastone.fewest_moves(cross, max_depth=5)) == 6


@pytest.mark.parametrize("text,message", [
    ("o" * 32, "has 33 cells, got 32"),
    ("o" * 33 + "x", "unexpected character 'x'"),
    ("." * 33, "no peg"),
])
def test_lastone_bad_input(cli, tmp_path, text, message):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    result = cli("puzzle", "lastone", str(path))
    assert result.exit_code == 1 and message in result.output and result.output.count("\n") == 1


# --- Tank Change ---------------------------------------------------------------------------


def naive_tank_bfs(start, goal):
    """Plain BFS with moves generated by tankchange.replay's rules: (fewest moves, count)."""
    dist, count = {start: 0}, {start: 1}
    queue = deque([start])
    while queue:
        s = queue.popleft()
        if s & ((1 << 36) - 1) == goal:
            return dist[s], sum(c for t, c in count.items() if t & ((1 << 36) - 1) == goal and dist[t] == dist[s])
        blue, red, side = tankchange.tanks(s)
        own, enemy = (blue, red) if side == "blue" else (red, blue)
        for p in own:
            for q in range(1, 19):
                if q in blue or q in red:
                    continue
                new_own = sorted(set(own) - {p} | {q})
                nb, nr = (new_own, red) if side == "blue" else (blue, new_own)
                t = tankchange.make_state(nb, nr, side == "blue")
                if tankchange.replay([s, t]):
                    continue
                if t not in dist:
                    dist[t] = dist[s] + 1
                    count[t] = 0
                    queue.append(t)
                if dist[t] == dist[s] + 1:
                    count[t] += count[s]
    return None, 0


def test_tank_change():
    result = tankchange.solve()
    assert result.moves == 18 and tankchange.replay(result.states) == []
    start = tankchange.make_state((1, 2, 3), (16, 17, 18))
    assert naive_tank_bfs(start, tankchange.make_state((16, 17, 18), (1, 2, 3))) == (18, result.count)
    assert result.count == 66


def test_tank_change_cli_and_variants(cli):
    result = cli("puzzle", "tankchange", "--count")
    assert result.exit_code == 0
    assert result.output.splitlines()[:2] == ["fewest moves: 18", "shortest sequences: 66"]
    variant = tankchange.solve(tankchange.make_state((1, 2), (17, 18)), (17, 18), (1, 2))
    start = tankchange.make_state((1, 2), (17, 18))
    assert naive_tank_bfs(start, tankchange.make_state((17, 18), (1, 2))) == (variant.moves, variant.count)
    assert tankchange.replay(variant.states) == []
    # A start given without a goal: the goal is the exchange of that start, not of the default one.
    exchange = cli("puzzle", "tankchange", "--blue", "1", "--red", "18", "--count")
    moves, count = naive_tank_bfs(tankchange.make_state((1,), (18,)), tankchange.make_state((18,), (1,)))
    assert exchange.exit_code == 0 and exchange.output.splitlines()[:2] == [f"fewest moves: {moves}",
                                                                           f"shortest sequences: {count}"]
    armies = cli("puzzle", "tankchange", "--blue", "1,2,3", "--red", "16,17")
    assert armies.exit_code == 1 and "the default goal, the exchange, needs as many blue tanks as red ones " \
        "(3 and 2 here): give --goal-blue and --goal-red" in armies.output
    one_goal = cli("puzzle", "tankchange", "--goal-blue", "1,2")  # counted before the plazas are checked
    assert one_goal.exit_code == 1 and "3 blue at the start, 2 at the goal (1,2)" in one_goal.output
    uneven = cli("puzzle", "tankchange", "--blue", "1", "--red", "18", "--goal-blue", "16,17")
    assert uneven.exit_code == 1 and uneven.output == ("error: the goal must have as many tanks of each colour as "
                                                       "the start: 1 blue at the start, 2 at the goal (16,17)\n")


@pytest.mark.parametrize("args,code,message", [
    (["--blue", "1,2,19"], 2, "plaza 19 does not exist"),  # an option's value out of its range: usage
    (["--blue", "1,1,2"], 2, "plaza 1 is given twice"),
    (["--blue", "1,2,16"], 1, "a plaza holds a blue and a red tank"),  # an impossible start: data
    (["--goal-red", "1,2"], 1, "as many tanks"),
])
def test_tank_change_bad_input(cli, args, code, message):
    result = cli("puzzle", "tankchange", *args)
    assert result.exit_code == code and message in result.output


# --- cooperative Othello -------------------------------------------------------------------


SEED_OTHELLO = "c4 c3 c2 b4 a5 f4 g4 c5 d6".split()


def test_othello_minimum_is_9_and_seed_line_is_valid():
    result = othello.solve()
    assert result.placements == 9
    problems, (black, white) = othello.replay(result.moves)
    assert problems == [] and (black == 0) != (white == 0)
    assert result.count == 228  # the figure docs/puzzles.md reports
    problems, (black, white) = othello.replay(SEED_OTHELLO)
    assert problems == [] and white == 0 and black != 0
    # The seed's line must be one of the counted shortest sequences: it leaves only black.
    assert othello.solve(colour="black").placements == 9


def test_othello_cli(cli):
    result = cli("puzzle", "othello", "--count")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0] == "fewest placements: 9" and lines[1].startswith("shortest sequences: ")
    check = cli("puzzle", "othello", "--check", " ".join(SEED_OTHELLO))
    assert check.exit_code == 0 and "9 placements, legal; only black discs are left; the fewest possible is 9" in \
        check.output
    assert cli("puzzle", "othello", "--check", " ".join(SEED_OTHELLO), "--colour", "black").exit_code == 0
    white = cli("puzzle", "othello", "--check", " ".join(SEED_OTHELLO), "--colour", "white")
    assert white.exit_code == 1 and white.output == (
        "error: not a solution: only black discs are left; --colour white asks for white\n")
    both = cli("puzzle", "othello", "--check", "c4")
    assert both.exit_code == 1 and "both colours are still on the board after 1 placement\n" in both.output
    assert cli("puzzle", "othello", "--check", "c4", "--count").exit_code == 2
    bad = cli("puzzle", "othello", "--check", "c4 c4")
    assert bad.exit_code == 1 and "placement 2: c4 is not legal" in bad.output


def test_othello_start_file(cli, tmp_path):
    # Black to move can capture White's last disc at once.
    board = tmp_path / "start.txt"
    board.write_text("\n".join(["........"] * 3 + ["...XO..."] + ["........"] * 4))
    result = othello.solve(othello.parse_board(board.read_text()))
    assert (result.placements, result.moves) == (1, ["f4"])
    assert cli("puzzle", "othello", "--start", str(board)).output.startswith("fewest placements: 1")
    # Only black can be left at once; white cannot be the colour left: the answer names white.
    white = cli("puzzle", "othello", "--start", str(board), "--colour", "white")
    assert white.exit_code == 0 and white.output == "No solution: no sequence of placements leaves only white discs.\n"
    board.write_text("........\n" * 7)
    bad = cli("puzzle", "othello", "--start", str(board))
    assert bad.exit_code == 1 and "8 rows, got 7" in bad.output
