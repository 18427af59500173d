#!/usr/bin/env python3
"""A match: our UCI engine (``dobutsu-tb uci``) against Fairy-Stockfish, judged by our rules.

Usage: python scripts/match.py [--tb dobutsu.h5] [--positions N] [--seed S] [--fsf PATH]
       [--fsf-go "movetime 100"] [--max-plies 300] [--json]

Needs Debian's Fairy-Stockfish (apt-get install fairy-stockfish) and pyffish, its Python binding
(pip install -e '.[match]', or '.[test]'); without either it says so in one error line.

Both engines run as UCI subprocesses. The games start from the file's start position and from
N random positions of the file (a third each won, drawn and lost for the side to move, as far
as the file has them; a stored key drawn at random, shown with a random side to move and
mirror), each played twice, our engine moving first in one game and Fairy-Stockfish in the
other. Each engine gets ``position fen START moves ...`` and ``go``; Fairy-Stockfish's ``go``
has ``--fsf-go``'s limits, ours none (it answers at once).

The arbiter: every move must be legal by our rules (``parse_uci_move``) and by pyffish
(Fairy-Stockfish's Python binding, ``pyffish.legal_moves``); the game ends by our rules
(docs/rules.md §3): the lion captured, a successful try, the third occurrence of a position, or no legal
move; after ``--max-plies`` plies it is adjudicated a draw. pyffish's verdict on the end of the
game is asked at every ply too, and where it differs from ours the difference is counted (by
kind) and ours is applied. Where Fairy-Stockfish 11.1's own rules get in the way (docs/uci.md,
"Where the rules differ"):

- it offers a chick's move to the far rank without promotion (``b3b4``): read as the promotion,
  the only such move of our rules (counted);
- it treats the lion as a king that may not be left attacked, so it answers ``bestmove (none)``
  when every move leaves its lion attacked (mate or stalemate by its rules), where our rules
  make it move and lose the lion; then the arbiter plays its longest resistance from the
  tablebase for it (counted). Any other move of its that is illegal by our rules would be
  handled the same way (counted as illegal).

Prints a table: games, wins, draws and losses of our engine per value of the start for its
side, then the checks: our engine never loses a won or drawn start, wins every won start within
its DTM (in exactly its DTM when Fairy-Stockfish resists best, i.e. every move of Fairy-Stockfish
keeps the longest resistance), never drops value after Fairy-Stockfish errs (its result is at
least the tablebase's value of every position where it was to move), and plays only
DTM-optimal moves (a draw by repetition taken in a lost position counts as better). Exit code 1
when a check fails. ``--json`` prints the figures as JSON instead.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from dobutsu_tb.analysis.uci import variants as engine_variants
from dobutsu_tb.tablebase.game.layout import TRY
from dobutsu_tb.tablebase.game.notation import IllegalMoveError, parse_uci_move, play_move, uci_move_text
from dobutsu_tb.tablebase.game.position import GOTE, SENTE, Position
from dobutsu_tb.tablebase.probe import open_tablebase
from dobutsu_tb.tablebase.values import DRAW, LOSS, WIN

#: Fairy-Stockfish's name of the variant played (the file's; set by main).
FAIRY_NAME = "dobutsu"

#: Where Debian installs Fairy-Stockfish (apt-get install fairy-stockfish).
DEFAULT_FSF = "/usr/games/fairy-stockfish"
#: Seconds an engine may take to answer before the match gives up on it.
TIMEOUT = 60.0
VALUE_NAMES = {WIN: "won", DRAW: "drawn", LOSS: "lost"}
RESULT_NAMES = {WIN: "wins", DRAW: "draws", LOSS: "losses"}
#: The "value" of a move to a position the file does not cover: below every other.
OUTSIDE = -2


class EngineError(RuntimeError):
    """An engine died, or did not answer in time."""


class UciProcess:
    """A UCI engine in a subprocess: send lines, read its output with a timeout."""

    #: A file that every line sent and received is written to (``--log``), or None.
    log = None

    def __init__(self, name: str, argv: list[str]):
        self.name = name
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, bufsize=1)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.errors: list[str] = []

    def _read(self) -> None:
        for line in self.proc.stdout:
            if self.log:
                self.log.write(f"{self.name} > {line}")
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def send(self, line: str) -> None:
        if self.log:
            self.log.write(f"{self.name} < {line}\n")
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except OSError as exc:
            raise EngineError(f"{self.name} is gone ({exc}): {self.stderr()}") from exc

    def expect(self, prefix: str) -> list[str]:
        """The lines up to and including the first that starts with ``prefix``."""
        out = []
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise EngineError(f"{self.name} did not answer {prefix!r} in {TIMEOUT:.0f} s") from None
            if line is None:
                raise EngineError(f"{self.name} exited: {self.stderr()}")
            out.append(line)
            if line.startswith("info string error"):
                self.errors.append(line)
            if line.split()[:1] == [prefix]:
                return out

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        return self.proc.stderr.read()[-500:]

    def start(self, variant_path: str | None = None) -> None:
        self.send("uci")
        self.expect("uciok")
        if variant_path:
            self.send(f"setoption name VariantPath value {variant_path}")
        self.send(f"setoption name UCI_Variant value {FAIRY_NAME}")
        self.send("isready")
        self.expect("readyok")

    def bestmove(self, fen: str, moves: list[str], go: str) -> str:
        self.send(f"position fen {fen}" + (" moves " + " ".join(moves) if moves else ""))
        self.send(f"go {go}".strip())
        return self.expect("bestmove")[-1].split()[1]

    def close(self) -> None:
        try:
            self.send("quit")
            self.proc.wait(timeout=10)
        except (EngineError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


@dataclass
class Game:
    """One game and what the arbiter saw."""

    start: str
    ours: int  # our engine's side (SENTE or GOTE)
    value: int  # the start's value for our engine's side
    dtm: int  # its DTM in plies (0 for a draw)
    moves: list = field(default_factory=list)
    result: int | None = None  # for our engine: WIN, DRAW or LOSS
    end: str = ""
    fsf_optimal: bool = True  # every Fairy-Stockfish move kept its best value and DTM
    fsf_errors: int = 0  # Fairy-Stockfish moves that threw away value (win -> draw/loss, draw -> loss)
    notes: list = field(default_factory=list)  # what happened, for --verbose
    best_value: int = LOSS  # the best tablebase value our engine had when it was to move
    problems: list = field(default_factory=list)


def mover_value(tb, position: Position, move: int) -> tuple[int, int]:
    """(WDL, DTM in plies) of a move for the side that plays it; (-2, 0) when the file does not
    cover the position after it (which happens only after a catch-terminal position)."""
    child = play_move(position, move)
    if child is None:
        return WIN, 1
    found = tb.get_wdl(child)
    if found is None:
        return OUTSIDE, 0
    wdl, dtm, _ = tb.value(child)  # (the arbiter's own reckoning, not the engine's: it judges it)
    return -wdl, (abs(dtm) + 1 if wdl != DRAW else 0)


def best_moves(tb, position: Position) -> tuple[tuple[int, int], list[int]]:
    """The best value a move reaches for the mover and the moves that reach it."""
    scored = [(mover_value(tb, position, int(m)), int(m)) for m in position.game.legal_moves(position.state())]

    def rank(v):
        wdl, dtm = v
        return (wdl, -dtm if wdl == WIN else dtm if wdl == LOSS else 0)

    top = max(rank(v) for v, _ in scored)
    best = [m for v, m in scored if rank(v) == top]
    return next(v for v, _ in scored if rank(v) == top), best


def random_starts(tb, n: int, rng: random.Random) -> list[Position]:
    """``n`` random stored positions, a third each won, drawn and lost where the file has them
    (rejection sampling, at most 200 draws a position), with a random side to move and mirror."""
    f = tb._file
    want = {WIN: n - 2 * (n // 3), DRAW: n // 3, LOSS: n // 3}
    out: list[Position] = []
    tries = 0
    while sum(want.values()) and tries < 200 * n:
        tries += 1
        i = rng.randrange(f.n)
        key = int(f.read_keys(i // f.key_chunk)[i % f.key_chunk])
        pos = Position.from_key(key, tb.variant)
        pos = Position.from_state(pos.state(), rng.choice((SENTE, GOTE)), tb.variant)
        pos = pos.mirror() if rng.random() < 0.5 else pos
        wdl = tb.probe_wdl(pos)
        if want[wdl]:
            want[wdl] -= 1
            out.append(pos)
    return out


def over_by_our_rules(position: Position | None, seen: Counter) -> tuple[int | None, str]:
    """(result for the side to move, how) when the game is over by our rules, else (None, "")."""
    if position is None:
        return LOSS, "lion captured"
    if position.game.classify(position.state()) == TRY:
        return LOSS, "try"
    if seen[position] >= 3:
        return DRAW, "repetition"
    if position.game.legal_moves(position.state()).size == 0:
        return LOSS, "no legal move"
    return None, ""


def over_by_pyffish(fen: str, moves: list[str]) -> int | None:
    """pyffish's result for the side to move when it calls the game over, else None."""
    import pyffish

    over, value = pyffish.is_immediate_game_end(FAIRY_NAME, fen, moves)
    if not over:
        over, value = pyffish.is_optional_game_end(FAIRY_NAME, fen, moves)
    if not over and not pyffish.legal_moves(FAIRY_NAME, fen, moves):
        over, value = True, pyffish.game_result(FAIRY_NAME, fen, moves)
    if not over:
        return None
    return WIN if value > 0 else LOSS if value < 0 else DRAW


