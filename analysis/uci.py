"""A UCI engine that plays perfectly from a tablebase, in Fairy-Stockfish's dialect.

``dobutsu-tb uci`` speaks the protocol of UCI chess engines as Fairy-Stockfish extends it for
its variants (``setoption name UCI_Variant value dobutsu``, its FEN ``gle/1c1/1C1/ELG[-] w 0 1``,
its move strings ``b2b3``, ``a3a4+``, ``C@b3``), so that GUIs and match tools that drive
Fairy-Stockfish can use the tablebase: as an opponent, as an analysis engine and as a referee.

Commands (one a line, tokens separated by white space): ``uci``, ``debug [on|off]``,
``isready``, ``setoption name ID [value X]``, ``register``, ``ucinewgame``, ``position
startpos|fen FEN [moves M ...]``, ``go [...]``, ``stop``, ``ponderhit``, ``quit``, and ``d``
(the position, as ``info string`` lines). ``go`` takes any of UCI's limits and is answered at
once; only ``go infinite`` and ``go ponder`` keep their ``bestmove`` until ``stop`` (or
``ponderhit``), as UCI requires. ``depth N`` cuts the principal variations at N plies and
``searchmoves`` restricts the moves considered.

Values (:func:`uci_score`): a win in n plies (the tablebase's DTM, docs/rules.md §7) is ``score mate
(n + 1) // 2``, the winner's moves up to and including the lion's capture or the successful try;
a loss in n plies is ``score mate -(n // 2)``, the loser's moves; a draw is ``score cp 0``. A side
to move whose game is over (the enemy lion made its try, or its own lion was captured) gets
``info depth 0 score mate 0`` and ``bestmove (none)``, as Stockfish answers a mated position.
``bestmove`` is DTM-optimal: the fastest win (a lion capture before a try of the same length),
else a drawing move, else the longest resistance (among equally long ones, a move that does not
leave the lion attacked, which engines with a royal lion would refuse). ``MultiPV`` (up to 500) lists that many
moves, best first, each with its exact value, so a high value lists every move.

Repetition (docs/rules.md §3: the third occurrence of a position is a draw) is judged over the game
the ``position`` command gives: a move to a position that has already occurred twice is a draw
(``cp 0``), which the engine takes when every other move loses; among drawing moves it prefers
one that repeats nothing, so that the game goes on. Only the root's moves are judged so; the
values are otherwise the tablebase's, which take no history into account (after each of the
winner's DTM-optimal moves the DTM is shorter, so a win played by the engine since it arose
never meets a repetition).

A legal position the file does not hold still gets a move (:func:`outside_moves`: the best the
rules and the file can value one ply deep), with an ``info string`` saying so: ``bestmove
(none)`` only when the side to move has no legal move. The ``UCI_Variant`` names offered are
:func:`variants`'.

Errors never stop the engine and never print a traceback: a malformed line, an unknown command
or option, a bad FEN or an illegal move is answered with one line ``info string error: ...``;
``go`` without a valid position answers ``bestmove (none)``. A ``position`` command's FEN is
read at once, its moves are played when a ``go`` (or ``d``) needs them, so an illegal move is
reported then. Lines longer than :data:`MAX_LINE_BYTES` are skipped whole.

Threads: the main thread reads the commands and answers them, ``isready`` at once even while a
search runs; each ``go`` runs on a worker thread, which replays the game and is the only one
that probes the tablebase.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import BinaryIO, Callable

from dobutsu_tb.analysis.reports import parse_position
from dobutsu_tb.tablebase.game.layout import CATCH, TRY
from dobutsu_tb.tablebase.game.notation import (
    IllegalMoveError,
    move_text,
    parse_uci_move,
    play_move,
    quote_move,
    uci_move_text,
    uci_of_move_text,
)
from dobutsu_tb.tablebase.game.position import Position, PositionError
from dobutsu_tb.tablebase.game.variant import Variant, shipped_twin, shipped_variants, standard_variant
from dobutsu_tb.tablebase.probe import MissingPositionError, MoveValue, Tablebase
from dobutsu_tb.tablebase.schema import TablebaseFileError
from dobutsu_tb.tablebase.values import DRAW, LOSS, WIN, Terminal, move_rank, move_tie

ENGINE_NAME = "dobutsu-tb"
ENGINE_AUTHOR = "the dobutsu-tablebase authors"
#: The longest command line read (64 KiB: about 13,000 moves of a ``position`` command); a longer
#: one is skipped whole, with an error.
MAX_LINE_BYTES = 1 << 16
#: MultiPV's range (Fairy-Stockfish's).
MAX_MULTIPV = 500
#: The most plies of a drawn principal variation (a won or lost one runs to the end of the game).
DRAW_PV_PLIES = 16
#: The longest text of an ``info string`` line (messages are cut there).
MAX_INFO_CHARS = 400

_COMMANDS = ("uci", "debug", "isready", "setoption", "register", "ucinewgame", "position", "go", "stop",
             "ponderhit", "quit", "d")
_GO_VALUES = ("wtime", "btime", "winc", "binc", "movestogo", "depth", "nodes", "mate", "movetime")
_GO_FLAGS = ("infinite", "ponder")


#: The variants Fairy-Stockfish knows by itself (pyffish 0.0.90's ``pyffish.variants()``): a
#: variant of ours whose rules are not a shipped one's is never offered under one of these names.
FAIRY_STOCKFISH_VARIANTS = frozenset("""
    3check 5check ai-wok almost amazon amazons antichess armageddon asean ataxx atomar atomic berolina
    breakthrough bughouse cambodian capablanca capahouse caparandom centaur chancellor chaturanga checkshogi
    chess chessgi chigorin clobber clobber10 codrus coregal courier crazyhouse dobutsu dragon duck embassy
    euroshogi extinction fairy fischerandom flipello flipello10 flipersi fox-and-hounds gardner georgian giveaway
    gorogoro gothic grand grasshopper gustav3 hoppelpoppel horde isolation isolation7x7 janggi janggicasual
    janggimodern janggitraditional janus jesonmor joust judkins karouk kinglet kingofthehill knightmate koedem
    kyotoshogi legan loop losalamos losers makpong makruk manchu micro mini minishogi minixiangqi misere modern
    newzealand nightrider nocastle nocheckatomic normal okisakishogi omicron opulent paradigm pawnback
    pawnsideways perfect petrified placement pocketknight raazuvaa racingkings seirawan shako shatar shatranj
    shogi shoshogi shouse sittuyin snailtrail sortofalmost spartan suicide supply tencubed threekings torishogi
    torpedo troitzky wolf xiangqi yarishogi""".split())
#: What a variant's own name gets when it is a name that another game goes by (docs/uci.md).
OWN_NAME_SUFFIX = "-custom"


# --- the game: every game-specific call of the engine (the variant, FEN, UCI moves) ----------

def variants(tb: Tablebase) -> list[str]:
    """The ``UCI_Variant`` names the engine plays with this file (docs/uci.md, "Variants").

    A file whose rules are a shipped variant's (:func:`~dobutsu_tb.tablebase.game.variant.shipped_twin`,
    whatever the names and titles) is played under that variant's Fairy-Stockfish name
    (``dobutsu``, ``dobutsu5x3``) and, when it differs, ours (``dobutsu-5x3``). Any other is
    played under its own name as written, hyphens kept (``dobu-tsu``), so that a GUI never takes
    it for a game Fairy-Stockfish plays; a name that another game goes by (a shipped variant's,
    or one of :data:`FAIRY_STOCKFISH_VARIANTS`, in any case) gets :data:`OWN_NAME_SUFFIX`
    (``shogi-custom``)."""
    twin = shipped_twin(tb.variant)
    if twin is not None:
        return [twin.fairy_name] + ([twin.name] if twin.name != twin.fairy_name else [])
    taken = FAIRY_STOCKFISH_VARIANTS | {n for v in shipped_variants().values() for n in (v.name, v.fairy_name)}
    name = tb.variant.name
    return [name + OWN_NAME_SUFFIX if name.lower() in taken else name]


def start_position(variant: Variant) -> Position:
    """The variant's start position (UCI's ``startpos``)."""
    return Position.start(variant)


def play_uci(position: Position, text: str) -> Position | None:
    """The position after the UCI move ``text``, None when it captures the lion.

    Raises
    ------
    IllegalMoveError
        If the text names no legal move of ``position``.
    """
    return play_move(position, parse_uci_move(position, text))


def normal_uci(position: Position, text: str) -> str:
    """The UCI move ``text`` as the engine writes it (``b3b4`` -> ``b3b4+``, ``c@b2`` -> ``C@b2``).

    Raises
    ------
    IllegalMoveError
        If the text names no legal move of ``position``.
    """
    return uci_move_text(position, parse_uci_move(position, text))


def uci_of(move: str, variant: Variant) -> str:
    """The UCI string of a move in our notation (:attr:`MoveValue.move`)."""
    return uci_of_move_text(move, variant)


def has_moves(position: Position) -> bool:
    """Whether the side to move has a legal move (False once the game is over)."""
    return position.game.legal_moves(position.state()).size > 0


def outside_moves(tb: Tablebase, root: Position) -> list[MoveValue]:
    """The moves of a position the file does not hold, each with the value that the rules or the
    file can give it, else unknown (``wdl`` None): a capture of the lion, a safe try, or a move
    that leaves the opponent no move wins in 1 ply; a move that leaves the lion to be captured,
    or after which the opponent's lion can make a safe try, loses in 2; a move to a position
    the file holds has the file's value. In the order of generation (:func:`rank_moves` sorts)."""
    game = root.game
    out = []
    for mv in game.legal_move_list(root.state()):
        child = play_move(root, mv)
        text = move_text(root, mv)
        if child is None:  # the lion's capture
            out.append(MoveValue.after(text, None, LOSS, 0, Terminal.ROYAL_CAPTURED))
            continue
        state = child.state()
        cls = game.classify(state)
        if cls == TRY:
            out.append(MoveValue.after(text, child, LOSS, 0, Terminal.TRY))
            continue
        if cls == CATCH:
            out.append(MoveValue.after(text, child, WIN, 1, Terminal.CATCH))
            continue
        tb.probes += 1
        found = tb.lookup_key(game.key_of(state))
        if found is not None:
            out.append(MoveValue.after(text, child, found[0], found[1]))
            continue
        replies = game.legal_move_list(state)
        if not replies:  # the opponent has no move: a loss in 0 (docs/rules.md §3)
            out.append(MoveValue.after(text, child, LOSS, 0))
        elif any(game.classify(after.state()) == TRY for after in (play_move(child, r) for r in replies)
                 if after is not None):
            out.append(MoveValue.after(text, child, WIN, 1))  # its lion's try wins at once
        else:
            out.append(MoveValue(text, child, None, None))
    return out


