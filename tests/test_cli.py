"""The dobutsu-tb command line: output, exit codes, one-line errors."""

import json
import os

import pytest

from conftest import LION_CHICK


def test_build_small(cli, tmp_path):
    out = tmp_path / "lc.h5"
    result = cli("build", "--start", LION_CHICK, "--out", str(out), "--quiet")
    assert result.exit_code == 0, result.output
    assert any(ln.split() == ["non-terminal:", "11,711"] for ln in result.output.splitlines())
    assert f"start position {LION_CHICK}: win in 15 plies" in result.output
    assert out.exists()


@pytest.mark.parametrize("start, nonterminal, value", [("S/--l/---/---/L--/-", "21", "win in 7 plies"),
                                                        ("S/-l-/---/---/-L-/C", "726", None)])
def test_build_a_start_with_fewer_positions_than_a_chunk(cli, tmp_path, start, nonterminal, value):
    # Fewer positions than a chunk of /keys (512) or /values (1,024): HDF5 refuses chunks larger
    # than the data, so such files have one smaller chunk; verify re-derives every value.
    out = tmp_path / "small.h5"
    result = cli("build", "--start", start, "--out", str(out), "--quiet")
    assert result.exit_code == 0, result.output
    assert any(ln.split() == ["non-terminal:", nonterminal] for ln in result.output.splitlines())
    assert value is None or f"start position {start}: {value}" in result.output
    result = cli("verify", "--tb", str(out))
    assert result.exit_code == 0 and "OK" in result.output, result.output


def test_probe_text_and_json(cli, lion_chick_tb):
    tb = str(lion_chick_tb.path)
    result = cli("probe", LION_CHICK, "--tb", tb)
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0] == f"{LION_CHICK}: win in 15 plies for Sente, DTM +15"
    # Lb4-a3 and Lb4-c3 mirror each other; both win in 15 for Sente, who plays them.
    assert sorted(ln.split()[0] for ln in lines[1:3]) == ["Lb4-a3", "Lb4-c3"]
    assert all(ln.split()[1:6] == ["win", "in", "15", "plies", "+15"] for ln in lines[1:3])
    data = json.loads(cli("probe", LION_CHICK, "--tb", tb, "--json").output)
    assert (data["category"], data["dtm"]) == ("win", 15)
    best = data["moves"][0]  # a move's value is its player's; "after" is the position after it, for Gote
    assert (best["move"][:4], best["category"], best["dtm"]) == ("Lb4-", "win", 15)
    assert best["after"] == {"category": "loss", "dtm": -14}
    assert len(data["moves"]) == 5  # four lion moves and Cb3xb2


def test_probe_catch_terminal_with_uncovered_children(cli, lion_chick_tb):
    # Sente's chick can take the lion on b1; some other moves lead where the tablebase never went.
    tb = str(lion_chick_tb.path)
    text = cli("probe", "S/-lR/-CL/---/---/-", "--tb", tb)
    assert text.exit_code == 0
    assert text.output.splitlines()[0].endswith("win in 1 ply for Sente, DTM +1 (it can capture the enemy lion)")
    captures = [ln.split()[0] for ln in text.output.splitlines() if ln.endswith("+1  captures the lion")]
    assert sorted(captures) == ["Cb2xb1+", "Lc2xb1", "Rc1xb1"]
    assert "not in this tablebase" in text.output
    data = json.loads(cli("probe", "S/-lR/-CL/---/---/-", "--tb", tb, "--json").output)
    assert {m["category"] for m in data["moves"]} >= {"unknown"}
    assert all(m["dtm"] is None for m in data["moves"] if m["category"] == "unknown")


def test_verify_and_stats_read_tb_and_still_the_deprecated_positional_file(cli_split, lion_chick_tb):
    for command in ("verify", "stats"):
        code, out, err = cli_split(command, "--tb", lion_chick_tb.path)
        assert code == 0 and err.count("warning") == 0, err
        old = cli_split(command, lion_chick_tb.path)
        assert old[0] == 0 and old[2].startswith(f"warning: 'dobutsu-tb {command} FILE' is deprecated"), old[2]
        assert old[1].split("(")[0] == out.split("(")[0]  # the same report (verify's seconds aside)


def test_probe_env_default(cli, lion_chick_tb, monkeypatch):
    monkeypatch.setenv("DOBUTSU_TB", str(lion_chick_tb.path))
    assert cli("probe", LION_CHICK).exit_code == 0


