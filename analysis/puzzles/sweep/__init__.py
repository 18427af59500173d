"""Room Sweeper (ルームスイーパ): routes for cleaners that leave a room clean (docs/puzzles.md §4).

Tiles: 0 dirty floor, 1 clean floor, 2 boy, 3 girl, 4 robot (start cells, already clean),
5 puddle, 6 apple, 7 bottle, 8 dust bin, 9 recycle box, 10 obstacle.

Rules as implemented (docs/puzzles.md §4 gives them for users and marks our choices where the
puzzle's statement is silent):

- Cleaners move at the same time, one orthogonal step per time step; a route is at most the
  cleaner's budget of steps. A cleaner that stops stays where it is for the rest of the game.
- A cleaner may not step straight back into the cell it just left; bins, boxes, obstacles and
  cells off the board cannot be entered; cleaners may share cells; anyone may walk over a
  puddle, apple or bottle, but only the right cleaner cleans it.
- Any cleaner cleans dirty floor; only a boy a puddle; a girl picks up an apple and a robot a
  bottle (the cell becomes clean, the item is held). A girl (robot) holding items empties them
  on stepping onto a cell orthogonally next to a dust bin (recycle box); pickup comes first.
- A *meeting*: two or more cleaners moving onto the same cell in the same step clean every dirty
  floor cell of the 3x3 block around it. (A cleaner that is standing still does not meet.)
- Solved when, after all routes, no dirty floor, puddle, apple or bottle is left and nobody
  holds an item.

The package: :mod:`.problem` (tile codes, :class:`Problem`, the problem file and the routes'
text), :mod:`.simulator` (the independent rules simulator behind ``--check`` and the tests),
:mod:`.search` (:func:`solve`, and our search) and :mod:`.sat` (the SAT solver's formula).
"""

from dobutsu_tb.analysis.puzzles.sweep.problem import (
    APPLE,
    BIN,
    BOTTLE,
    BOX,
    BOY,
    CLEAN,
    DIRS,
    DIRTY,
    GIRL,
    KINDS,
    MAX_CELLS,
    OBSTACLE,
    PUDDLE,
    ROBOT,
    STEPS,
    Problem,
    parse_problem,
    parse_routes,
    read_problem,
    routes_text,
)
from dobutsu_tb.analysis.puzzles.sweep.search import SweepResult, solve
from dobutsu_tb.analysis.puzzles.sweep.simulator import count_meetings, simulate

__all__ = ["APPLE", "BIN", "BOTTLE", "BOX", "BOY", "CLEAN", "DIRS", "DIRTY", "GIRL", "KINDS", "MAX_CELLS", "OBSTACLE",
           "PUDDLE", "ROBOT", "STEPS", "Problem", "SweepResult", "count_meetings", "parse_problem", "parse_routes",
           "read_problem", "routes_text", "simulate", "solve"]
