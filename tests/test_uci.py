"""The UCI engine (``dobutsu-tb uci``): move strings, the protocol, its values and moves against the
tablebase, hostile input, and a short match against Fairy-Stockfish (scripts/match.py).

The match needs Debian's Fairy-Stockfish (``apt-get install fairy-stockfish``, or another binary
with ``DOBUTSU_TB_FAIRY_STOCKFISH``); without it that test is skipped, unless
``DOBUTSU_TB_REQUIRE_FAIRY_STOCKFISH=1`` (as ``.ci/run`` sets) makes that a failure.
"""

import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import LION_CHICK, random_positions
from dobutsu_tb.analysis.uci import MAX_LINE_BYTES, UciEngine
from dobutsu_tb.tablebase.build import build_tablebase
from dobutsu_tb.tablebase.game.layout import TRY
from dobutsu_tb.tablebase.game.notation import (
    IllegalMoveError,
    move_text,
    parse_uci_move,
    play_move,
    uci_move_text,
    uci_of_move_text,
    uci_square,
)
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.probe import open_tablebase

ROOT = Path(__file__).resolve().parent.parent
FSF = os.environ.get("DOBUTSU_TB_FAIRY_STOCKFISH", "/usr/games/fairy-stockfish")
#: The lion-and-chick start as Fairy-Stockfish's FEN.
LC_FEN = "1l1/1c1/1C1/1L1[-] w 0 1"


# --- UCI move strings ---------------------------------------------------------------------------

def test_uci_squares_and_moves():
    assert [uci_square(s) for s in ("a1", "b4", "c2", "b1")] == ["a4", "b1", "c3", "b4"]
    assert [uci_of_move_text(t) for t in ("Lb4-a3", "Cb3xb2", "Ca2-a1+", "C*b2")] == ["b1a2", "b2b3", "a3a4+", "C@b3"]
    start = Position.start()
    assert sorted(uci_move_text(start, int(m)) for m in start.game.legal_moves(start.state())) == [
        "b1a2", "b1c2", "b2b3", "c1c2"]


def test_uci_moves_round_trip():
    """Every legal move's UCI string parses back to it, and names the same move as our notation."""
    checked = 0
    for pos, _ in random_positions(300, seed=21):
        for m in pos.game.legal_moves(pos.state()):
            text = uci_move_text(pos, int(m))
            assert parse_uci_move(pos, text) == int(m)
            assert uci_of_move_text(move_text(pos, int(m))) == text
            checked += 1
    assert checked > 3000


def test_uci_move_leniency_and_errors():
    promo = Position.from_fen("1l1/1C1/3/1L1[] w - - 0 1")  # Sente's chick on b3 (UCI) can take the lion
    assert parse_uci_move(promo, "b3b4") == parse_uci_move(promo, "b3b4+")  # Fairy-Stockfish 11.1's spelling
    gote = Position.from_fen("gl1/1e1/1E1/1LG[Cc] b - - 1 2")
    assert parse_uci_move(gote, "c@a1") == parse_uci_move(gote, "C@a1")
    start = Position.start()
    cases = {"b3b2": "Sente has no piece on b3", "a1a2": "the E on a1 cannot move to a2",
             "C@a2": "Sente has no C in hand", "b2b3+": "only a piece reaching its promotion zone promotes",
             "a9a1": "a9 is not a square", "b1b1": "b1 holds Sente's own piece",
             "zz": "is not a UCI move", "x" * 5000: "(5,000 characters)"}
    for text, message in cases.items():
        with pytest.raises(IllegalMoveError, match=message.replace("(", r"\(").replace(")", r"\)")):
            parse_uci_move(start, text)
    with pytest.raises(IllegalMoveError, match="already over"):  # Gote's lion has made its try
        parse_uci_move(Position.from_text("S/---/-C-/---/l-L/-"), "c1c2")


# --- the protocol, in process ----------------------------------------------------------------