def test_line(cli, lion_chick_tb):
    result = cli("line", LION_CHICK, "--tb", str(lion_chick_tb.path))
    assert result.exit_code == 0
    plies = [ln for ln in result.output.splitlines() if ln[:1].isdigit()]
    assert len(plies) == 15
    assert plies[0] in ("1. Sente Lb4-a3", "1. Sente Lb4-c3")
    assert "wins" in result.output.splitlines()[-1]


@pytest.mark.parametrize("args,message", [
    (["probe", "S/gle/-c-/-C-/EL/-"], "rank 4 must have 3 cells"),
    (["probe", "S/gle/-c-/-C-/ELG/-"], "not in this tablebase"),
    (["line", "S/-l-/-c-/-C-/-L-/L"], "cannot be in hand"),
])
def test_bad_positions_exit_1(cli, lion_chick_tb, args, message):
    result = cli(*args, "--tb", str(lion_chick_tb.path))
    assert result.exit_code == 1
    assert result.output.strip().count("\n") == 0
    assert result.output.startswith("error: ") and message in result.output


def test_missing_and_corrupt_file_exit_1(cli, tmp_path):
    result = cli("probe", LION_CHICK, "--tb", str(tmp_path / "none.h5"))
    assert result.exit_code == 1 and "no such file" in result.output
    junk = tmp_path / "junk.h5"
    junk.write_text("junk")
    result = cli("probe", LION_CHICK, "--tb", str(junk))
    assert result.exit_code == 1 and "not a readable HDF5 file" in result.output


def test_terminal_start_exit_1(cli, tmp_path):
    result = cli("build", "--start", "S/---/-l-/-L-/---/-", "--out", str(tmp_path / "x.h5"), "-q")
    assert result.exit_code == 1 and "start position is terminal" in result.output


def test_full_hash_table_exit_1(cli, tmp_path, monkeypatch):
    from dobutsu_tb.encoding import compact_layout

    monkeypatch.setattr(compact_layout, "MIN_SLOT_BITS", 8)
    monkeypatch.setattr(compact_layout, "MAX_SLOT_BITS", 11)
    result = cli("build", "--start", LION_CHICK, "--out", str(tmp_path / "x.h5"), "-q")
    assert result.exit_code == 1
    assert result.output.startswith("error: hash table is full") and result.output.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_usage_error_exit_2(cli):
    assert cli("probe").exit_code == 2
    assert cli("nonsense").exit_code == 2


def test_line_json(cli, lion_chick_tb):
    result = cli("line", LION_CHICK, "--tb", str(lion_chick_tb.path), "--json")
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert (data["category"], data["dtm"]) == ("win", 15)
    assert [p["ply"] for p in data["moves"]] == list(range(1, 16))
    assert [p["side"] for p in data["moves"][:2]] == ["sente", "gote"]
    # Each ply's value is its player's: the winner's +15, the loser's -14, ... down to the capture.
    assert [p["dtm"] for p in data["moves"]] == [(n if n % 2 else -n) for n in range(15, 0, -1)]
    assert [abs(p["after"]["dtm"]) for p in data["moves"]] == list(range(14, -1, -1))
    assert data["moves"][-1]["terminal"] == "lion captured" and data["end"] == "Sente captures the lion"


def test_ctrl_c_while_the_command_line_is_read_is_one_error_line(monkeypatch, capsys):
    # click's own answer would be an empty line, "Aborted!" and exit code 1.
    import click

    from dobutsu_tb.analysis.cli import main

    def interrupted(self, ctx, args):
        raise KeyboardInterrupt

    monkeypatch.setattr(click.Group, "parse_args", interrupted)
    with pytest.raises(SystemExit) as stopped:
        main.main(["probe", LION_CHICK], prog_name="dobutsu-tb")
    assert stopped.value.code == 130
    assert capsys.readouterr().err == "error: interrupted by SIGINT\n"


# --- nothing overwritten, nothing stale (issue 24) -------------------------------------------------


