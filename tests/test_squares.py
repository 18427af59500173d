"""Cross Squared Number Puzzle: solutions checked independently, counts against brute force."""

import itertools
import os

import pytest

from dobutsu_tb.analysis.puzzles import squares

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "squares")
SEED_SOLUTION = "1225#6\n49#324\n49729#\n#25921\n196#49\n6#9216"


def brute_force(grid):
    """Every digit assignment, checked run by run (only for a few white cells)."""
    cells = [(r, c) for r in range(grid.height) for c in range(grid.width) if grid.white[r][c]]
    count = 0
    for digits in itertools.product("0123456789", repeat=len(cells)):
        rows = [["#"] * grid.width for _ in range(grid.height)]
        for (r, c), d in zip(cells, digits):
            rows[r][c] = d
        if not squares.check(grid, "\n".join("".join(row) for row in rows)):
            count += 1
    return count


def test_seed_board(cli):
    grid = squares.read_grid(os.path.join(DATA, "seed.txt"))
    result = squares.solve(grid)
    assert result.count == 3 and SEED_SOLUTION in result.solutions
    assert all(squares.check(grid, s) == [] for s in result.solutions)
    out = cli("puzzle", "squares", os.path.join(DATA, "seed.txt"))
    assert out.exit_code == 0 and SEED_SOLUTION in out.output and out.output.endswith("3 solutions\n")


@pytest.mark.parametrize("text", ["..\n..", "...\n.#.", "..#\n...", "...\n#..", ".#.\n..#", "...\n..#"])
def test_counts_match_brute_force(text):
    grid = squares.parse_grid(text)
    result = squares.solve(grid)
    assert result.count == brute_force(grid)
    assert all(squares.check(grid, s) == [] for s in result.solutions)


def test_isolated_cell_takes_any_digit():
    assert squares.solve(squares.parse_grid(".#\n#.")).count == 100


@pytest.mark.parametrize("name,count", [("open-3x3", 13), ("open-4x4", 14), ("stairs-6x6", 1650),
                                        ("lattice-7x7", 1281), ("none-8x8", 0)])
def test_shipped_boards(name, count):
    grid = squares.read_grid(os.path.join(DATA, f"{name}.txt"))
    result = squares.solve(grid, limit=20)
    assert result.count == count
    assert all(squares.check(grid, s) == [] for s in result.solutions)
    assert len(result.solutions) == min(count, 20)


def test_first_and_count_options(cli):
    path = os.path.join(DATA, "stairs-6x6.txt")
    first = cli("puzzle", "squares", path, "--first", "2")
    assert first.output.count("solution ") == 2 and first.output.endswith("1,650 solutions\n")
    assert cli("puzzle", "squares", path, "--count").output == "1,650 solutions\n"


def test_checker_rejects_wrong_solutions():
    grid = squares.read_grid(os.path.join(DATA, "seed.txt"))
    assert squares.check(grid, SEED_SOLUTION.replace("1225", "1226"))
    assert squares.check(grid, SEED_SOLUTION.replace("#25921", "#05921"))  # leading zero


@pytest.mark.parametrize("text,message", [
    ("..\n.x", "unknown character 'x'"),
    ("...\n..", "must be a rectangle"),
    ("##\n##", "no white cell"),
    ("\n".join(["." * 9] * 2), "at most 8 x 8"),
])
def test_bad_grids(cli, tmp_path, text, message):
    path = tmp_path / "grid.txt"
    path.write_text(text)
    result = cli("puzzle", "squares", str(path))
    assert result.exit_code == 1 and message in result.output and result.output.count("\n") == 1


@pytest.mark.parametrize("name", ["seed", "stairs-6x6", "open-3x3"])
def test_one_and_two_threads_agree(name):
    """The search deals the first cell's digits out to the threads; the answer is the same,
    solutions in the same order."""
    grid = squares.read_grid(os.path.join(DATA, f"{name}.txt"))
    one, two = squares.solve(grid, limit=30, threads=1), squares.solve(grid, limit=30, threads=2)
    assert (one.count, one.solutions, one.complete) == (two.count, two.solutions, two.complete)
    assert one.count == {"seed": 3, "stairs-6x6": 1650, "open-3x3": 13}[name]


@pytest.mark.parametrize("threads", [1, 2])
def test_count_all_false_stops_at_the_limit(threads):
    """``count_all=False`` stops the search once ``limit`` solutions are found: the count is then
    only a lower bound (``complete`` False), and the solutions kept are real ones."""
    grid = squares.read_grid(os.path.join(DATA, "stairs-6x6.txt"))
    result = squares.solve(grid, limit=3, count_all=False, threads=threads)
    assert len(result.solutions) == 3 and all(squares.check(grid, s) == [] for s in result.solutions)
    assert 3 <= result.count < 1650 and not result.complete
    # Fewer solutions than the limit: the search runs to the end and the count is exact.
    seed = squares.solve(squares.read_grid(os.path.join(DATA, "seed.txt")), limit=5, count_all=False,
                         threads=threads)
    assert seed.count == 3 and seed.complete and SEED_SOLUTION in seed.solutions