class Engine:
    """The engine in this process: ``send`` lines, read ``out``; searches run on their thread."""

    def __init__(self, path):
        self.out = []
        self.lock = threading.Lock()
        self.engine = UciEngine(path, self._write)

    def _write(self, line):
        with self.lock:
            self.out.append(line)

    def send(self, *lines):
        for line in lines:
            assert self.engine.handle(line) is True
        return self

    def search(self, *lines):
        """Send lines ending with a go; wait for its bestmove; return (info lines, bestmove line)."""
        start = len(self.out)
        self.send(*lines)
        self.engine.stop_search(finish=True)
        got = self.out[start:]
        assert got and got[-1].startswith("bestmove"), got
        return got[:-1], got[-1]

    def ready(self):
        start = len(self.out)
        self.send("isready")
        assert "readyok" in self.out[start:]


@pytest.fixture
def engine(lion_chick_tb):
    e = Engine(lion_chick_tb.path)
    yield e
    e.engine.stop_search()
    e.engine.tb.close()


def _scores(info):
    """{multipv: (score words, pv)} of the info lines."""
    out = {}
    for line in info:
        words = line.split()
        if words[:2] == ["info", "depth"] and "multipv" in words:
            k = int(words[words.index("multipv") + 1])
            i = words.index("score")
            out[k] = (" ".join(words[i + 1: i + 3]), words[words.index("pv") + 1:])
    return out


def _mate(wdl, plies):
    """UCI's score, counted here without the engine's function: the winner's moves (the capture or
    the try included), the loser's moves as a negative number."""
    if wdl == 0:
        return "cp 0"
    moves = sum(1 for ply in range(plies) if ply % 2 == 0)  # the side to move plays plies 0, 2, 4, ...
    return f"mate {moves if wdl > 0 else -moves}"


def test_handshake(engine):
    engine.send("uci")
    out = engine.out
    assert out[0].startswith("id name dobutsu-tb") and out[-1] == "uciok"
    assert "option name UCI_Variant type combo default dobutsu var dobutsu" in out
    assert "option name MultiPV type spin default 1 min 1 max 500" in out
    engine.send("setoption name UCI_Variant value dobutsu", "setoption name MultiPV value 3", "ucinewgame")
    engine.ready()
    assert not [line for line in out if "error" in line]


def test_start_value_and_line(engine, lion_chick_tb):
    """The lion-and-chick start: a win in 15 plies is mate 8; the PV is 15 plies, legal, DTM-optimal,
    and ends the game with Sente's last move."""
    info, best = engine.search(f"position fen {LC_FEN}", "go wtime 1000 btime 1000 winc 10 binc 10")
    (score, pv), = _scores(info).values()
    assert score == "mate 8" and len(pv) == 15
    assert best.split()[1:] == [pv[0], "ponder", pv[1]]
    pos = Position.from_fen(LC_FEN)
    with open_tablebase(lion_chick_tb.path) as tb:
        for ply, text in enumerate(pv):
            dtm = tb.probe_dtm(pos)
            assert abs(dtm) == 15 - ply
            pos = play_move(pos, parse_uci_move(pos, text))
    assert pos is None or pos.game.classify(pos.state()) == TRY  # the lion captured or the try made
    # The same start written without hands, in our notation, and as FEN with [] and castling fields.
    for fen in ("1l1/1c1/1C1/1L1 w - - 0 1", LION_CHICK, "1l1/1c1/1C1/1L1[] w - - 0 1"):
        info, _ = engine.search(f"position fen {fen}", "go depth 1")
        assert _scores(info)[1] == ("mate 8", [pv[0]])