def test_png_dir_draws_the_final_position_and_leaves_no_stale_picture(cli, lion_chick_tb, tmp_path):
    """A line that ends with the lion's capture gets its last picture (the captor on the lion's
    square); a shorter line drawn into the same folder leaves none of the longer one's pictures,
    nor of an earlier run's game folders, and nothing that is not a picture of ours goes."""
    folder = tmp_path / "line"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    (folder / "game7").mkdir()
    (folder / "game7" / "ply001.png").write_bytes(b"an earlier run's")
    result = cli("line", LION_CHICK, "--tb", lion_chick_tb.path, "--png-dir", folder)
    assert result.exit_code == 0, result.output
    pictures = sorted(p.name for p in folder.glob("ply*.png"))
    assert pictures == [f"ply{k:03d}.png" for k in range(16)]  # the start, then 15 plies: the capture's too
    assert (folder / "ply015.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"] + pictures  # game7 went, empty
    later = "G/-l-/-c-/LC-/---/-"  # after Lb4-a3: 14 plies to the end
    result = cli("line", later, "--tb", lion_chick_tb.path, "--png-dir", folder)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"] + [f"ply{k:03d}.png" for k in range(15)]
    # with --json too (the hostile round: line drew nothing then, verify-line did)
    result = cli("line", LION_CHICK, "--tb", lion_chick_tb.path, "--png-dir", folder, "--json")
    assert result.exit_code == 0 and json.loads(result.output)["end"] == "Sente captures the lion"
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"] + [f"ply{k:03d}.png" for k in range(16)]
    # a folder that cannot be made is an error before anything is printed (the JSON came first)
    for json_option in ((), ("--json",)):
        result = cli("line", LION_CHICK, "--tb", lion_chick_tb.path, "--png-dir", folder / "notes.txt" / "x",
                     *json_option)
        assert result.exit_code == 1 and result.stdout == "" and result.stderr == (
            f"error: cannot make the folder {folder / 'notes.txt' / 'x'} for the pictures (Not a directory)\n")
    # a picture that cannot be written (a full disk) is the one line said: nothing printed before it
    import errno

    from dobutsu_tb.analysis.cli import tablebase as cli_tablebase

    def full_disk(folder, *args):
        raise OSError(errno.ENOSPC, "No space left on device", str(folder / "ply000.png"))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli_tablebase, "draw_plies", full_disk)
        for json_option in ((), ("--json",)):
            result = cli("line", LION_CHICK, "--tb", lion_chick_tb.path, "--png-dir", folder, *json_option)
            assert result.exit_code == 1 and result.stdout == "", result.output
            assert result.stderr == f"error: {folder / 'ply000.png'}: No space left on device\n"
    # verify-line over several games: a folder per game, and again nothing stale.
    games = tmp_path / "games.txt"
    games.write_text("Lb4-a3 Cb2xb3\nLb4-c3 Cb2xb3 Lc3xb3\n")
    result = cli("verify-line", "--tb", lion_chick_tb.path, "--start", LION_CHICK, "--file", games,
                 "--png-dir", folder)
    assert result.exit_code == 0, result.output
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
        "game1/ply000.png", "game1/ply001.png", "game1/ply002.png",
        "game2/ply000.png", "game2/ply001.png", "game2/ply002.png", "game2/ply003.png", "notes.txt"]


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc, a folder no one can add files to")
def test_a_plot_into_a_folder_that_cannot_be_written_is_refused_before_the_work(cli, lion_chick_tb):
    """``stats --plot`` into an existing folder where no file can be made: one error line, and no
    statistics printed first (it had printed them all and failed at the end)."""
    result = cli("stats", "--tb", lion_chick_tb.path, "--plot", "/proc/plot.png")
    assert result.exit_code == 1 and result.output.startswith("error: cannot write /proc/plot.png (") and \
        result.output.count("\n") == 1, result.output


def test_an_output_that_is_an_input_is_refused_however_named(cli, lion_chick_tb, tmp_path):
    """The tablebase as the plot, through a hard link and a symbolic link, or among the pictures
    of --png-dir: refused before anything is written, the file intact."""
    import os

    tb = tmp_path / "t.png"
    tb.write_bytes(lion_chick_tb.path.read_bytes())
    before = tb.read_bytes()
    os.link(tb, tmp_path / "hard.png")
    (tmp_path / "soft.png").symlink_to(tb)
    for plot in ("hard.png", "soft.png", "t.png"):
        result = cli("stats", "--tb", tb, "--plot", tmp_path / plot)
        assert result.exit_code == 1 and result.output.startswith(f"error: {tmp_path / plot} is the tablebase"), \
            result.output
    folder = tmp_path / "pictures"
    folder.mkdir()
    os.link(tb, folder / "ply004.png")
    result = cli("line", LION_CHICK, "--tb", tb, "--png-dir", folder)
    assert result.exit_code == 1 and "ply004.png is the tablebase this command reads" in result.output
    assert sorted(p.name for p in folder.iterdir()) == ["ply004.png"]
    assert tb.read_bytes() == before
    assert cli("probe", LION_CHICK, "--tb", tb).exit_code == 0