def play_game(tb, ours: UciProcess, fsf: UciProcess, start: Position, our_side: int, fsf_go: str,
              max_plies: int, stats: Counter) -> Game:
    import pyffish

    wdl, dtm, _ = tb.value(start)
    value = wdl if start.turn == our_side else -wdl
    game = Game(start.text(), our_side, value, abs(dtm))
    fen = start.fen()
    position: Position | None = start
    seen: Counter = Counter([start])
    for ply in range(max_plies + 1):
        result, how = over_by_our_rules(position, seen)
        theirs = over_by_pyffish(fen, game.moves)
        if theirs != result:
            stats[f"pyffish differs: {how or 'not over'} by our rules, "
                  f"{'not over' if theirs is None else VALUE_NAMES[theirs]} by pyffish"] += 1
        if result is not None:
            mover_is_ours = (start.turn + ply) % 2 == our_side
            game.result = result if mover_is_ours else -result
            game.end = how
            return game
        if ply == max_plies:
            break
        mover_is_ours = position.turn == our_side
        engine = ours if mover_is_ours else fsf
        (best_wdl, best_dtm), best = best_moves(tb, position)
        if mover_is_ours:
            game.best_value = max(game.best_value, best_wdl)
        text = engine.bestmove(fen, game.moves, "" if mover_is_ours else fsf_go)
        try:
            move = parse_uci_move(position, text)
        except IllegalMoveError as exc:
            if mover_is_ours:
                raise EngineError(f"our engine played an illegal move in {position.text()}: {exc}") from None
            stats["Fairy-Stockfish: no move by its rules (arbiter moved)" if text == "(none)"
                  else "Fairy-Stockfish: illegal moves (arbiter moved)"] += 1
            move = best[0]
            game.notes.append(f"ply {ply + 1}: Fairy-Stockfish answered {text} in {position.fen()} ({exc}); "
                              f"the arbiter played {uci_move_text(position, move)}")
        uci = uci_move_text(position, move)
        if uci != text and text != "(none)":
            stats["Fairy-Stockfish: moves to the far rank read as promotions"] += 1
        if uci not in pyffish.legal_moves(FAIRY_NAME, fen, game.moves):
            raise EngineError(f"pyffish refuses {uci} in {position.text()} (legal by our rules)")
        wdl_after, dtm_after = mover_value(tb, position, move)
        child = play_move(position, move)
        repetition_draw = child is not None and seen[child] >= 2
        if mover_is_ours:
            stats["our engine: moves"] += 1
            if move not in best and not (repetition_draw and best_wdl == LOSS):
                game.problems.append(f"ply {ply + 1}: {uci} is not DTM-optimal in {position.text()}")
        else:
            stats["Fairy-Stockfish: moves"] += 1
            if (wdl_after, dtm_after) != (best_wdl, best_dtm):
                game.fsf_optimal = False
            if wdl_after < best_wdl:
                game.fsf_errors += 1
                game.notes.append(f"ply {ply + 1}: Fairy-Stockfish's {uci} in {position.fen()} turns a "
                                  f"{VALUE_NAMES[best_wdl]} position into a {VALUE_NAMES[wdl_after]} one")
        game.moves.append(uci)
        if wdl_after == OUTSIDE:
            game.result, game.end = DRAW, "left the tablebase (adjudicated a draw)"
            return game
        position = child
        if position is not None:
            seen[position] += 1
    game.result, game.end = DRAW, "ply limit"
    return game


