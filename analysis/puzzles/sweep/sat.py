"""Room Sweeper as a satisfiability problem: every route of every cleaner at once, handed to the
CaDiCaL SAT solver (through PySAT); :func:`solve_sat`.

The search of :mod:`.search` chooses whole routes one after another, and its bounds cannot see
which meetings the cleaners not routed yet will have; on problems that need many meetings (q64
needs at least 8 cells cleaned by meetings) it does not finish. A SAT solver decides the steps of
all cleaners together and learns from its conflicts, which is what such problems need; it is
weak where the search is strong, at counting (more cells than steps) and at long single sweeps,
so ``auto`` in :func:`.search.solve` runs the two in turns.

CaDiCaL holds the GIL while it solves, so no Python code of the process runs meanwhile, not
even a signal handler: it solves in a child process (:class:`SatRounds`), forked once the
formula is built and kept for every round (the solver keeps what it learnt), while the command
waits for its answers in a loop that Ctrl-C and SIGTERM interrupt; the child is then killed.

The encoding (the rules of docs/puzzles.md §4, as :mod:`dobutsu_tb.analysis.puzzles.sweep` states
them):

- ``arrive(i, t, x)``: cleaner i steps onto cell x at its t-th step (1 <= t <= its budget). Only
  cells it can reach in exactly t steps have a variable (walking distance at most t, of the same
  parity). ``moves(i, t)``: it takes a t-th step, which it does only if it took the one before.
  One arrival per step it moves, none on the others; an arrival at step t >= 2 comes from a
  neighbour it arrived on at step t - 1 (at step 1, from its start cell); it never steps
  straight back (not onto the cell it arrived on at step t - 2, nor onto its start cell at step
  2). A cleaner that stands still cleans and meets nothing, so where it stands needs no
  variable. (``moves`` only restates what the arrivals say, but the solver's branching on it,
  whether a route goes on, pays on large generated problems.)
- ``meet(t, x)``: at least two cleaners arrive on x at step t (for each cleaner, some *other*
  one arrives: n + 1 clauses over the n that could). Only cells whose 3x3 block holds dirty
  floor have one.
- Dirty floor: some cleaner arrives on it, or a meeting happens in its 3x3 block. A puddle: a
  boy arrives on it. An apple (bottle): a girl (robot) arrives on it, and whoever of them
  arrives first, the lowest number on a tie, arrives next to a dust bin (recycle box) at that
  step or later, which empties her hands. Two chains of helper variables keep these clauses
  short: "cleaner g arrives next to a bin (box) at step t or later" and "one of the kind has
  arrived on the item's cell before step t".

The helper variables (meetings and chains) are only implied to be true when what they name
happens, so a model's routes obey the rules and clean the room; and any routes that the rules
accept satisfy every clause (with each helper set to whether what it names happens). So the
answer is exact both ways: a model gives routes (the tests replay them with the independent
simulator and compare with the search and with brute force), and an unsatisfiable formula
proves that no routes exist.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dobutsu_tb.analysis.puzzles import PuzzleInputError
from dobutsu_tb.analysis.puzzles.sweep.arrays import ANY, INF, NOTHING, ProblemArrays, problem_arrays
from dobutsu_tb.analysis.puzzles.sweep.problem import DIRS, Problem

#: The SAT solver PySAT runs (CaDiCaL 1.9.5, by Armin Biere and others).
SAT_SOLVER = "cadical195"
#: Largest formula :func:`solve_sat` builds, in arrival variables (about 4 KiB each, the clauses
#: and the solver together: 2.2 GiB for 512,000); :func:`sat_size` tells a problem's.
MAX_ARRIVALS = 500_000


class FormulaTooLargeError(PuzzleInputError):
    """The formula of a problem would have more than :data:`MAX_ARRIVALS` arrival variables."""


class SatResult(NamedTuple):
    """Answer of :func:`solve_sat`.

    Attributes
    ----------
    routes : list of str or None
        One route per cleaner in the problem's order, or None (no routes exist, or the solver
        gave up: see ``complete``).
    complete : bool
        False when the conflict budget ran out before an answer.
    variables, clauses : int
        Size of the formula.
    conflicts, decisions : int
        The solver's conflicts and decisions (CaDiCaL's counts).
    """

    routes: list | None
    complete: bool
    variables: int
    clauses: int
    conflicts: int
    decisions: int


def _reach(arrays, i):
    """Cells cleaner ``i`` can arrive on at each of its steps: a list, index t (0 unused), of
    arrays of cell numbers (walking distance at most t, of the parity of t)."""
    d = arrays.dist[arrays.start[i]]
    return [np.flatnonzero((d <= t) & ((t - d) % 2 == 0) & (d < INF)) if t else None
            for t in range(arrays.budget[i] + 1)]


def sat_size(arrays: ProblemArrays) -> int:
    """The number of arrival variables of a problem's formula (see the module docstring).

    Parameters
    ----------
    arrays : ProblemArrays
        The problem's :func:`~.arrays.problem_arrays`.

    Returns
    -------
    int
        Compare with :data:`MAX_ARRIVALS`.
    """
    return sum(len(cells) for i in range(arrays.kind.shape[0]) for cells in _reach(arrays, i)[1:])


class _Cnf:
    """A formula being built: its clauses (lists of non-zero ints, DIMACS style) and variables."""

    def __init__(self):
        self.clauses: list = []
        self.top = 0

    def new(self) -> int:
        """A fresh variable."""
        self.top += 1
        return self.top

    def at_most_one(self, lits: list) -> None:
        """Clauses that allow at most one of ``lits`` (pairwise for a few, a sequential counter
        for more)."""
        from pysat.card import CardEnc, EncType

        if len(lits) > 1:
            amo = CardEnc.atmost(lits, 1, top_id=self.top,
                                 encoding=EncType.seqcounter if len(lits) > 6 else EncType.pairwise)
            self.top = max(self.top, amo.nv)
            self.clauses += amo.clauses


def _formula(problem: Problem, arrays: ProblemArrays):
    """The clauses, the number of variables, and the arrival variables ``arrive[i][t]`` (a dict
    from cell to variable) to read the routes from (module docstring)."""
    cnf = _Cnf()
    arrive = [_route_clauses(cnf, arrays, i) for i in range(arrays.kind.shape[0])]
    meets_at = _meeting_clauses(cnf, arrays, arrive)
    items = _ItemClauses(cnf, arrays, arrive)
    for y in range(arrays.need.shape[0]):
        need = arrays.need[y]
        if need == ANY:  # a cleaner arrives, or a meeting on a cell of its 3x3 block
            r, c = divmod(y, problem.width)
            block = [rr * problem.width + cc for rr in range(r - 1, r + 2) for cc in range(c - 1, c + 2)
                     if 0 <= rr < problem.height and 0 <= cc < problem.width]
            cnf.clauses.append(items.arrivals(y, (0, 1, 2)) + [m for x in block for m in meets_at.get(x, [])])
        elif need != NOTHING:  # a puddle, an apple or a bottle: a cleaner of its kind arrives
            cnf.clauses.append(items.arrivals(y, (need,)))
            items.dumped(y, need)
    return cnf.clauses, cnf.top, arrive


def _route_clauses(cnf: _Cnf, arrays: ProblemArrays, i: int) -> list:
    """Cleaner ``i``'s ``arrive`` and ``moves`` variables and the clauses that make them a route:
    one arrival per step it moves, from a neighbour of the last, never straight back. Returns
    its arrival variables, a dict from cell to variable per step (index 0 unused)."""
    reach = _reach(arrays, i)
    steps = [None]
    moved = 0  # moves(i, t - 1)
    for t in range(1, arrays.budget[i] + 1):
        here = {int(x): cnf.new() for x in reach[t]}
        moves = cnf.new()
        steps.append(here)
        lits = list(here.values())
        cnf.clauses.append([-moves] + lits)
        cnf.clauses += [[-a, moves] for a in lits]
        if moved:
            cnf.clauses.append([-moves, moved])
        moved = moves
        cnf.at_most_one(lits)
        for x, a in here.items():
            if t >= 2:
                cnf.clauses.append([-a] + [steps[t - 1][y] for y in arrays.nbr[x] if y >= 0 and y in steps[t - 1]])
            if t == 2 and x == arrays.start[i]:
                cnf.clauses.append([-a])
            elif t >= 3 and x in steps[t - 2]:
                cnf.clauses.append([-a, -steps[t - 2][x]])
    return steps


def _meeting_clauses(cnf: _Cnf, arrays: ProblemArrays, arrive: list) -> dict:
    """A ``meet(t, x)`` variable for each step and cell with dirty floor in its 3x3 block that two
    cleaners could arrive on, implying that two do. Returns each cell's meeting variables."""
    n_cl, n = arrays.kind.shape[0], arrays.need.shape[0]
    dirty_block = [any(arrays.block_dirt[x]) for x in range(n)]
    meets_at = {}
    for t in range(1, int(arrays.budget.max(initial=0)) + 1):
        for x in range(n):
            if not dirty_block[x]:
                continue
            lits = [arrive[i][t][x] for i in range(n_cl) if t <= arrays.budget[i] and x in arrive[i][t]]
            if len(lits) >= 2:
                m = cnf.new()
                cnf.clauses.append([-m] + lits)
                cnf.clauses += [[-m] + lits[:k] + lits[k + 1:] for k in range(len(lits))]
                meets_at.setdefault(x, []).append(m)
    return meets_at