def _outside_group(line: "Line") -> int:
    """Where a move of a position outside the file stands: a known win or draw first, then a move
    of unknown value (it may draw or win), then a known loss."""
    return 1 if line.wdl is None else 2 if line.wdl == LOSS else 0


# --- values --------------------------------------------------------------------------------------

def uci_score(wdl: int, plies: int) -> str:
    """UCI's ``score`` of a value for the side to move: ``mate (n + 1) // 2`` for a win in n plies,
    ``mate -(n // 2)`` for a loss in n plies (``mate 0`` when it is already over), ``cp 0`` for a
    draw.

    Parameters
    ----------
    wdl : int
        1 win, 0 draw, -1 loss.
    plies : int
        DTM in plies (unsigned; ignored for a draw).
    """
    if wdl == WIN:
        return f"mate {(plies + 1) // 2}"
    if wdl == LOSS:
        return f"mate {-(plies // 2)}"
    return "cp 0"


@dataclass
class Line:
    """One root move and its value for the side that plays it (docs/rules.md §7).

    Attributes
    ----------
    uci : str
        The move in UCI notation.
    wdl : int or None
        1 win, 0 draw, -1 loss for the mover; None when the file does not cover the position
        after it.
    dtm : int
        The mover's signed DTM in plies (0 for a draw).
    child : Position or None
        The position after the move, None when it captures the lion.
    repeats : int
        How often the position after the move has occurred in the game before it.
    repetition : bool
        The move makes a position occur for the third time: a draw.
    capture : bool
        The move captures the lion.
    hangs : bool
        The move leaves the mover's lion where the opponent can capture it.
    pv : list of str
        The principal variation, the move first.
    """

    uci: str
    wdl: int | None
    dtm: int
    child: Position | None
    repeats: int = 0
    repetition: bool = False
    capture: bool = False
    hangs: bool = False
    pv: list = field(default_factory=list)

    @property
    def plies(self) -> int:
        """The DTM without its sign."""
        return abs(self.dtm)

    def order(self) -> tuple:
        """Sort key, best first: the tablebase's order (wins fastest, draws, losses slowest,
        unknown last: :func:`~dobutsu_tb.tablebase.values.move_rank`), and among equals the one
        tie-break of every surface (:func:`~dobutsu_tb.tablebase.values.move_tie`: a lion capture
        before a try, a loss that does not leave the lion attacked, which engines and GUIs whose
        lion is a royal king, as Fairy-Stockfish 11.1's, call illegal), or for draws the one that
        repeats least."""
        if self.wdl == DRAW:
            return move_rank(self.wdl, self.dtm), self.repeats
        terminal = Terminal.ROYAL_CAPTURED if self.capture else Terminal.CATCH if self.hangs else None
        return move_rank(self.wdl, self.dtm), move_tie(self.wdl, terminal)