def check(game: Game) -> list[str]:
    """What our engine did wrong in a game (empty when nothing)."""
    out = list(game.problems)
    if game.result < game.value and game.value != LOSS:
        out.append(f"{VALUE_NAMES[game.result]} a {VALUE_NAMES[game.value]} start")
    if game.result < game.best_value:
        out.append(f"{VALUE_NAMES[game.result]} after reaching a {VALUE_NAMES[game.best_value]} position")
    if game.value == WIN and game.result == WIN:
        if len(game.moves) > game.dtm:
            out.append(f"won in {len(game.moves)} plies, more than the DTM {game.dtm}")
        if game.fsf_optimal and len(game.moves) != game.dtm:
            out.append(f"won in {len(game.moves)} plies against best resistance, not in the DTM {game.dtm}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tb", default=os.environ.get("DOBUTSU_TB", "dobutsu.h5"))
    parser.add_argument("--positions", type=int, default=30, help="random start positions (each played twice)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--fsf", default=os.environ.get("DOBUTSU_TB_FAIRY_STOCKFISH", DEFAULT_FSF))
    parser.add_argument("--fsf-go", default="movetime 100", help="Fairy-Stockfish's go limits")
    parser.add_argument("--max-plies", type=int, default=300)
    parser.add_argument("--variants-ini", default=str(Path(__file__).resolve().parent.parent / "tests" / "data"
                                                      / "fairy-variants.ini"),
                        help="Fairy-Stockfish's definitions of the variants other than dobutsu (VariantPath)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--verbose", action="store_true", help="print every game's moves and events")
    parser.add_argument("--log", type=argparse.FileType("w"), help="write every UCI line sent and received there")
    args = parser.parse_args()
    try:
        import pyffish  # noqa: F401 -- the arbiter's second judge, asked at every ply
    except ImportError:
        print("error: scripts/match.py needs pyffish, Fairy-Stockfish's Python binding, which the main install "
              "leaves out: pip install -e '.[match]' (or '.[test]')", file=sys.stderr)
        return 1
    if shutil.which(args.fsf) is None:
        print(f"error: no Fairy-Stockfish at {args.fsf} (apt-get install fairy-stockfish)", file=sys.stderr)
        return 1

    UciProcess.log = args.log
    rng = random.Random(args.seed)
    stats: Counter = Counter()
    games: list[Game] = []
    t0 = time.perf_counter()
    global FAIRY_NAME
    with open_tablebase(args.tb) as tb:
        FAIRY_NAME = engine_variants(tb)[0]  # the name our engine offers (docs/uci.md, "Variants")
        variant_path = None
        if FAIRY_NAME != "dobutsu":  # Fairy-Stockfish knows only dobutsu itself: define the others
            import pyffish

            variant_path = args.variants_ini
            pyffish.load_variant_config(Path(variant_path).read_text(encoding="utf-8"))
        starts = [Position.from_text(tb.metadata.start, tb.variant), *random_starts(tb, args.positions, rng)]
        ours = UciProcess("our engine", [sys.executable, "-m", "dobutsu_tb.analysis.cli", "uci", "--tb", args.tb])
        fsf = UciProcess("Fairy-Stockfish", [args.fsf])
        try:
            ours.start()
            fsf.start(variant_path)
            for start in starts:
                for our_side in (start.turn, 1 - start.turn):
                    for engine in (ours, fsf):
                        engine.send("ucinewgame")
                    games.append(play_game(tb, ours, fsf, start, our_side, args.fsf_go, args.max_plies, stats))
        finally:
            ours.close()
            fsf.close()
    seconds = time.perf_counter() - t0

    table = {name: Counter() for name in VALUE_NAMES.values()}
    failures = []
    for g in games:
        row = table[VALUE_NAMES[g.value]]
        row["games"] += 1
        row[RESULT_NAMES[g.result]] += 1
        stats[f"games ended by: {g.end}"] += 1
        if g.value == WIN:
            stats["won starts: won within the DTM"] += g.result == WIN and len(g.moves) <= g.dtm
            stats["won starts: Fairy-Stockfish resisted best"] += g.fsf_optimal
            stats["won starts: won in exactly the DTM against best resistance"] += (
                g.fsf_optimal and g.result == WIN and len(g.moves) == g.dtm)
        if g.value == LOSS and g.fsf_errors:
            stats["lost starts where Fairy-Stockfish erred"] += 1
            stats[f"lost starts where Fairy-Stockfish erred: our engine {RESULT_NAMES[g.result]}"] += 1
        failures += [f"{g.start} (our engine {('Sente', 'Gote')[g.ours]}): {p}" for p in check(g)]
        if args.verbose and not args.json:
            print(f"{g.start}, our engine {('Sente', 'Gote')[g.ours]}, {VALUE_NAMES[g.value]} for it: "
                  f"{VALUE_NAMES[g.result]} ({g.end}) after {len(g.moves)} plies: {' '.join(g.moves)}",
                  *g.notes, sep="\n    ")
    stats["engine errors (info string error)"] = len(ours.errors)
    if args.json:
        print(json.dumps({"table": table, "stats": stats, "failures": failures, "games": len(games),
                          "seconds": round(seconds, 1)}, indent=1))
    else:
        print(f"{len(games)} games from {len(starts)} start positions ({args.tb}; Fairy-Stockfish: go {args.fsf_go}), "
              f"{seconds:.0f} s")
        print(f"{'start (our side)':<18}{'games':>7}{'wins':>7}{'draws':>7}{'losses':>8}")
        for name, row in table.items():
            print(f"{name:<18}{row['games']:>7}{row['wins']:>7}{row['draws']:>7}{row['losses']:>8}")
        print()
        for key in sorted(stats):
            print(f"{key}: {stats[key]}")
        print("failures:" if failures else "no failures", *failures, sep="\n  ")
    return 1 if failures or ours.errors else 0


if __name__ == "__main__":
    sys.exit(main())
