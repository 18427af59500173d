"""Line verification, the file verifier, statistics and pictures (issue 3)."""

import json
import re

import h5py
import numpy as np
import pytest

from conftest import LION_CHICK, reseal, reseal_chunks
from dobutsu_tb.analysis.lines import read_games, reads_whole_file, verify_games, verify_line
from dobutsu_tb.analysis.stats import tablebase_stats
from dobutsu_tb.analysis.verify import verify_file
from dobutsu_tb.tablebase.game.notation import uci_of_move_text
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.probe import MissingPositionError, open_tablebase
from dobutsu_tb.tablebase.schema import TablebaseFileError
from dobutsu_tb.tablebase.values import describe_value, value_code

# The seed's lion-and-chick line (docs/rules.md §9).
SEED_LINE = "Lb4-c3 Cb2xb3 Lc3xb3 C*b2 Lb3-c3 Lb1-c1 C*a2 Lc1-b1 Ca2-a1+ Lb1xa1 Lc3-c2".split()


# --- verify-line -------------------------------------------------------------------------


def test_seed_line_has_one_gote_mistake(lion_chick_tb):
    with open_tablebase(lion_chick_tb.path) as tb:
        report = verify_line(tb, LION_CHICK, SEED_LINE)
    assert report.start_value == (1, 15)
    assert report.illegal is None and len(report.plies) == 11
    mistake = report.first_mistake
    assert (mistake.ply, mistake.move) == (10, "Lb1xa1")
    assert mistake.before == (-1, -6) and mistake.result == (-1, -4)  # signed, for Gote, who moves
    assert mistake.best == ["Lb1-c1 (loss in 6)"]
    assert [p.ply for p in report.plies if not p.optimal] == [10]
    # After the seed's line, Sente's lion tries at the next-but-one ply: 13 plies in all.
    assert report.plies[-1].after == (-1, -2)
    assert not report.perfect and "first mistake is ply 10" in report.verdict()


def test_perfect_line(lion_chick_tb):
    with open_tablebase(lion_chick_tb.path) as tb:
        pv = [m.move for m in tb.principal_variation(LION_CHICK)]
        report = verify_line(tb, LION_CHICK, pv)
    assert len(pv) == 15 and report.perfect
    assert report.plies[-1].ending is not None
    assert "perfect play" in report.verdict()


def test_wrong_move_found(lion_chick_tb):
    with open_tablebase(lion_chick_tb.path) as tb:
        report = verify_line(tb, LION_CHICK, ["Lb4-a4", "Lb1-a1"])
    first = report.first_mistake
    assert first.ply == 1 and not first.optimal
    assert first.before == (1, 15) and first.result == (-1, -8)  # turns a win into a loss in 8
    assert {b.split()[0] for b in first.best} == {"Lb4-a3", "Lb4-c3"}


def test_illegal_move_reported(lion_chick_tb):
    with open_tablebase(lion_chick_tb.path) as tb:
        report = verify_line(tb, LION_CHICK, ["Lb4-c3", "Lb1-b3"])
        assert report.illegal == (2, "Lb1-b3", "an L on b1 cannot move to b3")
        over = verify_line(tb, "S/---/-l-/-L-/---/Cc", ["Lb3xb2", "C*a1"])
        assert over.illegal[0] == 2 and "the game is over" in over.illegal[2]


def _random_games(tb, start, n_games, rng):
    """Random games from ``start`` (probe_moves), some moves written as UCI strings, some games
    spoiled: a lower-case letter, garbage, an illegal move (in our notation or UCI's), a capture
    written with '-', a move after the end of the game."""
    games = []
    for _ in range(n_games):
        pos, game = Position.from_text(start), []
        for _ply in range(int(rng.integers(1, 40))):
            options = tb.probe_moves(pos)
            if not options:
                break
            # a side that can take the lion does (the tablebase stops at such positions)
            pick = options[0] if options[0].terminal == "lion captured" else options[int(rng.integers(len(options)))]
            roll = rng.random()
            game.append(pick.move.replace("x", "-") if roll < 0.05 else uci_of_move_text(pick.move) if roll < 0.15
                        else pick.move)
            if pick.position is None or pick.terminal == "try":
                break
            pos = pick.position
        roll = rng.random()
        if roll < 0.05:
            game.append(game[-1].lower())
        elif roll < 0.1:
            game.append("Zz9")
        elif roll < 0.15:
            game.append("Lb4-b1")
        elif roll < 0.2:
            game.append("C*a1")
        elif roll < 0.25:
            game.append("b1b1")  # a UCI string, never legal
        games.append(game)
    return games


