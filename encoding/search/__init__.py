"""Search drivers shared by the puzzle solvers.

A puzzle supplies small jitted functions and the drivers do the rest. The drivers over
bit-packed int64 states take ``params``, an int64 array the puzzle fills (goal, tables, ...), so
one compiled function serves every instance:

- ``expand(state, out, params) -> n``: write the successor states into ``out``, return n;
- ``is_goal(state, params) -> bool``;
- ``canonical(state, params) -> int64``: the representative of the state's symmetry class (the
  state itself when symmetries are not folded). Every key a driver stores must be positive.

Drivers, one module each:

- :func:`dfs_solve` (``dfs``): depth-first search for one path to a goal, with a transposition
  table of dead states (from which no goal can be reached) in the shared hash table;
- :func:`depth_first` (``dfs``): the generic depth-first driver for states wider than an int64,
  kept by the puzzle in a context of per-depth arrays, with a goal test, a pruning bound, an
  optional table of dead nodes, and the root's choices (or the nodes at a chosen depth,
  :func:`split_depth_for`) dealt out to threads (the thread pool is :func:`run_threads`, ``pool``);
- :func:`bfs_shortest` (``bfs``): breadth-first search with parent links for a shortest path,
  the number of shortest paths, and the size of each level; states seen at any earlier level are
  skipped;
- :func:`enumerate_levels` (``levels``): level-by-level enumeration for puzzles whose every move
  leads to the next level (a jump removes a peg): distinct states and the number of paths to
  each, level by level, in hash tables with one thread per shard;
- :func:`bfs_wide_levels` (``wide``): breadth-first search by levels for states wider than one
  int64 (an Othello position) whose levels are disjoint, each level de-duplicated exactly by
  sorting rows;
- :func:`chain_levels` (``chains``): the fewest moves to every state, level by level, when a
  move is a chain of steps by one piece (peg solitaire's consecutive jumps of one peg).

:class:`FingerprintSet` (``fingerprints``) is the table of dead nodes of :func:`depth_first` for
states known by two 64-bit hashes.
"""

from dobutsu_tb.encoding.search.bfs import ShortestResult, bfs_shortest
from dobutsu_tb.encoding.search.chains import ChainLevel, chain_levels
from dobutsu_tb.encoding.search.dfs import depth_first, dfs_solve, split_depth_for
from dobutsu_tb.encoding.search.fingerprints import (
           FingerprintSet,
           fingerprint_add,
           fingerprint_find,
           fingerprint_insert,
)
from dobutsu_tb.encoding.search.levels import Level, enumerate_levels
from dobutsu_tb.encoding.search.pool import run_threads
from dobutsu_tb.encoding.search.wide import WideResult, bfs_wide_levels

__all__ = ["ChainLevel", "FingerprintSet", "Level", "ShortestResult", "WideResult", "bfs_shortest", "bfs_wide_levels",
           "chain_levels", "depth_first", "dfs_solve", "enumerate_levels", "fingerprint_add", "fingerprint_find",
           "fingerprint_insert", "run_threads", "split_depth_for"]