def rank_moves(moves: list[MoveValue], seen: Counter, variant: Variant | None = None) -> list[Line]:
    """The root moves as :class:`Line` objects, best first.

    Parameters
    ----------
    moves : list of MoveValue
        :meth:`Tablebase.probe_moves` of the root.
    seen : Counter
        Occurrences of each position in the game so far, the root included.
    """
    variant = variant or standard_variant()
    lines = []
    for m in moves:
        line = Line(uci_of(m.move, variant), m.wdl, m.dtm or 0, m.position,
                    capture=m.terminal == Terminal.ROYAL_CAPTURED, hangs=m.terminal == Terminal.CATCH)
        if m.position is not None:
            line.repeats = seen[m.position]
            if m.repeats_third_time(seen):
                line.wdl, line.dtm, line.repetition = DRAW, 0, True
        lines.append(line)
    lines.sort(key=Line.order)
    return lines


# --- the engine ----------------------------------------------------------------------------------

class _CountingTablebase(Tablebase):
    """A :class:`Tablebase` that counts its position look-ups (UCI's ``nodes`` and ``tbhits``)."""

    probes = 0

    def value(self, position):
        self.probes += 1
        return super().value(position)


@dataclass
class _Job:
    """One ``go``: what to search and how it ends."""

    game: tuple | None  # UciEngine._game: what to replay
    multipv: int
    depth: int | None
    searchmoves: list
    wait: bool  # go infinite / go ponder: bestmove only after stop or ponderhit
    started: float = field(default_factory=time.perf_counter)
    stop: threading.Event = field(default_factory=threading.Event)  # stop: cut the lines short
    release: threading.Event = field(default_factory=threading.Event)  # stop or ponderhit: bestmove may go
    thread: threading.Thread | None = None