class _ItemClauses:
    """The arrivals on a cell, and the clauses that make whoever first takes an apple or a bottle
    dump it, with their two chains of helper variables (module docstring)."""

    def __init__(self, cnf: _Cnf, arrays: ProblemArrays, arrive: list):
        self.cnf, self.arrays, self.arrive = cnf, arrays, arrive
        self.dumps_from = {}  # cleaner -> [variable per step t]: it arrives next to a bin (box) at step t or later

    def arrivals(self, y: int, kinds, t: int | None = None) -> list:
        """The arrivals on cell y of the cleaners of some kinds (at step t only, if given)."""
        arrays, arrive = self.arrays, self.arrive
        return [arrive[i][u][y] for i in range(arrays.kind.shape[0]) if arrays.kind[i] in kinds
                for u in (range(1, arrays.budget[i] + 1) if t is None else [t])
                if u <= arrays.budget[i] and y in arrive[i][u]]

    def dumps_at_or_after(self, g: int, t: int) -> list:
        """``[v]``: cleaner g arrives next to a bin (box) at step t or later."""
        if g not in self.dumps_from:
            chain = [0] * (self.arrays.budget[g] + 2)
            for u in range(self.arrays.budget[g], 0, -1):
                chain[u] = self.cnf.new()
                here = [a for z, a in self.arrive[g][u].items() if self.arrays.dump_adj[self.arrays.kind[g], z]]
                self.cnf.clauses.append([-chain[u]] + here + ([chain[u + 1]] if chain[u + 1] else []))
            self.dumps_from[g] = chain
        return [self.dumps_from[g][t]]

    def dumped(self, y: int, need: int) -> None:
        """Whoever of kind ``need`` first arrives on the item on cell ``y`` (the lowest number on a
        tie) arrives next to where it is dumped at that step or later."""
        arrays, arrive = self.arrays, self.arrive
        kin = [i for i in range(arrays.kind.shape[0]) if arrays.kind[i] == need]
        if arrays.item_of[y] < 0 or not kin:
            return  # a puddle, or an item nobody can take (its arrival clause is empty)
        earlier = []  # [variable]: one of its kind arrived on y before step t, or nothing (t = 1)
        for t in range(1, int(max(arrays.budget[g] for g in kin)) + 1):
            for g in kin:
                if t <= arrays.budget[g] and y in arrive[g][t]:
                    lower = [arrive[h][t][y] for h in kin if h < g and t <= arrays.budget[h] and y in arrive[h][t]]
                    self.cnf.clauses.append([-arrive[g][t][y]] + earlier + lower + self.dumps_at_or_after(g, t))
            now = self.arrivals(y, (need,), t)
            if now:
                v = self.cnf.new()
                self.cnf.clauses.append([-v] + earlier + now)
                earlier = [v]