def test_every_move_has_its_exact_value(engine, lion_chick_tb):
    """MultiPV 500 on random positions of the file: every move once, each with the tablebase's value,
    best first, and bestmove DTM-optimal."""
    rng = random.Random(3)
    engine.send("setoption name MultiPV value 500")
    with open_tablebase(lion_chick_tb.path) as tb:
        f = tb._file
        for _ in range(40):
            i = rng.randrange(f.n)
            pos = Position.from_state(Position.from_key(int(f.read_keys(i // f.key_chunk)[i % f.key_chunk])).state(),
                                      rng.choice((0, 1)))
            info, best = engine.search(f"position fen {pos.fen()}", "go movetime 50")
            lines = _scores(info)
            want = {}
            for m in tb.probe_moves(pos):
                text = uci_of_move_text(m.move)
                want[text] = _mate(m.wdl, abs(m.dtm))
            assert sorted(pv[0] for _, pv in lines.values()) == sorted(want)
            assert {pv[0]: score for score, pv in lines.values()} == want
            assert lines[1][0] == _mate(tb.probe_wdl(pos), abs(tb.probe_dtm(pos)))
            assert best.split()[1] == lines[1][1][0]
            for k in range(2, len(lines) + 1):  # best first
                assert _rank(lines[k - 1][0]) >= _rank(lines[k][0])


def _rank(score):
    kind, n = score.split()
    n = int(n)
    return 0 if kind == "cp" else (1000 - n if n > 0 else -1000 - n)


def test_terminal_and_catch_positions(engine):
    # A try-terminal position (Gote's lion stands on Sente's home rank, safe): the game is over.
    info, best = engine.search("position fen 3/1C1/3/l1L[c] w 0 1", "go")
    assert info == ["info depth 0 score mate 0"] and best == "bestmove (none)"
    # The lion captured by the last move: over too.
    info, best = engine.search(f"position fen {LC_FEN} moves b2b3 b4b3 b1c2 b3c2", "go")
    assert info == ["info depth 0 score mate 0"] and best == "bestmove (none)"
    # Gote can capture the lion (three ways): mate 1, the captures; its other moves leave the file
    # (a catch-terminal position is never expanded, so what follows it need not be reachable).
    info, best = engine.search("position fen 3/3/1cl/1L+c[-] b 0 1", "setoption name MultiPV value 9", "go")
    assert sorted(pv[0] for _, pv in _scores(info).values()) == ["b2b1+", "c1b1", "c2b1"]
    assert {score for score, _ in _scores(info).values()} == {"mate 1"} and best in (
        "bestmove b2b1+", "bestmove c1b1", "bestmove c2b1")
    assert "info string 2 moves lead to positions this tablebase does not hold (the side to move can capture the " \
           "lion): c2c3 c2b3" in info


def test_longest_resistance_keeps_the_lion_guarded(engine):
    """Every move loses in 2 plies; the one that does not leave Sente's lion attacked comes first
    (a royal-lion engine such as Fairy-Stockfish 11.1 would call the others illegal)."""
    engine.send("setoption name MultiPV value 9")
    info, best = engine.search("position fen 3/3/1Cl/L+c1[-] w 0 1", "go")
    assert best.split()[1] == "a1a2" and [score for score, _ in _scores(info).values()] == ["mate -1"] * 3


def test_one_tie_break_on_every_surface(engine, cli, lion_chick_tb):
    """The third hostile round: a try and a lion capture both win in 1; ``probe`` listed the try
    first and ``line`` played it, while the engine played the capture. Every surface now puts
    the capture first; and among equal losses, a move that keeps the lion safe."""
    import json

    from dobutsu_tb.analysis.reports import probe_json

    tb_path = lion_chick_tb.path
    for text, fen, first, uci in [("S/--l/-L-/---/---/Cc", "2l/1L1/3/3[Cc] w 0 1", "Lb2xc1", "b3c4"),
                                  ("S/l--/-L-/---/---/Cc", "l2/1L1/3/3[Cc] w 0 1", "Lb2xa1", "b3a4")]:
        shown = cli("probe", text, "--tb", tb_path)
        assert shown.output.splitlines()[1].split()[0] == first, shown.output
        assert json.loads(cli("probe", text, "--tb", tb_path, "--json").output)["moves"][0]["move"] == first
        assert f"1. Sente {first}\n" in cli("line", text, "--tb", tb_path).output
        with open_tablebase(tb_path) as tb:
            assert tb.probe_moves(text)[0].move == first and tb.principal_variation(text)[0].move == first
            assert probe_json(tb, Position.from_text(text))["moves"][0]["move"] == first  # the web page's
        _, best = engine.search(f"position fen {fen}", "go")
        assert best == f"bestmove {uci}"
    # Every move loses in 2 plies: the one that leaves the lion safe first, everywhere.
    shown = cli("probe", "S/---/---/-Cl/Lr-/-", "--tb", tb_path)
    assert shown.output.splitlines()[1].split()[0] == "La4-a3", shown.output
    _, best = engine.search("position fen 3/3/1Cl/L+c1[-] w 0 1", "go")
    assert best.split()[1] == "a1a2"


def test_repetition(engine):
    """Gote, lost, takes a draw by a third occurrence when the game history offers one."""
    fen = "2l/1c1/2+C/1L1[-] w 0 1"  # Sente wins in 5; after c2c3 c4b4 c3c2, Gote loses in 10
    cycle = ["c2c3", "c4b4", "c3c2", "b4c4"]
    moves = " ".join(cycle + cycle[:3])
    engine.send("setoption name MultiPV value 500")
    info, best = engine.search(f"position fen {fen} moves {moves}", "go")
    assert best.split()[1] == "b4c4" and _scores(info)[1] == ("cp 0", ["b4c4"])
    assert any(line.startswith("info string draws by repetition") for line in info)
    # Without the history, the same position is a loss for Gote: no cp 0 anywhere.
    pos = Position.from_fen(fen)
    for text in cycle + cycle[:3]:
        pos = play_move(pos, parse_uci_move(pos, text))
    info, _ = engine.search(f"position fen {pos.fen()}", "go")
    assert all(score.startswith("mate -") for score, _ in _scores(info).values())


def test_go_infinite_waits_for_stop(engine):
    engine.send(f"position fen {LC_FEN}", "go infinite")
    job = engine.engine._job
    job.thread.join(timeout=0.2)  # (a bestmove now would be a bug whatever the time taken)
    engine.ready()  # isready is answered while the search waits
    assert not [line for line in engine.out if line.startswith("bestmove")]
    engine.send("stop")
    assert engine.out[-1].startswith("bestmove b1")
    # go ponder, then ponderhit: the search goes on to its end (the whole line), then bestmove.
    info, best = engine.search("go ponder", "ponderhit")
    assert len(_scores(info)[1][1]) == 15 and best.startswith("bestmove b1")


def test_go_before_position_and_bad_positions(engine):
    # No position yet: the standard start, which the lion-and-chick file does not cover: a move all the same.
    info, best = engine.search("go")
    assert best in ("bestmove b1a2", "bestmove b1c2", "bestmove b2b3", "bestmove c1c2"), best
    assert any("not in this tablebase" in line for line in info)
    # A malformed command or FEN is an error at once; an illegal move when a go replays the game.
    none = "no position to search"
    for bad, now, later in [("position", "position takes startpos or fen", none),
                            ("position fen", "needs a FEN", none),
                            ("position fen gle/1c1/1C1/ELGX[-] w 0 1", "unknown piece letter 'X'", none),
                            ("position fen 3/3/3/1L1[-] w 0 1", "Gote has 0 lions", none),
                            ("position fen gle/21/1C1/ELG w - 1", "'gle/21/1C1/ELG w - 1': rank 2 has two", none),
                            (f"position fen {LC_FEN} moves b2b3 b2b3", None, "move 2: b2b3: Gote has no piece on b2"),
                            (f"position fen {LC_FEN} moves b2b3 b4b3 b1c2 b3c2 c2c3", None,
                             "move 5 ('c2c3'): the game is over"),
                            ("position startpos moves " + "b2b3 " * 3, None, "move 2")]:
        start = len(engine.out)
        engine.send(bad)
        said = engine.out[start:]
        if now is None:
            assert said == []
        else:
            assert len(said) == 1 and said[0].startswith("info string error:") and now in said[0], (bad, said)
        info, best = engine.search("go")
        assert best == "bestmove (none)" and len(info) == 1 and later in info[0], (bad, info)
        assert info[0].startswith("info string error: ")
    engine.ready()


def test_a_legal_position_outside_the_file_still_gets_a_move(engine):
    """The third hostile round: a legal position that the file does not hold got ``bestmove
    (none)``, which a GUI reads as 'no legal move' (the engine resigned). It gets a move: the best
    one the rules and the file can value, said in an ``info string``; ``(none)`` only without a
    legal move."""
    start = {"b1a2", "b1c2", "b2b3", "c1c2"}
    info, best = engine.search("position startpos", "go")
    assert best.split()[1] in start and info[0].startswith(
        "info string S/gle/-c-/-C-/ELG/- is not in this tablebase (not reachable from S/-l-/-c-/-C-/-L-/-); "
        "playing the best move the rules and the file can value (0 of 4 moves valued"), info
    assert not any("error" in line for line in info)
    # Sente can capture the lion in a position of other pieces: mate 1, the capture.
    info, best = engine.search("position fen lg1/1L1/3/E2[-] w 0 1", "go")
    assert best == "bestmove b3a4" and _scores(info)[1] == ("mate 1", ["b3a4"])
    # Three of Sente's five moves leave its lion to be captured (known losses); the two giraffe
    # captures are of unknown value, and come first; MultiPV lists them without a score.
    engine.send("setoption name MultiPV value 5")
    info, best = engine.search("position fen 3/1l1/3/gLg[-] w 0 1", "go")
    assert best in ("bestmove b1a1", "bestmove b1c1"), best
    rows = [line.split() for line in info if line.startswith("info depth")]
    assert [r[r.index("pv") + 1] for r in rows][:2] == ["b1a1", "b1c1"] and "score" not in rows[0] + rows[1]
    assert [r[r.index("score") + 1: r.index("score") + 3] for r in rows[2:]] == [["mate", "-1"]] * 3
    # Gote's lion on Sente's home rank, safe: no move, the game is over, outside the file or not.
    info, best = engine.search("position fen 3/1C1/3/l1L[c] w 0 1", "go")
    assert best == "bestmove (none)" and info == ["info depth 0 score mate 0"]
    info, best = engine.search("position fen 1G1/1C1/3/l1L[-] w 0 1", "go")
    assert best == "bestmove (none)" and info[-1] == "info depth 0 score mate 0" and "not in this tablebase" in info[0]


def test_only_a_shipped_variants_rules_carry_a_fairy_stockfish_name():
    """The third hostile round: a variant of one's own named ``dobu-tsu`` (lions on 3 files x 3
    ranks) was offered as ``UCI_Variant dobutsu``, its name without hyphens: a GUI then believes
    it plays Fairy-Stockfish's game. Fairy-Stockfish's names go to the shipped rules only; any
    other variant goes by its own name, which never is another game's."""
    from dataclasses import replace
    from types import SimpleNamespace

    from dobutsu_tb.analysis.uci import variants
    from dobutsu_tb.tablebase.game.variant import get_variant, parse_variant

    def names(variant):
        return variants(SimpleNamespace(variant=variant))

    lions = {"name": "dobu-tsu", "files": 3, "ranks": 3, "start": "S/-l-/---/-L-/-", "drops": False,
             "pieces": [{"letter": "L", "name": "lion", "royal": True, "steps": ["f", "b", "l", "r"]}]}
    assert names(get_variant("dobutsu")) == ["dobutsu"]
    assert names(get_variant("dobutsu-5x3")) == ["dobutsu5x3", "dobutsu-5x3"]
    assert names(replace(get_variant("dobutsu-5x3"), name="mine", title="Mine")) == ["dobutsu5x3", "dobutsu-5x3"]
    assert names(parse_variant(lions)) == ["dobu-tsu"]
    for taken in ("dobutsu5x3", "dobutsu-5x3", "dobutsunodrops", "shogi", "fox-and-hounds", "dobutsu"):
        assert names(parse_variant({**lions, "name": taken})) == [taken + "-custom"], taken
    other_5x3 = get_variant("dobutsu-5x3").to_dict() | {"name": "dobutsu-5x-3", "try_rule": False}
    assert names(parse_variant(other_5x3)) == ["dobutsu-5x-3"]


def test_a_variant_of_ones_own_is_offered_under_its_own_name(tmp_path):
    """End to end: the engine on a file of a variant of one's own offers and takes its name only."""
    from test_variants import LIONS_ONLY

    from dobutsu_tb.tablebase.game.variant import parse_variant

    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    variant = parse_variant(tomllib.loads(LIONS_ONLY))
    path = tmp_path / "lions.h5"
    build_tablebase(path, Position.start(variant), progress=False, variant=variant)
    e = Engine(path)
    try:
        e.send("uci", "setoption name UCI_Variant value dobutsu", "setoption name UCI_Variant value lions")
        assert "option name UCI_Variant type combo default lions var lions" in e.out
        errors = [line for line in e.out if "error" in line]
        assert errors == ["info string error: variant 'dobutsu' is not played here; this tablebase's: lions"], errors
        _, best = e.search("position startpos", "go")
        assert best.startswith("bestmove b")
    finally:
        e.engine.tb.close()


def test_hostile_lines(engine):
    """Every malformed line gets one error line; nothing stops the engine."""
    bad = ["hello", "GO", "setoption", "setoption name", "setoption name Hash value 16",
           "setoption name MultiPV value 0", "setoption name MultiPV value 501", "setoption name MultiPV value x",
           "setoption name UCI_Variant value chess", "setoption name Ponder value maybe", "debug sideways",
           "\x00\x01\x02", "position moves b2b3", "é" * 1000]
    for line in bad:
        start = len(engine.out)
        engine.send(line)
        said = engine.out[start:]
        assert len(said) == 1 and said[0].startswith("info string error: ") and len(said[0]) < 450, (line, said)
    start = len(engine.out)
    engine.send("joho isready")  # UCI: unknown tokens before a command are skipped
    assert engine.out[start + 1:] == ["readyok"]
    info, best = engine.search(f"position fen {LC_FEN}", "go depth x nodes 5 searchmoves b1c2 zz9 b2b3 movetime 3")
    assert best.split()[1] in ("b1c2", "b2b3") and sum("error" in line for line in info) == 2
    info, best = engine.search(f"position fen {LC_FEN}", "go depth 3")
    assert len(_scores(info)[1][1]) == 3
    for bad in ("-1", "0"):  # not read as 1: an error, and the whole line
        info, best = engine.search(f"position fen {LC_FEN}", f"go depth {bad}")
        assert f"info string error: go depth needs at least 1 ply, not {bad}; ignored" in info
        assert len(_scores(info)[1][1]) > 3
    info, best = engine.search(f"position fen {LC_FEN}", "go depth 99999999999999999999999")
    assert "info string error: go depth 99999999999999999999999: too large (at most 18 digits); ignored" in info


def test_stream_limits_and_eof(lion_chick_tb):
    """run(): a line over the limit is skipped whole, bad UTF-8 is replaced, end of input stops."""
    out = []
    engine = UciEngine(lion_chick_tb.path, out.append)
    data = (b"uci\n" + b"position fen " + b"x" * (3 * MAX_LINE_BYTES) + b"\nisready\n\xff\xfe\n"
            + f"position fen {LC_FEN}\ngo infinite\n".encode())
    engine.run(io.BytesIO(data))  # ends at the end of input, stopping the infinite search
    engine.tb.close()
    assert out[out.index("uciok") + 1].startswith(f"info string error: a line of {3 * MAX_LINE_BYTES + 14:,} bytes")
    assert out[out.index("uciok") + 2] == "readyok"
    assert out[out.index("uciok") + 3].startswith("info string error: unknown command")
    assert out[-1].startswith("bestmove b1")


# --- the command, as GUIs run it ---------------------------------------------------------------

def _default_signals():
    """SIGINT and SIGTERM at their defaults in the engine's process, as at a terminal: a test run
    started in the background of a shell inherits SIGINT ignored, and the command line keeps an
    ignored signal ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _spawn(path):
    return subprocess.Popen([sys.executable, "-m", "dobutsu_tb.analysis.cli", "uci", "--tb", str(path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_signals)


def test_command_end_to_end(lion_chick_tb):
    proc = _spawn(lion_chick_tb.path)
    out, err = proc.communicate(f"uci\nisready\nposition fen {LC_FEN}\ngo\nbogus\nquit\n", timeout=120)
    assert proc.returncode == 0 and err == ""
    assert "readyok" in out and "bestmove b1" in out and "info string error: unknown command 'bogus'" in out


def test_command_errors(cli, tmp_path):
    result = cli("uci", "--tb", tmp_path / "missing.h5")
    assert result.exit_code == 1 and result.output.startswith("error:") and "Traceback" not in result.output


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT")
def test_ctrl_c(lion_chick_tb):
    proc = _spawn(lion_chick_tb.path)
    proc.stdin.write("uci\n")
    proc.stdin.flush()
    while proc.stdout.readline().strip() != "uciok":
        pass
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)  # stdin stays open: the signal alone must end the engine (no end of input racing it)
    err = proc.stderr.read()
    proc.stdin.close()
    assert proc.returncode == 130 and err.strip() in ("error: interrupted", "error: interrupted by SIGINT")


# --- the match -----------------------------------------------------------------------------------

def _fsf_missing():
    if shutil.which(FSF) is None:
        return f"Fairy-Stockfish is not installed ({FSF}; apt-get install fairy-stockfish)"
    try:
        import pyffish  # noqa: F401
    except ImportError:
        return "pyffish is not installed (pip install -e '.[test]')"
    return None


def test_the_match_without_pyffish_is_one_error_line(lion_chick_tb):
    """The third hostile round: scripts/match.py after the README's main install died with a
    traceback, ModuleNotFoundError: No module named 'pyffish'. One error line names the install."""
    code = ("import runpy, sys; sys.modules['pyffish'] = None; "  # (None: import pyffish fails as if missing)
            f"sys.argv = ['match.py', '--tb', {str(lion_chick_tb.path)!r}, '--fsf', '/bin/true']; "
            f"runpy.run_path({str(ROOT / 'scripts' / 'match.py')!r}, run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout) == (1, ""), proc.stderr
    assert proc.stderr == ("error: scripts/match.py needs pyffish, Fairy-Stockfish's Python binding, which the main "
                           "install leaves out: pip install -e '.[match]' (or '.[test]')\n")


def test_match_against_fairy_stockfish(lion_chick_tb):
    """A short match on the lion-and-chick file: our engine never loses a won or drawn start, wins
    every won start within its DTM (exactly when Fairy-Stockfish resists best), and plays only
    DTM-optimal moves (scripts/match.py checks each and exits with 1 otherwise)."""
    missing = _fsf_missing()
    if missing and os.environ.get("DOBUTSU_TB_REQUIRE_FAIRY_STOCKFISH") == "1":
        pytest.fail(f"the match cannot run: {missing}")
    if missing:
        pytest.skip(missing)
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "match.py"), "--tb", str(lion_chick_tb.path),
                           "--positions", "12", "--seed", "5", "--fsf", FSF, "--fsf-go", "depth 3", "--json"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    table, stats = report["table"], report["stats"]
    assert report["failures"] == [] and report["games"] == 26
    assert {name: row["games"] for name, row in table.items()} == {"won": 9, "drawn": 8, "lost": 9}
    assert table["won"]["wins"] == 9 and table["drawn"].get("losses", 0) == 0
    assert stats["won starts: won within the DTM"] == 9
    assert stats["won starts: won in exactly the DTM against best resistance"] == \
        stats["won starts: Fairy-Stockfish resisted best"] > 0
    assert stats["our engine: moves"] > 50 and stats["engine errors (info string error)"] == 0