class UciEngine:
    """The protocol state machine over an open tablebase.

    Parameters
    ----------
    tb_path : str or Path
        The tablebase file; opened here, read lazily (one chunk at a time) unless ``in_memory``.
    write : callable
        Called with each output line (without its newline), from the reading thread and the
        search thread; it must write the line whole and flush it.
    in_memory : bool, optional
        Read the whole file at once (:func:`~dobutsu_tb.tablebase.probe.open_tablebase`).

    Raises
    ------
    TablebaseFileError
        If the file is missing, damaged or not a tablebase.
    """

    def __init__(self, tb_path, write: Callable[[str], None], in_memory: bool = False):
        self.tb = _CountingTablebase(tb_path, in_memory=in_memory)
        self._write = write
        self._lock = threading.Lock()
        self.variants = variants(self.tb)
        self.variant = self.variants[0]
        self.multipv = 1
        self.debug = False
        self._job: _Job | None = None
        # The last position command, replayed when a go (or d) needs it: (base, its position,
        # the move texts), base ("startpos",) or ("fen", text); or None after a malformed one,
        # and why. Before any position command: the start position.
        self._game: tuple | None = (("startpos",), start_position(self.tb.variant), [])
        self._error: str | None = None
        # The last game replayed (base, moves, positions), whose common start a new position
        # command does not replay again; the lock keeps d and a search from replaying at once.
        self._replayed: tuple = ((), [], [])
        self._replay_lock = threading.Lock()

    # --- output ----------------------------------------------------------------------------

    def send(self, line: str) -> None:
        """Write one line (thread-safe)."""
        with self._lock:
            self._write(line)

    def info(self, text: str) -> None:
        """``info string TEXT``, on one line and at most :data:`MAX_INFO_CHARS` characters."""
        text = " ".join(text.split())
        if len(text) > MAX_INFO_CHARS:
            text = text[: MAX_INFO_CHARS - 3] + "..."
        self.send(f"info string {text}")

    def error(self, text: str) -> None:
        """``info string error: TEXT``."""
        self.info(f"error: {text}")

    # --- input -----------------------------------------------------------------------------

    def run(self, stream: BinaryIO) -> None:
        """Read commands from ``stream`` until ``quit`` or the end of input, then stop any search.

        Lines are read as UTF-8 (bad bytes replaced), at most :data:`MAX_LINE_BYTES` each.
        """
        try:
            while True:
                raw = stream.readline(MAX_LINE_BYTES + 1)
                if not raw:
                    break
                if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                    total = len(raw) + _skip_line(stream)
                    self.error(f"a line of {total:,} bytes skipped (at most {MAX_LINE_BYTES:,})")
                    continue
                if not self.handle(raw.decode("utf-8", "replace")):
                    break
        finally:
            self.stop_search()

    def handle(self, line: str) -> bool:
        """Carry out one command line; False after ``quit``."""
        tokens = line.split()
        if not tokens:
            return True
        if tokens[0] not in _COMMANDS:
            # UCI: skip unknown tokens and try the rest of the line ("joho debug on" is "debug on").
            known = next((i for i, t in enumerate(tokens) if t in _COMMANDS), None)
            if known is None:
                self.error(f"unknown command {quote_move(tokens[0])} (commands: {', '.join(_COMMANDS)})")
                return True
            self.error(f"unknown {quote_move(' '.join(tokens[:known]))} before {tokens[known]!r} ignored")
            tokens = tokens[known:]
        command, args = tokens[0], tokens[1:]
        try:
            return getattr(self, f"_cmd_{command}")(args) is not False
        except Exception as exc:  # noqa: BLE001 -- the engine stays up whatever a line does
            self.error(f"{command}: internal error: {type(exc).__name__}: {exc}")
            return True

    # --- commands --------------------------------------------------------------------------

    def _cmd_uci(self, args):
        self.send(f"id name {ENGINE_NAME} (perfect play from {self.tb.path.name})")
        self.send(f"id author {ENGINE_AUTHOR}")
        self.send("option name UCI_Variant type combo default " + self.variant
                  + "".join(f" var {v}" for v in self.variants))
        self.send(f"option name MultiPV type spin default 1 min 1 max {MAX_MULTIPV}")
        self.send("option name Ponder type check default false")
        self.send("uciok")

    def _cmd_debug(self, args):
        if args not in ([], ["on"], ["off"]):
            self.error(f"debug takes on or off, not {quote_move(' '.join(args))}")
            return
        self.debug = args != ["off"]

    def _cmd_isready(self, args):
        self.send("readyok")

    def _cmd_register(self, args):
        pass  # nothing to register

    def _cmd_ucinewgame(self, args):
        with self._replay_lock:
            self._replayed = ((), [], [])

    def _cmd_setoption(self, args):
        if not args or args[0] != "name":
            self.error("setoption needs 'name ID [value X]'")
            return
        words = args[1:]
        cut = words.index("value") if "value" in words else len(words)
        name, value = " ".join(words[:cut]), " ".join(words[cut + 1:])
        key = name.lower()
        if key == "uci_variant":
            match = [v for v in self.variants if v.lower() == value.lower()]
            if not match:
                self.error(f"variant {quote_move(value)} is not played here; this tablebase's: "
                           + ", ".join(self.variants))
                return
            self.variant = match[0]
        elif key == "multipv":
            if not (value.isascii() and value.isdigit() and 1 <= int(value) <= MAX_MULTIPV):
                self.error(f"MultiPV is a whole number from 1 to {MAX_MULTIPV}, not {quote_move(value)}")
                return
            self.multipv = int(value)
        elif key == "ponder":
            if value.lower() not in ("true", "false"):
                self.error(f"Ponder is true or false, not {quote_move(value)}")
        else:
            self.error(f"no option {quote_move(name)} (options: UCI_Variant, MultiPV, Ponder)")

    def _cmd_position(self, args):
        # Only the command and its FEN are read here; the moves are played when a go needs them
        # (on the search thread), so that isready is answered at once after the longest game.
        try:
            self._game, self._error = _parse_position_args(args, self.tb.variant), None
        except (PositionError, ValueError) as exc:
            self._game, self._error = None, str(exc)
            self.error(self._error)

    def replay(self, game: tuple) -> list[Position | None]:
        """The positions of a game, its start first; the last is None when the last move captured
        the lion. A game that shares its start and first moves with the last one replayed is
        played on from where they part.

        Raises
        ------
        IllegalMoveError
            If a move is illegal (or follows the capture of the lion); the message says which.
        """
        base, start, moves = game
        with self._replay_lock:
            old_base, old_moves, old_positions = self._replayed
            done = 0
            if old_base == base:
                while done < min(len(moves), len(old_moves)) and moves[done] == old_moves[done]:
                    done += 1
            positions = old_positions[: done + 1] if old_base == base else [start]
            for ply, text in enumerate(moves[done:], done + 1):
                here = positions[-1]
                if here is None:
                    raise IllegalMoveError(f"move {ply} ({quote_move(text)}): the game is over, the lion was captured")
                try:
                    positions.append(play_uci(here, text))
                except IllegalMoveError as exc:
                    self._replayed = (base, moves[: ply - 1], positions)
                    raise IllegalMoveError(f"move {ply}: {exc}") from None
            self._replayed = (base, list(moves), positions)
            return positions

    def _cmd_go(self, args):
        limits, searchmoves = _parse_go_args(args, self.error)
        self.stop_search(finish=True)  # a go before the last one's bestmove: that one ends first
        depth = limits.get("depth")
        job = _Job(self._game, self.multipv, depth, searchmoves,
                   wait=bool(limits.get("infinite") or limits.get("ponder")))
        if self._game is None:
            self.error(f"no position to search: {self._error}")
        job.thread = threading.Thread(target=self._search, args=(job,), name="uci-search", daemon=True)
        self._job = job
        job.thread.start()

    def _cmd_stop(self, args):
        self.stop_search()

    def _cmd_ponderhit(self, args):
        self.stop_search(finish=True)

    def _cmd_quit(self, args):
        return False

    def _cmd_d(self, args):
        if self._game is None:
            self.info(f"no position: {self._error}")
            return
        try:
            here = self.replay(self._game)[-1]
        except IllegalMoveError as exc:
            self.error(str(exc))
            return
        if here is None:
            self.info("the game is over: a lion was captured")
            return
        for row in here.diagram().splitlines():
            self.send(f"info string {row}")
        self.info(f"fen {here.fen()}")
        self.info(f"position {here.text()}")

    # --- searching -------------------------------------------------------------------------

    def stop_search(self, finish: bool = False) -> None:
        """End the running search, if any, and wait for its ``bestmove``: at once (``stop``), or
        with ``finish`` after its last line (``ponderhit``, and a ``go`` that comes before the last
        one's ``bestmove``); a ``go infinite`` or ``go ponder`` then sends its ``bestmove``."""
        job, self._job = self._job, None
        if job is not None:
            if not finish:
                job.stop.set()
            job.release.set()
            job.thread.join()

    def _search(self, job: _Job) -> None:
        best = "(none)"
        try:
            best = self._answer(job)
        except IllegalMoveError as exc:
            self.error(f"no position to search: {exc}")
        except (TablebaseFileError, MissingPositionError, PositionError) as exc:
            self.error(str(exc))
        except Exception as exc:  # noqa: BLE001 -- the engine stays up whatever a search meets
            self.error(f"go: internal error: {type(exc).__name__}: {exc}")
        if job.wait:
            job.release.wait()
        self.send(f"bestmove {best}")

    def _answer(self, job: _Job) -> str:
        """Send the ``info`` lines of a search; return the ``bestmove`` text."""
        if job.game is None:
            return "(none)"
        positions = self.replay(job.game)
        root = positions[-1]
        if root is None:  # the side to move's lion was captured: the game is over
            self.send("info depth 0 score mate 0")
            return "(none)"
        seen = Counter(p for p in positions if p is not None)
        if seen[root] >= 3:
            self.info("this position has occurred 3 times: the game is drawn by repetition (docs/rules.md §3)")
        if not has_moves(root):  # the game is over (a try), or no move: a loss in 0 (docs/rules.md §3)
            if self.tb.get_wdl(root) is None:
                self.info(f"{root.text()} is not in this tablebase; the game is over (no legal move)")
            self.send("info depth 0 score mate 0")
            return "(none)"
        self.tb.probes = 0
        try:
            moves, outside = self.tb.probe_moves(root), False
        except MissingPositionError as exc:  # a legal position the file does not hold: still a move to play
            moves, outside = outside_moves(self.tb, root), True
            known = sum(m.wdl is not None for m in moves)
            self.info(f"{exc}; playing the best move the rules and the file can value ({known} of {len(moves)} "
                      f"moves valued: a capture, a try, the lion left to be captured, or a position the file "
                      f"holds; a move of unknown value comes before a known loss)")
        lines = rank_moves(moves, seen, self.tb.variant)
        if outside:
            lines.sort(key=_outside_group)  # (stable: each group stays best first)
        if job.searchmoves:
            allowed = self._searchmoves(root, job.searchmoves)
            lines = [line for line in lines if line.uci in allowed] or lines
        unknown = [line.uci for line in lines if line.wdl is None]
        if unknown and not outside:
            self.info(f"{len(unknown)} moves lead to positions this tablebase does not hold "
                      f"(the side to move can capture the lion): {' '.join(unknown)}")
        repeated = [line.uci for line in lines if line.repetition]
        if repeated:
            self.info("draws by repetition (a third occurrence): " + " ".join(repeated))
        shown = lines if outside else [line for line in lines if line.wdl is not None]
        for k, line in enumerate(shown[: job.multipv], 1):
            line.pv = [line.uci] + ([] if job.stop.is_set() or line.wdl is None else
                                    self._continuation(line, job.depth))
            if job.depth is not None:
                line.pv = line.pv[: job.depth]
            ms = max(1, round(1000 * (time.perf_counter() - job.started)))
            nodes = self.tb.probes
            score = "" if line.wdl is None else f"score {uci_score(line.wdl, line.plies)} "  # (unknown: no score)
            self.send(f"info depth {len(line.pv)} seldepth {len(line.pv)} multipv {k} "
                      f"{score}nodes {nodes} nps {1000 * nodes // ms} "
                      f"tbhits {nodes} time {ms} pv {' '.join(line.pv)}")
        best = (shown or lines)[0]
        ponder = f" ponder {best.pv[1]}" if len(best.pv) > 1 else ""
        return best.uci + ponder

    def _continuation(self, line: Line, depth: int | None) -> list[str]:
        """The principal variation after a root move (UCI), empty when the move ends the game."""
        if line.child is None or line.repetition or not has_moves(line.child):
            return []
        cap = depth - 1 if depth is not None else (DRAW_PV_PLIES if line.wdl == DRAW else line.plies)
        if cap < 1:
            return []
        try:
            pv = self.tb.principal_variation(line.child, max_plies=cap)
        except MissingPositionError:  # (a move out of a position outside the file, valued by the rules)
            return []
        return [uci_of(m.move, self.tb.variant) for m in pv]

    def _searchmoves(self, root: Position, texts: list[str]) -> set[str]:
        """The UCI texts of the legal ones among ``searchmoves`` (as the engine writes them)."""
        out = set()
        for text in texts:
            try:
                out.add(normal_uci(root, text))
            except IllegalMoveError as exc:
                self.error(f"searchmoves: {exc}")
        return out