class SatRounds:
    """A problem's formula with its SAT solver, run in rounds of conflicts, each going on from
    what the solver learnt before (for ``auto`` in :func:`.search.solve`); a context manager.

    The solver lives in a child process (:class:`_SolverProcess`, module docstring), killed when
    the block ends (or the command on a signal).

    Parameters
    ----------
    problem : Problem
    arrays : ProblemArrays, optional
        The problem's :func:`~.arrays.problem_arrays`, if already computed.

    Raises
    ------
    FormulaTooLargeError
        If the formula would have more than :data:`MAX_ARRIVALS` arrival variables.
    """

    def __init__(self, problem: Problem, arrays: ProblemArrays | None = None):
        self.arrays = problem_arrays(problem) if arrays is None else arrays
        size = sat_size(self.arrays)
        if size > MAX_ARRIVALS:
            raise FormulaTooLargeError(f"the SAT formula would have {size:,} arrival variables (at most "
                                       f"{MAX_ARRIVALS:,}); try --engine search")
        self.clauses, self.variables, self.arrive = _formula(problem, self.arrays)
        self.trivial = any(not c for c in self.clauses)  # a cell no cleaner can ever clean
        self.solver = None if self.trivial else _SolverProcess(self.clauses)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.solver is not None:
            self.solver.close()

    def run(self, max_conflicts: int = 0) -> SatResult:
        """Solve on, for about ``max_conflicts`` more conflicts (0: until an answer).

        Returns
        -------
        SatResult
            With the conflicts and decisions of all rounds so far; ``complete`` False when this
            round's budget ran out.

        Raises
        ------
        dobutsu_tb.encoding.interrupt.Interrupted
            On Ctrl-C or SIGTERM while the solver runs (after :func:`~dobutsu_tb.encoding.interrupt.install`;
            else ``KeyboardInterrupt``).
        """
        if self.trivial:
            return SatResult(None, True, self.variables, len(self.clauses), 0, 0)
        answer, conflicts, decisions, model = self.solver.solve(max_conflicts)
        routes = None
        if answer:
            true = {v for v in model if v > 0}
            routes = [_route(self.arrays, i, self.arrive[i], true) for i in range(self.arrays.kind.shape[0])]
        return SatResult(routes, answer is not None, self.variables, len(self.clauses), conflicts, decisions)