def test_verify_games_is_verify_line(lion_chick_tb, monkeypatch):
    """The batch replay gives verify_line's report for every game, lazily and in memory, with
    games split over many blocks."""
    from dobutsu_tb.analysis import lines
    from dobutsu_tb.tablebase import replay

    monkeypatch.setattr(lines, "REPORT_GAMES", 7)
    monkeypatch.setattr(replay, "BLOCK_PLIES", 50)
    rng = np.random.default_rng(9)
    for in_memory in (False, True):
        with open_tablebase(lion_chick_tb.path, in_memory=in_memory) as tb:
            games = _random_games(tb, LION_CHICK, 300, rng) + [SEED_LINE, ["Lb4-c3", "Lb1-b3"], []] + REPEATING
            batch = list(verify_games(tb, LION_CHICK, games))
            assert len(batch) == len(games)
            for game, report in zip(games, batch):
                assert report == verify_line(tb, LION_CHICK, game), game
    assert any(r.illegal for r in batch) and any(not r.perfect for r in batch)
    assert any(p.ending for r in batch for p in r.plies)


#: Both lions step aside and back: four plies that bring the lion-and-chick start back.
CYCLE = "Lb4-a4 Lb1-a1 La4-b4 La1-b1".split()
#: Games that repeat positions: the start's third occurrence (by Gote, ply 8), the third occurrence
#: of the position after ply 1 (by Sente, ply 9), a line that repeats twice only, and one that
#: leaves the cycle after the second occurrence.
REPEATING = [CYCLE * 2 + ["Lb4-a4"], CYCLE * 2 + CYCLE[:1] + CYCLE[1:], CYCLE + CYCLE[:3], CYCLE + ["Lb4-a3"],
             [uci_of_move_text(m) for m in CYCLE * 3]]  # the moves after the repetition reported as written


def test_verify_line_third_occurrence_is_a_draw(lion_chick_tb):
    """docs/rules.md §3: the move that makes a position occur for the third time draws and ends
    the game; its moves are judged with that draw; the batch replay agrees. Occurrences are
    counted here with Position objects (a slow reference)."""
    from dobutsu_tb.analysis.lines import REPETITION
    from dobutsu_tb.tablebase.game.notation import parse_move, play_move

    with open_tablebase(lion_chick_tb.path) as tb:
        for game in REPEATING:
            report = verify_line(tb, LION_CHICK, game)
            assert next(verify_games(tb, LION_CHICK, [game])) == report
            pos, seen, third = Position.from_text(LION_CHICK), [Position.from_text(LION_CHICK)], None
            for ply, text in enumerate(game, 1):
                pos = play_move(pos, parse_move(pos, text))
                if seen.count(pos) == 2:
                    third = ply
                    break
                seen.append(pos)
            endings = [p.ply for p in report.plies if p.ending]
            if third is None:
                assert not endings and report.illegal is None and len(report.plies) == len(game)
                continue
            assert endings == [third] and len(report.plies) == third
            last = report.plies[-1]
            assert last.ending == REPETITION and last.result == (0, 0) and last.after == (0, 0)
            assert last.optimal == (last.before[0] == 0)  # a draw is as good as the best move only if that draws
            best = f"({describe_value(*last.before, unit=False)})"  # the value before: the best move's in this game
            assert last.best and all(b.endswith(best) for b in last.best)
            assert not any(b.startswith(last.move) for b in last.best)
            assert report.illegal == (third + 1, game[third], f"the game is over ({REPETITION})")