def _skip_line(stream: BinaryIO) -> int:
    """Read to the end of the current line; return the bytes skipped."""
    skipped = 0
    while True:
        chunk = stream.readline(MAX_LINE_BYTES)
        skipped += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            return skipped


def _parse_position_args(args: list[str], variant: Variant) -> tuple[tuple, Position, list[str]]:
    """``(base, start position, move texts)`` of a ``position`` command's arguments.

    Raises
    ------
    ValueError
        If the command is malformed (PositionError for a bad FEN).
    """
    cut = args.index("moves") if "moves" in args else len(args)
    head, moves = args[:cut], args[cut + 1:]
    if head == ["startpos"]:
        return ("startpos",), start_position(variant), moves
    if head[:1] == ["fen"] and len(head) > 1:
        fen = " ".join(head[1:])
        return ("fen", fen), parse_position(fen, variant), moves
    if head[:1] == ["fen"]:
        raise ValueError("position fen needs a FEN, e.g. position fen gle/1c1/1C1/ELG[-] w 0 1")
    raise ValueError(f"position takes startpos or fen FEN, then moves ...; got {quote_move(' '.join(head))}")


def _parse_go_args(args: list[str], error: Callable[[str], None]) -> tuple[dict, list[str]]:
    """The limits of a ``go`` command (name -> int, or True for a flag) and its searchmoves; each
    malformed part is reported with ``error`` and ignored."""
    limits: dict = {}
    searchmoves: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        if token in _GO_FLAGS:
            limits[token] = True
        elif token in _GO_VALUES:
            value = args[i + 1] if i + 1 < len(args) else ""
            if token == "depth" and re.fullmatch(r"-?[0-9]{1,18}", value) and int(value) < 1:
                error(f"go depth needs at least 1 ply, not {value}; ignored")
                i += 1
            elif re.fullmatch(r"-?[0-9]{1,18}", value):
                limits[token] = int(value)
                i += 1
            elif re.fullmatch(r"-?[0-9]+", value):
                error(f"go {token} {value[:40]}{'...' if len(value) > 40 else ''}: too large (at most 18 digits); "
                      f"ignored")
                i += 1
            else:
                error(f"go {token} needs a whole number, not {quote_move(value)}; ignored")
                i += 1 if value and value not in _GO_VALUES + _GO_FLAGS + ("searchmoves",) else 0
        elif token == "searchmoves":
            while i + 1 < len(args) and args[i + 1] not in _GO_VALUES + _GO_FLAGS:
                searchmoves.append(args[i + 1])
                i += 1
        else:
            error(f"go: unknown parameter {quote_move(token)} ignored")
        i += 1
    return limits, searchmoves


def run_engine(tb_path, stdin: BinaryIO, stdout, in_memory: bool = False) -> None:
    """Run the engine on a tablebase file over byte input and text output streams.

    Raises
    ------
    TablebaseFileError
        If the file is missing, damaged or not a tablebase (before anything is read or written).
    """
    closed = []

    def write(line: str) -> None:
        if closed:
            return
        try:
            stdout.write(line + "\n")
            stdout.flush()
        except (BrokenPipeError, ValueError, OSError):  # the GUI has gone: say nothing more
            closed.append(True)

    engine = UciEngine(tb_path, write, in_memory=in_memory)
    try:
        engine.run(stdin)
    finally:
        engine.tb.close()