class _SolverProcess:
    """CaDiCaL in a child process forked with the clauses in hand: :meth:`solve` sends it a
    round's budget and waits for the answer in a loop that signal handlers interrupt (the child
    is then killed); :meth:`close` ends it. The child dies with the command (Linux: a parent
    death signal) and ignores the terminal's Ctrl-C, which is the command's to handle."""

    def __init__(self, clauses):
        import os

        from dobutsu_tb.encoding import interrupt

        requests, self._requests = os.pipe()
        self._answers, answers = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: solve on request until the pipe closes, then leave
            code = 0
            try:
                os.close(self._requests)
                os.close(self._answers)
                _solver_child(clauses, requests, answers)
            except BaseException:  # noqa: BLE001 (the parent reports a child that stops answering)
                code = 1
            finally:
                os._exit(code)
        os.close(requests)
        os.close(answers)
        self.pid = pid
        self._exit_token = interrupt.at_exit(self._kill)

    def solve(self, max_conflicts: int):
        """(answer True/False/None, conflicts, decisions, model or None) of one more round.

        Raises
        ------
        MemoryError
            If the child ran out of memory.
        ChildProcessError
            If the child failed otherwise, or died (killed from outside).
        """
        import select

        _send(self._requests, max_conflicts)
        while not select.select([self._answers], [], [], 0.2)[0]:  # a signal handler runs between waits
            pass
        answer = _receive(self._answers)
        if answer is None:
            import os
            import signal

            _, status = os.waitpid(self.pid, 0)
            self.pid = 0
            how = (f"was killed by {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status)
                   else "ended")
            raise ChildProcessError(f"the SAT solver's process {how} before it answered")
        if isinstance(answer, str):
            if answer.startswith("MemoryError"):
                raise MemoryError("the SAT solver ran out of memory; try --engine search")
            raise ChildProcessError(f"the SAT solver failed: {answer}")
        return answer

    def _kill(self) -> None:
        import os
        import signal

        if not self.pid:
            return
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except OSError:
            pass
        self.pid = 0

    def close(self) -> None:
        """End the child (its answer no longer wanted) and reap it."""
        import os

        from dobutsu_tb.encoding import interrupt

        interrupt.forget(self._exit_token)
        self._kill()
        for fd in (self._requests, self._answers):
            try:
                os.close(fd)
            except OSError:
                pass