def test_uci_moves_are_translated_up_to_the_end_of_the_game():
    """The batch replay reads our notation only: a game in UCI's is translated up to the move that
    ends it, a repetition included; the moves after it stay as written (and are reported so)."""
    from dobutsu_tb.analysis.lines import _in_our_notation

    uci = [uci_of_move_text(m) for m in CYCLE * 250]
    assert _in_our_notation(Position.from_text(LION_CHICK), uci) == CYCLE * 2 + uci[8:]


def test_verify_games_missing_position(lion_chick_tb):
    with open_tablebase(lion_chick_tb.path) as tb:
        assert not reads_whole_file(tb, 0) and reads_whole_file(tb, 10**9)
        with pytest.raises(MissingPositionError):
            list(verify_games(tb, Position.start(), [["Cb3xb2"]]))


def test_verify_line_cli(cli, lion_chick_tb, tmp_path):
    tb = str(lion_chick_tb.path)
    result = cli("verify-line", "--start", LION_CHICK, "--tb", tb, *SEED_LINE)
    assert result.exit_code == 0
    assert " 10  Gote  Lb1xa1" in result.output and "MISTAKE" in result.output
    assert "first mistake is ply 10" in result.output
    bad = cli("verify-line", "--start", LION_CHICK, "--tb", tb, "Lb4-c3", "Xx9")
    assert bad.exit_code == 1 and "ILLEGAL" in bad.output
    games = tmp_path / "games.txt"
    games.write_text("# two games\n1. Lb4-c3 Cb2xb3\nLb4-a3\n")
    result = cli("verify-line", "--start", LION_CHICK, "--tb", tb, "--file", str(games), "--json")
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert [len(g["plies"]) for g in data] == [2, 1]
    pngs = tmp_path / "png"
    assert cli("verify-line", "--start", LION_CHICK, "--tb", tb, "--png-dir", str(pngs), *SEED_LINE).exit_code == 0
    assert len(list(pngs.glob("ply*.png"))) == 12