def _send(fd: int, obj) -> None:
    import os
    import pickle

    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    data = len(data).to_bytes(8, "little") + data
    while data:
        data = data[os.write(fd, data):]


def _receive(fd: int):
    """The next object on the pipe, or None at its end."""
    import os
    import pickle

    def exactly(n):
        parts = []
        while n:
            part = os.read(fd, min(n, 1 << 20))
            if not part:
                return None
            parts.append(part)
            n -= len(part)
        return b"".join(parts)

    head = exactly(8)
    body = None if head is None else exactly(int.from_bytes(head, "little"))
    return None if body is None else pickle.loads(body)


def _solver_child(clauses, requests: int, answers: int) -> None:
    """The child's loop: a budget in, (answer, conflicts, decisions, model) out (or the text of
    an error); ends when the parent closes the pipe. It runs on a thread other than the child's
    main one, so that PySAT installs no handler of its own for SIGINT, which the child ignores
    (the command, which gets it too, kills the child)."""
    import signal
    import threading

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:  # die with the parent, even if it is killed (Linux)
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    worker = threading.Thread(target=_solve_on_request, args=(clauses, requests, answers))
    del clauses
    worker.start()
    worker.join()


def _solve_on_request(clauses, requests: int, answers: int) -> None:
    from pysat.solvers import Solver

    solver = Solver(name=SAT_SOLVER, bootstrap_with=clauses)
    while True:
        budget = _receive(requests)
        if budget is None:
            return
        try:
            if budget > 0:
                solver.conf_budget(budget)
                answer = solver.solve_limited()
            else:
                answer = solver.solve()
            stats = solver.accum_stats()
            model = solver.get_model() if answer else None
            _send(answers, (answer, int(stats.get("conflicts", 0)), int(stats.get("decisions", 0)), model))
        except MemoryError:
            _send(answers, "MemoryError")
        except Exception as exc:  # noqa: BLE001 (reported by the parent)
            _send(answers, f"{type(exc).__name__}: {exc}")


def solve_sat(problem: Problem, max_conflicts: int = 0, arrays: ProblemArrays | None = None) -> SatResult:
    """Routes that clean the room, or a proof that none exist, by a SAT solver (see the module
    docstring).

    Parameters
    ----------
    problem : Problem
    max_conflicts : int, optional
        Give up after about this many conflicts (0, the default: never).
    arrays : ProblemArrays, optional
        The problem's :func:`~.arrays.problem_arrays`, if already computed.

    Returns
    -------
    SatResult

    Raises
    ------
    FormulaTooLargeError
        If the formula would have more than :data:`MAX_ARRIVALS` arrival variables.
    KeyboardInterrupt
        On Ctrl-C (and after :func:`~dobutsu_tb.encoding.interrupt.install`, SIGTERM) while the
        solver runs.
    """
    with SatRounds(problem, arrays) as rounds:
        return rounds.run(max_conflicts)


def _route(arrays, i, steps, true) -> str:
    """Cleaner ``i``'s route in the letters of DIRS, from the arrivals set in a model."""
    route, at = "", int(arrays.start[i])
    for here in steps[1:]:
        to = next((x for x, a in here.items() if a in true), None)
        if to is None:
            break
        route += DIRS[list(arrays.nbr[at]).index(to)]
        at = to
    return route