def test_verify_line_builds_a_tablebase_for_its_start(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("DOBUTSU_TB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("DOBUTSU_TB", str(tmp_path / "absent.h5"))
    result = cli("verify-line", "--start", "S/gl-/---/---/-LG/-", "Gc4-c3")
    assert result.exit_code == 0
    [built] = list((tmp_path / "cache" / "tablebases").glob("*.h5"))
    built.write_bytes(built.read_bytes()[:-100])  # damaged: the error says what to do (the hostile round)
    result = cli("verify-line", "--start", "S/gl-/---/---/-LG/-", "Gc4-c3")
    assert result.exit_code == 1 and result.output.startswith(f"error: {built}: ")
    assert result.output.endswith("(a tablebase this command built for its start: delete it, and the next run "
                                  "builds it again)\n")


def test_read_games(tmp_path):
    one = tmp_path / "one.txt"
    one.write_text("Lb4-c3\nCb2xb3\n\n# comment\nLc3xb3\n")
    assert read_games(one) == [["Lb4-c3", "Cb2xb3", "Lc3xb3"]]


# --- verify --------------------------------------------------------------------------------


def test_verify_passes_on_fresh_build(cli, lion_chick_tb):
    report = verify_file(lion_chick_tb.path)
    assert report.ok and report.checked == lion_chick_tb.metadata.nonterminal
    result = cli("verify", "--tb", str(lion_chick_tb.path))
    assert result.exit_code == 0 and "OK" in result.output


def test_key_directory_finds_every_key_and_nothing_else():
    from dobutsu_tb.analysis.verify import _find, key_directory

    rng = np.random.default_rng(5)
    keys = np.unique(rng.integers(1, 1 << 62, 5000) >> rng.integers(0, 40, 5000))  # skewed, as Huffman keys
    directory, shift = key_directory(keys, 6)
    assert directory[0] == 0 and directory[-1] == keys.shape[0]
    for i in range(0, keys.shape[0], 7):
        assert _find(keys, directory, shift, keys[i]) == i
    absent = np.setdiff1d(rng.integers(0, 1 << 63, 2000, dtype=np.int64), keys)
    assert all(_find(keys, directory, shift, k) == -1 for k in absent)


@pytest.mark.parametrize("bits", [1, 6])
def test_key_directory_of_keys_of_63_bits(bits):
    """Keys up to 2**63 - 1: the directory's last bound, 2**63, does not fit an int64."""
    from dobutsu_tb.analysis.verify import _find, key_directory

    rng = np.random.default_rng(6)
    keys = np.unique(np.concatenate([rng.integers(1, 1 << 62, 300), rng.integers(1 << 62, (1 << 63) - 1, 300),
                                     [(1 << 63) - 1]]).astype(np.int64))
    directory, shift = key_directory(keys, bits)
    assert shift == 63 - bits and directory[0] == 0 and directory[-1] == keys.shape[0]
    assert all(directory[b] == np.searchsorted(keys, b << shift) for b in range(1 << bits))
    assert all(_find(keys, directory, shift, k) == i for i, k in enumerate(keys))


def test_verify_names_an_altered_value(cli, lion_chick_tb, tmp_path):
    bad = tmp_path / "bad.h5"
    bad.write_bytes(lion_chick_tb.path.read_bytes())
    with h5py.File(bad, "a") as f:
        values = f["values"][()]
        i = int(np.flatnonzero(values == value_code(1, 7))[3])
        values[i] = value_code(1, 9)  # a win in 7 claimed to take 9 plies
        f["values"][...] = values
        victim = Position.from_key(int(f["keys"][i])).text()
    with h5py.File(bad, "a") as f:  # (HDF5 has flushed the chunks: their place CRCs, as a forger would)
        reseal_chunks(f)
    report = verify_file(bad)
    assert not report.ok
    assert victim in [p.where for p in report.problems]
    result = cli("verify", "--tb", str(bad))
    assert result.exit_code == 1 and victim in result.output and "FAILED" in result.output
    said = re.search(r"fails verification: (\d+) (inconsistency|inconsistencies) \(listed above\)", result.output)
    assert said and said[1] == str(report.total_problems) and (said[2] == "inconsistency") == (said[1] == "1")


def test_verify_catches_metadata_lies(lion_chick_tb, tmp_path):
    bad = tmp_path / "bad.h5"
    bad.write_bytes(lion_chick_tb.path.read_bytes())
    with h5py.File(bad, "a") as f:
        f.attrs["wins"] = f.attrs["wins"] + 1
    with pytest.raises(TablebaseFileError, match="metadata fail their CRC-32 check"):
        verify_file(bad)
    with h5py.File(bad, "a") as f:  # a lie told with the checksums recomputed
        reseal(f)
    report = verify_file(bad)
    assert [p.where for p in report.problems] == ["metadata"]
    assert "wins" in report.problems[0].message


# --- stats and pictures --------------------------------------------------------------------


def test_stats(cli, lion_chick_tb, tmp_path):
    s = tablebase_stats(lion_chick_tb.path, longest=3)
    m = lion_chick_tb.metadata
    assert s.dtm_wins.sum() == m.wins and s.dtm_losses.sum() == m.losses
    assert s.material.sum() == m.nonterminal
    assert s.material[..., 2].sum() == m.wins
    assert [d for _, d in s.longest] == [21, 21, 21]
    # jh85 counts terminal positions too: a catch-terminal one is a win, a try-terminal one a loss
    everything = s.text().split("jh85's convention")[1]
    rows = dict(line.split()[:2] for line in everything.splitlines()[2:5])
    assert rows == {"wins": f"{m.wins + m.catch_terminal:,}", "draws": f"{m.draws:,}",
                    "losses": f"{m.losses + m.try_terminal:,}"}
    result = cli("stats", "--tb", str(lion_chick_tb.path), "--plot", str(tmp_path / "plot.png"))
    assert result.exit_code == 0 and "longest wins" in result.output
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = json.loads(cli("stats", "--tb", str(lion_chick_tb.path), "--json", "--longest", "3").output)
    assert sum(data["dtm_wins"]) == m.wins and sum(data["dtm_losses"]) == m.losses
    assert sum(row["positions"] for row in data["material"]) == m.nonterminal
    assert [w["dtm"] for w in data["longest"]] == [21, 21, 21]
    assert data["start_value"] == {"category": "win", "dtm": 15}


def test_show(cli, tmp_path):
    out = tmp_path / "start.png"
    result = cli("show", Position.START_TEXT, "--png", str(out))
    assert result.exit_code == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5000
    assert cli("show", "S/gle/-c-/-C-/ELG/L", "--png", str(out)).exit_code == 1


def test_line_pictures(cli, lion_chick_tb, tmp_path):
    result = cli("line", LION_CHICK, "--tb", str(lion_chick_tb.path), "--png-dir", str(tmp_path))
    assert result.exit_code == 0
    # The start and every ply, the last one's capture of the lion included.
    assert len(list(tmp_path.glob("ply*.png"))) == 16


def test_a_perfect_lines_end_names_the_royal_piece():
    """``line --json`` (and ``GET /api/line``) says how the line ends with the variant's royal
    piece: a user's variant may call it a king. A stand-in answers for the tablebase."""
    from dobutsu_tb.analysis.reports import perfect_line_json
    from dobutsu_tb.tablebase.game.variant import get_variant, parse_variant
    from dobutsu_tb.tablebase.probe import MoveValue
    from dobutsu_tb.tablebase.values import LOSS, WIN, Terminal

    data = get_variant("dobutsu-3x3").to_dict()
    data["name"] = "kings"
    next(p for p in data["pieces"] if p["royal"])["name"] = "king"
    variant = parse_variant(data)

    class LastMove:  # a won position whose best move ends the game
        def __init__(self, terminal):
            self.terminal = terminal

        def value(self, position):
            return WIN, 1, None

        def principal_variation(self, position, max_plies):
            return [MoveValue.after("Lb3-b2", None, LOSS, 0, Terminal(self.terminal))]

    start = Position.from_text(variant.start, variant)
    assert perfect_line_json(LastMove("lion captured"), start)["end"] == "Sente captures the king"
    assert perfect_line_json(LastMove("try"), start)["end"] == "Sente's king reaches the far rank safely"
    assert perfect_line_json(LastMove("try"), Position.from_text(LION_CHICK))["end"] == (
        "Sente's lion reaches the far rank safely")


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_sliced_histogram_and_longest_wins_match_whole_array_counts(dtype, monkeypatch):
    from dobutsu_tb.analysis import stats
    from dobutsu_tb.tablebase import schema

    monkeypatch.setattr(schema, "HISTOGRAM_STEP", 7)  # many slices, one cut short
    monkeypatch.setattr(stats, "HISTOGRAM_STEP", 7)
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 300 if dtype == np.uint16 else 256, 1000).astype(dtype)
    assert np.array_equal(schema.code_histogram(codes), np.bincount(codes, minlength=256))
    per_code = schema.code_histogram(codes)
    wins = [i for i in range(codes.shape[0]) if codes[i] and (int(codes[i]) - 1) % 2 == 1]
    naive = sorted(wins, key=lambda i: (-int(codes[i]), i))
    for k in (0, 1, 5, 40, len(wins) + 3):
        assert stats._longest_wins(codes, per_code, k) == naive[:k]


def test_one_of_a_thing_is_said_in_the_singular(cli, lion_chick_tb):
    """The hostile round found '1 plies', '1 inconsistencies', '1 route lines for 8 cleaners'."""
    from dobutsu_tb.encoding.words import counted

    assert [counted(1, "ply", "plies"), counted(2, "ply", "plies"), counted(1_000, "value")] == [
        "1 ply", "2 plies", "1,000 values"]
    result = cli("verify-line", "--tb", lion_chick_tb.path, "--start", LION_CHICK, "Lb4-a3")
    assert result.exit_code == 0
    assert "The line is perfect play: its one ply is optimal, though it stops" in result.output
