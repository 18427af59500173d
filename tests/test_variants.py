"""Variants as data: variant files and their errors, every front end on a variant's file, and the
small variants solved value by value against the naive reference."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import naive
from dobutsu_tb.tablebase.build import build_tablebase
from dobutsu_tb.tablebase.game.game import game_of
from dobutsu_tb.tablebase.game.position import Position, PositionError
from dobutsu_tb.tablebase.game.variant import (
    VariantError,
    get_variant,
    load_variant_file,
    load_variants,
    parse_variant,
    shipped_variants,
    standard_variant,
    variant_from_json,
)
from dobutsu_tb.tablebase.probe import open_tablebase
from dobutsu_tb.tablebase.reader import TablebaseFile
from dobutsu_tb.tablebase.values import decode_values

# --- descriptions --------------------------------------------------------------------------------


def test_shipped_variants_round_trip_through_json_and_toml(tmp_path):
    for v in shipped_variants().values():
        assert variant_from_json(v.to_json()) == v
        path = tmp_path / f"{v.name}.toml"
        path.write_text(v.to_toml(), encoding="utf-8")
        assert load_variant_file(path) == v
        assert v.digest == load_variant_file(path).digest


def test_the_standard_variant_is_the_game_of_the_rules():
    v = standard_variant()
    assert (v.files, v.ranks, v.start, v.hand_order) == (3, 4, "S/gle/-c-/-C-/ELG/-", "CEG")
    assert v.army == {"E": 2, "G": 2, "L": 2, "C": 2}
    assert v.mirror_symmetric and v.drops and v.try_rule
    assert game_of(v).layout["MAX_KEY_BITS"] == 44 and game_of(v).layout["KEY_SHIFT"] == 19


def _standard_dict(**changes):
    data = standard_variant().to_dict()
    data.update(name="mine")
    for key, value in changes.items():
        if value is None:
            del data[key]
        else:
            data[key] = value
    return data


def _pieces(edit):
    data = _standard_dict()
    edit(data["pieces"])
    return data


BAD = [
    (_standard_dict(colour="red"), "colour: unknown field"),
    (_standard_dict(files=None), "files: this field is missing"),
    (_standard_dict(files="3"), "files: must be an integer"),
    (_standard_dict(files=7), "files: must be 1 to 6"),
    (_standard_dict(ranks=7), "ranks: a board of 3 files x 7 ranks has 21 squares; the kernels hold at most 20"),
    (_standard_dict(name="My Game"), "name: must be 1 to 40 lower case letters"),
    (_standard_dict(start="S/gle/-c-/-C-/ELG/-/-"), "start: 'S/gle/-c-/-C-/ELG/-/-': expected 6 fields"),
    (_standard_dict(start="S/gle/-c-/-C-/ELX/-"), "start: 'S/gle/-c-/-C-/ELX/-': unknown piece letter 'X'"),
    (_standard_dict(start="S/gle/-c-/-C-/EGG/-"), "start: Sente needs exactly one lion (L)"),
    (_standard_dict(hand_order="CE"), "hand_order: must list each kind that can be dropped once (EGC)"),
    (_pieces(lambda p: p[0].update(steps=[[0, 5]])), "pieces[0] (E).steps[0]: the step [0, 5] leaves every square"),
    (_pieces(lambda p: p[0].update(steps=["up"])), "pieces[0] (E).steps[0]: unknown direction 'up'"),
    (_pieces(lambda p: p[0].update(royal=True)), "pieces: exactly one kind must be royal (royal = true), got 2: E, L"),
    (_pieces(lambda p: p[3].update(promotes_to="Q")), "pieces[3] (C).promotes_to: unknown piece 'Q'"),
    (_pieces(lambda p: p[1].update(letter="E")), "pieces[1].letter: the letter 'E' is used twice"),
    (_pieces(lambda p: p[1].update(letter="e")), "pieces[1].letter: must be one upper case letter A-Z"),
    (_pieces(lambda p: p[3].update(forbidden_drop_ranks=[1, 2, 3, 4])), "forbids every rank"),
    (_pieces(lambda p: p[0].update(size=2)), "pieces[0].size: unknown field"),
    (_pieces(lambda p: p.append(dict(p[0], letter="X", name="extra")) or p.append(dict(p[0], letter="Y", name="more"))
             or p.append(dict(p[0], letter="Z", name="last"))), "pieces: 1 to 7 kinds of piece, got 8"),
]


@pytest.mark.parametrize("data,message", BAD, ids=[m.split(":")[0] for _, m in BAD])
def test_a_bad_description_names_the_field(data, message):
    with pytest.raises(VariantError) as caught:
        parse_variant(data, "mine.toml")
    assert str(caught.value).startswith("mine.toml: ") and message in str(caught.value), str(caught.value)


def test_a_key_too_wide_for_64_bits_is_refused():
    """Seven kinds (codes of 4 and 5 bits) filling a 3x5 board need a 64-bit code."""
    wide = _standard_dict(ranks=5, drops=False, hand_order="", start="S/geg/cec/-l-/CLC/GEG/-")
    wide["pieces"] += [dict(wide["pieces"][1], letter="X", name="ex"), dict(wide["pieces"][1], letter="Y", name="why")]
    game = game_of(parse_variant(wide, "wide.toml"))  # described: drawn, listed, estimated; no keys
    assert game.key_problem.startswith("pieces: a position's key needs up to 64 bits; at most 56 fit")
    with pytest.raises(VariantError, match="mine: pieces: a position's key needs up to 64 bits; at most 56 fit"):
        game.key_of(Position.start(game.variant).state())
    with pytest.raises(VariantError, match="mine: pieces: a position's key needs up to 64 bits"):
        game.jitted()
    with pytest.raises(VariantError, match="mine: pieces: a position's key needs up to 64 bits"):
        Position.from_key(1 << 62, game.variant)  # (its plain kernels would decode some keys: refused first)
    hands = _standard_dict(start="S/gle/ccg/CCG/ELG/Ee")  # four of each kind: hand counts of 3 bits
    with pytest.raises(VariantError, match=r"hand_order: 3 kinds in hand \(at most 4 C, 4 E, 4 G\) need a 18-bit "
                                           r"hand field; at most 16 bits"):
        parse_variant(hands)
    giraffes = parse_variant(_standard_dict(start="S/gle/-cg/gC-/ELG/-"))  # four giraffes: 3 bits for them alone
    assert game_of(giraffes).layout["COUNT_SHIFT"] == [0, 2, 4, 7, 9, 11]



def _immobile(name, files, ranks, start, kinds):
    """A variant of a lion a side among pieces that never move, and no drops: keys as wide as a
    big army's, a few thousand positions (the hostile round's variants)."""
    names = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    pieces = [{"letter": "L", "name": "lion", "royal": True, "steps": ["f", "b", "l", "r", "fl", "fr", "bl", "br"]}]
    pieces += [{"letter": x, "name": n, "steps": []} for x, n in zip(kinds, names)]
    return {"name": name, "files": files, "ranks": ranks, "start": start, "drops": False, "try_rule": False,
            "pieces": pieces}


def test_a_key_too_wide_for_a_sort_record_is_listed_drawn_and_refused_by_the_build(cli, tmp_path):
    """A build's sort records hold a key's code and a one-byte value in 64 bits: a variant whose
    code may need more than 56 bits is read, listed (saying it cannot be built), drawn, and its
    build refused before anything is compiled or written, with one line that says why and what a
    build from its start would reach (a 58-bit one was once accepted, then its build wrote keys
    without their top bits and failed with 'the start position ... is not stored', or with a
    traceback, 'keys must be strictly ascending'; then it was refused when read, so that such a
    board could not even be described)."""
    wide = _immobile("wide", 2, 10, "S/aa/AA/aa/lA/aA/A-/AL/AA/aa/AA/-", "A")
    assert game_of(parse_variant(wide, "wide.toml")).key_problem.startswith(
        "pieces: a position's key needs up to 58 bits; at most 56 fit")
    assert game_of(parse_variant(dict(wide, start="S/aa/AA/aa/lA/aA/A-/-L/AA/aa/AA/-"))).layout["MAX_KEY_BITS"] == 56
    path = tmp_path / "wide.toml"
    path.write_text(parse_variant(dict(wide, start="S/aa/AA/aa/lA/aA/A-/-L/AA/aa/AA/-")).to_toml().replace(
        "-L/AA", "AL/AA"), encoding="utf-8")
    listed = cli("variants", "--variant-file", path)
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    starts = [i for i, line in enumerate(lines) if not line.startswith(" ")] + [len(lines)]
    block = {lines[a].split("  (")[0]: lines[a:b] for a, b in zip(starts, starts[1:])}
    assert "  not buildable: a position's key needs up to 58 bits; at most 56 fit a 64-bit key with this piece set " \
           "(wider keys are not supported yet)" in block["wide"], listed.output
    assert not any("not buildable" in line for name in shipped_variants() for line in block[name])  # they build
    drawn = cli("show", "--variant-file", path, "--png", tmp_path / "wide.png", "S/aa/AA/aa/lA/aA/A-/AL/AA/aa/AA/-")
    assert drawn.exit_code == 0 and (tmp_path / "wide.png").stat().st_size > 1000, drawn.output
    (tmp_path / "wide.png").unlink()
    result = cli("build", "--variant-file", path, "--out", tmp_path / "wide.h5")
    assert result.exit_code == 1 and result.output.startswith(
        "error: wide: pieces: a position's key needs up to 58 bits; at most 56 fit a 64-bit key with this piece set "
        "(wider keys are not supported yet); from S/aa/AA/aa/lA/aA/A-/AL/AA/aa/AA/-: at most ") and (
        "positions (every placement of its pieces)" in result.output and "a variant's army is its start's"
        in result.output and result.output.count("\n") == 1), result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wide.toml"]


#: Variants of immobile pieces (:func:`_immobile`) with the widest keys: (files, ranks, start, kinds,
#: the key's bits). tests/prewarm.py compiles the 4x5 board's.
WIDEST_KEYS = [
    (3, 4, "S/elB/EBC/--L/ceD/-", "ABCDEF", 50),
    (4, 5, "S/aBaB/-l--/aC--/--L-/BaBa/-", "ABC", 56),
]


@pytest.mark.parametrize("files, ranks, start, kinds, bits", WIDEST_KEYS)
def test_two_byte_values_with_the_widest_keys(tmp_path, monkeypatch, files, ranks, start, kinds, bits):
    """A DTM of 254 plies or more takes two-byte values, whatever the keys' width up to the 56 bits
    a sort record holds beside a byte (its byte says LONG; the value goes in a list of its own):
    such a build of 50-bit keys stopped with an error ('a DTM of 254 plies or more needs two-byte
    values ...'), and before that died with 'keys must be strictly ascending'. Positions of DTM 3
    or more stand for the long ones: the file's values are the plain build's, in two bytes."""
    from dobutsu_tb.tablebase import retrograde
    from dobutsu_tb.tablebase.reader import TablebaseFile

    v = parse_variant(_immobile("wide", files, ranks, start, kinds))
    assert game_of(v).layout["MAX_KEY_BITS"] == bits
    plain = build_tablebase(tmp_path / "a.h5", v.start, progress=False, variant=v)
    assert plain.metadata.max_dtm > 3
    monkeypatch.setattr(retrograde, "LONG_DTM", 3)
    wide = build_tablebase(tmp_path / "b.h5", v.start, progress=False, variant=v)
    with TablebaseFile(plain.path) as a, TablebaseFile(wide.path) as b:
        (ka, va), (kb, vb) = a.read_all(), b.read_all()
        assert a.value_dtype == np.dtype("u1") and b.value_dtype == np.dtype("<u2")
    assert np.array_equal(ka, kb) and np.array_equal(va, vb) and (va > 4).any()
    assert wide.metadata.max_dtm == plain.metadata.max_dtm and wide.metadata.wins == plain.metadata.wins


def test_bad_variant_files_get_one_error_line(cli, tmp_path):
    cases = {
        "not-toml.toml": (b"name = \n", "not a TOML file"),
        "latin1.toml": ("name = 'caf\xe9'".encode("latin-1"), "not UTF-8 text"),
        "huge.toml": (b"#" * 70000, "a variant file is at most 65,536 bytes"),
        "deep.toml": (b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deep"),
        "two-royals.toml": (standard_variant().to_toml().replace("royal = false", "royal = true", 1).replace(
            'name = "dobutsu"', 'name = "two"').encode(), "exactly one kind must be royal"),
        # text printed as it is: no control or format characters (the hostile round's NUL, RLO, newline)
        "rlo.toml": (standard_variant().to_toml().replace('name = "dobutsu"', 'name = "rlo"').replace(
            'title = "', 'title = "\\u202e', 1).encode(),
            "title: holds the control character U+202E; write plain text"),
        "nul.toml": (standard_variant().to_toml().replace('name = "dobutsu"', 'name = "nul"').replace(
            'description = "', 'description = "\\u0000', 1).encode(),
            "description: holds the control character U+0000; write plain text"),
    }
    for name, (data, message) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        result = cli("variants", "--variant-file", path)
        assert result.exit_code == 1 and result.output.startswith(f"error: {path}: "), result.output
        assert message in result.output and result.output.count("\n") == 1, result.output
    result = cli("variants", "--variant-file", tmp_path / "missing.toml")
    assert result.exit_code == 1 and "no such variant file or folder" in result.output
    clash = tmp_path / "clash.toml"
    clash.write_text(get_variant("dobutsu-3x3").to_toml().replace('files = 3', 'files = 3 ').replace(
        "try_rule = true", "try_rule = false"), encoding="utf-8")
    result = cli("variants", "--variant-file", clash)
    assert result.exit_code == 1 and "is a shipped variant's name" in result.output
    result = cli("build", "--variant", "nonesuch", "-q")
    assert result.exit_code == 1 and "unknown variant 'nonesuch'" in result.output


def test_a_named_pipe_in_a_folder_of_variants_is_refused_not_waited_on(tmp_path):
    """The third hostile round: a folder whose ``x.toml`` is a named pipe made ``variants``,
    ``build`` and ``verify-line`` wait for a writer for ever. A folder's files must be regular
    files (a subfolder named ``*.toml`` likewise); a pipe named alone is still read, as any file."""
    import os
    import subprocess
    import sys

    folder = tmp_path / "variants"
    folder.mkdir()
    (folder / "a.toml").write_text(LIONS_ONLY, encoding="utf-8")
    os.mkfifo(folder / "x.toml")
    commands = [["variants"], ["build", "-q", "--out", str(tmp_path / "x.h5")],
                ["verify-line", "--tb", str(tmp_path / "none.h5"), "Lb3-a2"]]
    for args in commands:
        run = subprocess.run([sys.executable, "-m", "dobutsu_tb.analysis.cli", *args, "--variant-file", str(folder)],
                             capture_output=True, text=True, timeout=60, check=False)
        assert (run.returncode, run.stdout, run.stderr) == (
            1, "", f"error: {folder / 'x.toml'}: a named pipe, not a variant file; the variant files of a folder "
                   f"are regular files\n"), args
    assert not (tmp_path / "x.h5").exists()
    os.unlink(folder / "x.toml")
    (folder / "y.toml").mkdir()
    with pytest.raises(VariantError, match="y.toml: a folder, not a variant file"):
        load_variants(folder)


def test_a_byte_order_mark_is_allowed_in_a_variant_file(cli, tmp_path):
    """docs/errors.md: text inputs may start with a UTF-8 byte order mark (Notepad writes one); a
    variant file that did was refused as 'not a TOML file'."""
    toml = tmp_path / "lions.toml"
    toml.write_bytes(b"\xef\xbb\xbf" + LIONS_ONLY.encode())
    assert load_variant_file(toml).name == "lions"
    result = cli("variants", "--variant-file", toml)
    assert result.exit_code == 0 and "lions  (loaded from" in result.output, result.output
    toml.write_bytes(b"\xef\xbb\xbf\xef\xbb\xbf" + LIONS_ONLY.encode())  # one mark, not two
    with pytest.raises(VariantError, match="not a TOML file"):
        load_variant_file(toml)


def test_variants_lists_the_shipped_and_loaded_ones(cli, tmp_path):
    mine = get_variant("dobutsu-3x3").to_toml().replace('name = "dobutsu-3x3"', 'name = "mine"')
    (tmp_path / "mine.toml").write_text(mine, encoding="utf-8")
    result = cli("variants", "--variant-file", tmp_path)
    assert result.exit_code == 0
    for name in (*shipped_variants(), "mine"):
        assert f"{name}  (" in result.output
    assert "mine  (loaded from" in result.output and "board: 3 files x 5 ranks" in result.output
    listed = json.loads(cli("variants", "--json").output)
    assert [v["name"] for v in listed][0] == "dobutsu"


def test_the_listing_says_a_kind_that_cannot_be_dropped(cli, tmp_path):
    """The third hostile round: a kind with ``drop = false`` (and ``forbidden_drop_ranks``) was
    listed as 'no chick drops on rank 1 from the far side', as if it could be dropped elsewhere."""
    data = get_variant("dobutsu-no-far-drop").to_dict()
    data.update(name="no-chick-drops", hand_order="EG", title="Chicks stay out")
    next(p for p in data["pieces"] if p["letter"] == "C")["drop"] = False
    (tmp_path / "v.toml").write_text(parse_variant(data).to_toml(), encoding="utf-8")
    result = cli("variants", "--variant-file", tmp_path / "v.toml")
    assert result.exit_code == 0, result.output
    mine = result.output.split("no-chick-drops  (loaded from")[1].split("\n  start:")[0]
    assert "board: 3 files x 4 ranks; drops; try; the chick cannot be dropped (captured, it leaves the game)\n" \
        in mine and "chick drops" not in mine, mine
    shipped = result.output.split("dobutsu-no-far-drop  (shipped)")[1].split("\n  start:")[0]
    assert "; no chick drops on rank 1 from the far side\n" in shipped, shipped


def test_board_sizes_are_written_files_then_ranks_in_words(cli):
    """The third hostile round: ``variants`` titled dobutsu-5x3 '3x5 board' where the README wrote
    boards as files x ranks and the name counts ranks first: sizes are said in words."""
    import re

    for v in shipped_variants().values():
        assert not re.search(r"[0-9] ?[x×] ?[0-9]", v.title), v.title
    assert get_variant("dobutsu-5x3").title.startswith("Dobutsu shogi on 3 files x 5 ranks")
    assert get_variant("dobutsu-5x3").size == "3 files x 5 ranks"
    listed = cli("variants").output
    assert "Dobutsu shogi on 3 files x 5 ranks" in listed and "3x5" not in listed


def test_a_file_whose_title_differs_takes_the_shipped_variants_positions(tmp_path):
    """A title (or description) is prose: a file built before a shipped title changed records the
    old one, and still takes the positions of the variant as shipped, and its name's start."""
    from dataclasses import replace

    shipped = get_variant("dobutsu-3x3")
    old = replace(shipped, title="Lions and chicks on a 3x3 board", description="before")
    assert old == shipped and hash(old) == hash(shipped) and old.canonical_json != shipped.canonical_json
    path = tmp_path / "old.h5"
    build_tablebase(path, Position.start(old), progress=False, variant=old)
    with open_tablebase(path) as tb:
        assert tb.variant.title == "Lions and chicks on a 3x3 board"
        assert tb.probe_wdl(Position.start(shipped)) == tb.probe_wdl(Position.start(old))


# --- a user's variant, end to end ----------------------------------------------------------------

KNIGHTS = """
name = "knights"
title = "Lions and knights on a 3x4 board"
files = 3
ranks = 4
start = "S/nl-/---/---/-LN/-"
drops = true
try_rule = false

[[pieces]]
letter = "L"
name = "lion"
royal = true
steps = ["f", "b", "l", "r", "fl", "fr", "bl", "br"]

[[pieces]]
letter = "N"
name = "knight"
steps = [[1, 2], [-1, 1]]
"""


def test_a_users_variant_builds_and_its_file_reads_without_the_toml(cli, tmp_path):
    """A variant from a TOML file (leapers, no try): built, probed, verified and solved value by
    value by the naive reference; the file records the description, so it reads after the TOML
    file is gone."""
    toml = tmp_path / "knights.toml"
    toml.write_text(KNIGHTS, encoding="utf-8")
    out = tmp_path / "knights.h5"
    result = cli("build", "--variant-file", toml, "--out", out, "-q")
    assert result.exit_code == 0, result.output
    toml.unlink()
    v = TablebaseFile(out).metadata.variant
    assert v.name == "knights" and not v.try_rule and v.kind("N").steps == ((1, 2), (-1, 1))
    assert not v.mirror_symmetric  # so mirror images are two positions
    assert cli("verify", "--tb", out).exit_code == 0
    probe = cli("probe", "S/nl-/---/---/-LN/-", "--tb", out)
    assert probe.exit_code == 0 and probe.output.startswith("S/nl-/---/---/-LN/-: ")
    _check_against_naive(out, naive.NaiveGame(v.to_dict()), v.start)


ONE_FILE = """
name = "one-by-five"
files = 1
ranks = 5
start = "S/l/c/-/C/L/-"
hand_order = "C"
[[pieces]]
letter = "L"
name = "lion"
royal = true
steps = ["f", "b"]
[[pieces]]
letter = "C"
name = "chick"
steps = ["f"]
promotes_to = "R"
[[pieces]]
letter = "R"
name = "hen"
steps = ["f", "b"]
"""


def test_verify_passes_a_file_whose_keys_reach_bit_62(cli, tmp_path):
    """A board of one file: its keys are 63 bits long, so the directory of ``verify`` ends at
    2**63, which an int64 cannot hold (it said a stored child was missing)."""
    toml = tmp_path / "one.toml"
    toml.write_text(ONE_FILE, encoding="utf-8")
    out = tmp_path / "one.h5"
    assert cli("build", "--variant-file", toml, "--out", out, "-q").exit_code == 0
    with TablebaseFile(out) as f:
        keys, _ = f.read_all()
    assert int(keys[-1]).bit_length() == 63
    result = cli("verify", "--tb", out)
    assert result.exit_code == 0 and "OK" in result.output, result.output
    _check_against_naive(out, naive.NaiveGame(load_variant_file(toml).to_dict()), "S/l/c/-/C/L/-")

LIONS_ONLY = """
name = "lions"
files = 3
ranks = 3
start = "S/-l-/---/-L-/-"
drops = false

[[pieces]]
letter = "L"
name = "lion"
royal = true
steps = ["f", "b", "l", "r", "fl", "fr", "bl", "br"]
"""


def test_a_variant_of_two_lions_builds(cli, tmp_path):
    """Two lions on a 3x3 board: the shortest keys any variant has (11 code bits, fewer than the
    hash table's smallest geometry needs; they are widened). Every value is the naive solver's."""
    toml = tmp_path / "lions.toml"
    toml.write_text(LIONS_ONLY, encoding="utf-8")
    out = tmp_path / "lions.h5"
    result = cli("build", "--variant-file", toml, "--out", out, "-q")
    assert result.exit_code == 0, result.output
    v = TablebaseFile(out).metadata.variant
    assert game_of(v).layout["MAX_KEY_BITS"] == 24
    n = _check_against_naive(out, naive.NaiveGame(v.to_dict()), v.start)
    assert n == TablebaseFile(out).metadata.nonterminal == 8  # as the naive solver finds
    probe = cli("probe", "S/-l-/---/-L-/-", "--tb", out)
    assert probe.exit_code == 0 and probe.output.startswith("S/-l-/---/-L-/-: "), probe.output


def _check_against_naive(path, game, start):
    """Every stored key and value is the naive solver's."""
    want = naive.solve(game, start)
    with TablebaseFile(path) as f:
        keys, values = f.read_all()
    wdl, dtm = decode_values(values)
    got = {int(k): (int(w), int(d)) for k, w, d in zip(keys, wdl, dtm)}
    assert got.keys() == want.keys()
    wrong = [k for k in got if got[k] != want[k]]
    assert not wrong, [(hex(k), got[k], want[k]) for k in wrong[:5]]
    return len(got)


SMALL = [("dobutsu-3x3", None), ("dobutsu", "S/-l-/-c-/-C-/-L-/-"), ("dobutsu-no-far-drop", "S/-l-/-c-/-C-/-L-/-"),
         ("dobutsu-nodrops", "S/el-/-c-/-C-/-LE/-"), ("dobutsu-nodrops", "S/gl-/---/---/-LG/-"),
         # the boards of more than 15 squares (the second word of the state), a chick against a lion
         ("dobutsu-6x3", "S/-l-/---/---/---/-C-/-L-/-"), ("dobutsu-4x4", "S/--l-/----/-C--/-L--/-")]


@pytest.mark.parametrize("variant,start", SMALL, ids=[f"{v} {s or 'start'}" for v, s in SMALL])
def test_small_variants_agree_with_the_naive_solver_value_by_value(tmp_path, variant, start):
    v = get_variant(variant)
    result = build_tablebase(tmp_path / "t.h5", start, progress=False, variant=v)
    n = _check_against_naive(result.path, naive.load_game(variant), start or v.start)
    assert n == result.metadata.nonterminal > 300


# --- every front end on a variant's file ---------------------------------------------------------


@pytest.fixture(scope="module")
def five_by_three(lion_chick_5x3_tb):
    """The lion-and-chick start of the 5x3 board (conftest's, built once a session)."""
    return lion_chick_5x3_tb


def test_front_ends_on_a_5x3_file(cli, five_by_three, tmp_path):
    path = five_by_three.path
    start = "S/-l-/-c-/---/-C-/-L-/-"
    probe = cli("probe", start, "--tb", path)
    assert probe.exit_code == 0 and probe.output.startswith(f"{start}: loss in 20 plies for Sente"), probe.output
    fen = Position.from_text(start, get_variant("dobutsu-5x3")).fen()
    assert fen == "1l1/1c1/3/1C1/1L1[-] w 0 1"
    assert cli("probe", fen, "--tb", path).output == probe.output
    line = json.loads(cli("line", start, "--tb", path, "--json").output)
    assert line["dtm"] == -20 and len(line["moves"]) == 20
    moves = [m["move"] for m in line["moves"]]
    judged = cli("verify-line", "--tb", path, "--start", start, *moves)
    assert judged.exit_code == 0 and "is perfect play" in judged.output
    assert cli("verify", "--tb", path).exit_code == 0
    stats = json.loads(cli("stats", "--tb", path, "--json").output)
    assert stats["variant"]["name"] == "dobutsu-5x3"
    assert stats["nonterminal"] == five_by_three.metadata.nonterminal == 43_710  # as docs/variants.md says
    png = tmp_path / "b.png"
    assert cli("show", start, "--variant", "dobutsu-5x3", "--png", png).exit_code == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    pictures = cli("line", start, "--tb", path, "--png-dir", tmp_path / "line")
    assert pictures.exit_code == 0 and (tmp_path / "line" / "ply001.png").exists()


#: The lion-and-chick endings of the boards of more than 15 squares: positions (reachable,
#: non-terminal), the start's value and the longest win (docs/variants.md, "Bigger boards").
BIG_BOARDS = [("dobutsu-6x3", "S/-l-/-c-/---/---/-C-/-L-/-", 214_252, 120_595, "win in 27", 47),
              ("dobutsu-4x4", "S/--l-/--c-/-C--/-L--/-", 104_404, 52_803, "win in 9", 29)]


@pytest.mark.parametrize("variant,start,reachable,nonterminal,value,longest", BIG_BOARDS,
                         ids=[v for v, *_ in BIG_BOARDS])
def test_the_big_boards_lion_and_chick_endings(cli, tmp_path, variant, start, reachable, nonterminal, value,
                                               longest):
    """A lion and a chick a side on the 6x3 and 4x4 boards: built, verified, and every front end
    on the file (the squares of the state's second word, files a to d, ranks 1 to 6)."""
    path = tmp_path / "t.h5"
    result = build_tablebase(path, start, progress=False, variant=get_variant(variant))
    assert (result.metadata.reachable, result.metadata.nonterminal) == (reachable, nonterminal)
    probe = cli("probe", start, "--tb", path)
    assert probe.exit_code == 0 and probe.output.startswith(f"{start}: {value} plies for Sente"), probe.output
    fen = Position.from_text(start, get_variant(variant)).fen()
    assert cli("probe", fen, "--tb", path).output == probe.output
    line = json.loads(cli("line", start, "--tb", path, "--json").output)
    moves = [m["move"] for m in line["moves"]]
    judged = cli("verify-line", "--tb", path, "--start", start, *moves)
    assert judged.exit_code == 0 and "is perfect play" in judged.output, judged.output
    assert cli("verify", "--tb", path).exit_code == 0
    stats = json.loads(cli("stats", "--tb", path, "--json").output)
    assert stats["longest"][0]["dtm"] == longest, stats["longest"][:1]
    pictures = cli("line", start, "--tb", path, "--png-dir", tmp_path / "line")
    assert pictures.exit_code == 0 and (tmp_path / "line" / "ply001.png").exists()


@pytest.mark.slow
@pytest.mark.parametrize("variant,start", [(v, s) for v, s, *_ in BIG_BOARDS], ids=[v for v, *_ in BIG_BOARDS])
def test_the_big_boards_lion_and_chick_endings_against_the_naive_solver(tmp_path, variant, start):
    """Value by value against the naive solver (a minute each: with -m slow)."""
    result = build_tablebase(tmp_path / "t.h5", start, progress=False, variant=get_variant(variant))
    assert _check_against_naive(result.path, naive.load_game(variant), start) == result.metadata.nonterminal


def test_the_big_boards_full_games_are_refused_with_their_estimate(cli, tmp_path):
    """The 6x3 and 4x4 boards' own starts do not fit one machine: refused before anything is
    compiled or written, with the bound of their positions and the estimate of their memory."""
    for variant, bound in (("dobutsu-6x3", "87,489,785,286"), ("dobutsu-4x4", "2,769,253,667,760")):
        result = cli("build", "--variant", variant, "--out", tmp_path / "x.h5", "--max-memory", "20G")
        assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
        assert result.output.startswith(f"error: {variant} from ") and f"at most {bound} positions" in result.output
        assert "more than the budget of 20.0 GiB (--max-memory)" in result.output and "--cluster" in result.output
    assert list(tmp_path.iterdir()) == []


def test_a_position_of_another_board_is_one_error_line(cli, five_by_three, lion_chick_tb):
    result = cli("probe", "S/-l-/-c-/-C-/-L-/-", "--tb", five_by_three.path)
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert "expected 7 fields" in result.output and "a position of dobutsu-5x3: 3 files, 5 ranks" in result.output
    result = cli("probe", "S/-l-/-c-/---/-C-/-L-/-", "--tb", lion_chick_tb.path)
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert "expected 6 fields" in result.output and "a position of dobutsu: 3 files, 4 ranks" in result.output
    result = cli("probe", "S/-l-/-c-/-C/-L-/-", "--tb", lion_chick_tb.path)  # the right board: no hint
    assert result.output == "error: 'S/-l-/-c-/-C/-L-/-': rank 3 must have 3 cells, got '-C'\n"
    with open_tablebase(five_by_three.path) as tb:
        with pytest.raises(PositionError, match="is a position of dobutsu; this tablebase is of dobutsu-5x3"):
            tb.probe_wdl(Position.start())


def test_a_position_of_the_same_rules_under_another_title_is_probed(lion_chick_tb):
    """A position's variant is the file's when its name and rules are (titles and prose apart),
    whichever object it is; another rule under the same name is refused."""
    import dataclasses

    from conftest import LION_CHICK
    from dobutsu_tb.tablebase.game.variant import get_variant

    ours = get_variant("dobutsu")
    retitled = dataclasses.replace(ours, title="Another title", description="other prose")
    other_rules = dataclasses.replace(ours, try_rule=False)
    with open_tablebase(lion_chick_tb.path) as tb:
        expected = tb.probe_wdl(Position.from_text(LION_CHICK, ours))
        assert tb.probe_wdl(Position.from_text(LION_CHICK, retitled)) == expected
        with pytest.raises(PositionError, match="is a position of dobutsu; this tablebase is of dobutsu"):
            tb.probe_wdl(Position.from_text(LION_CHICK, other_rules))


def test_format_3_files_read_as_dobutsu(tmp_path):
    """A file written before variants existed (format 3, the lion-and-chick tablebase as the
    previous release wrote it) is read as dobutsu shogi, with all its checks."""
    path = tmp_path / "old.h5"
    shutil.copyfile(naive.VARIANTS.parent.parent.parent / "data" / "fixtures" / "lion-chick-format3.h5", path)
    with open_tablebase(path) as tb:
        assert tb.metadata.format_version == 3 and tb.variant == standard_variant()
        assert tb.probe_dtm("S/-l-/-c-/-C-/-L-/-") == 15
        assert [m.move for m in tb.principal_variation("S/-l-/-c-/-C-/-L-/-")][:3] == ["Lb4-a3", "Cb2xb3", "La3xb3"]


def test_two_shapes_in_one_process_share_no_kernel(tmp_path):
    """Kernels bound to two board shapes, compiled in one process and one cache: each gives its
    own shape's answers (the cache folder is the shape's), and two variants of one shape share
    theirs, each reading its own rules."""
    a, b = game_of(get_variant("dobutsu")), game_of(get_variant("dobutsu-5x3"))
    c = game_of(get_variant("dobutsu-nodrops"))
    assert a.cache_key != b.cache_key and a.cache_key == c.cache_key == "shape-3x4"
    assert a.jitted().canonical_key is c.jitted().canonical_key
    sa, sb = Position.start().state(), Position.start(b.variant).state()
    assert a.perft(sa, 3) == 123 and b.perft(sb, 3) == 87 and c.perft(sa, 3) == 96
    assert a.jitted().canonical_key(a.rules_array, np.int64(sa[0]), np.int64(sa[1])) == Position.start().key()
    assert (b.jitted().canonical_key(b.rules_array, np.int64(sb[0]), np.int64(sb[1]))
            == Position.start(b.variant).key())


def test_positions_without_a_move_and_jh85s_counts(tmp_path, cli):
    """On a board where a lion can be walled in by its own rocks: the build finds the positions
    without a move (losses in 0), and the values that change when they are left undecided, as
    jh85/dobutsushogi's solver leaves them, are the naive solver's with that rule."""
    from dobutsu_tb.analysis.no_moves import jh85_counts, scan_no_move_keys

    path = Path(__file__).parent / "data" / "rocks.toml"
    v = load_variant_file(path)
    result = build_tablebase(tmp_path / "rocks.h5", progress=False, variant=v)
    m = result.metadata
    game = naive.NaiveGame(v.to_dict())
    positions, _ = naive.reachable(game, v.start)
    no_moves = sorted(k for k, p in positions.items() if not list(naive.moves(p)))
    assert m.no_moves == len(no_moves) == 4
    assert result.no_move_keys.tolist() == no_moves == scan_no_move_keys(result.path).tolist()
    ours, theirs = naive.solve(game, v.start), naive.solve(game, v.start, no_move_loses=False)
    changed = {k: (ours[k][0], theirs[k][0]) for k in ours if ours[k][0] != theirs[k][0]}
    with open_tablebase(result.path) as tb:
        counts = jh85_counts(tb, result.no_move_keys)
        with pytest.raises(ValueError):
            jh85_counts(tb, result.no_move_keys[1:])
    assert {c.position.key(): (c.wdl, c.undecided_wdl) for c in counts.changes} == changed
    assert len(changed) > len(no_moves) and any(w == 1 for w, _ in changed.values())  # a win hinges on them too
    wdl = [w for w, _ in theirs.values()]
    assert (counts.wins, counts.draws, counts.losses) == (
        wdl.count(1) + m.catch_terminal, wdl.count(0), wdl.count(-1) + m.try_terminal)
    # the build and stats print them
    built = cli("build", "--variant-file", path, "--out", tmp_path / "again.h5", "-q")
    assert built.exit_code == 0
    line = f"{counts.wins:,} wins, {counts.draws:,} draws, {counts.losses:,} losses"
    assert f"4 positions without a move and the {len(changed) - 4} values that hinge on them" in built.output
    assert line in built.output
    stats = cli("stats", "--tb", tmp_path / "again.h5")
    assert stats.exit_code == 0 and f"{counts.draws:>14,}" in stats.output and "jh85's solver" in stats.output
    # a position without a move is a loss for want of moves, not a try (the line command once said so)
    stuck = Position.from_key(no_moves[0], v).text()
    shown = cli("line", stuck, "--tb", tmp_path / "again.h5")
    assert shown.exit_code == 0 and "loss in 0 plies" in shown.output
    assert shown.output.rstrip().endswith("Sente has no legal move: a loss, as in shogi (docs/rules.md §3)")


def test_build_never_writes_over_its_variant_file(cli, tmp_path):
    """The hostile round's loss: ``--out`` naming the variant file itself was refused as 'not a
    dobutsu tablebase (--force replaces it)', and with ``--force`` the rules were replaced by the
    tablebase. Whether the file is named alone or found in a folder, it is an input: refused."""
    toml = tmp_path / "lions.toml"
    toml.write_text(LIONS_ONLY, encoding="utf-8")
    for source in (toml, tmp_path):
        result = cli("build", "--variant-file", source, "--out", toml, "--force", "-q")
        assert result.exit_code == 1 and result.output == (
            f"error: {toml} is a variant file this command reads ({toml}): not writing over it; name another file\n")
    assert toml.read_text(encoding="utf-8") == LIONS_ONLY


def test_verify_line_refuses_a_tablebase_of_another_variant_than_asked(cli, lion_chick_tb):
    """The hostile round: ``verify-line --tb dobutsu.h5 --variant dobutsu-nodrops ... C*b3`` judged
    the drop by the file's rules, silently. A variant asked for must be the file's."""
    result = cli("verify-line", "--tb", lion_chick_tb.path, "--variant", "dobutsu-nodrops", "Lb4-a3")
    assert result.exit_code == 2
    assert (f"Error: {lion_chick_tb.path} is a tablebase of dobutsu, not of dobutsu-nodrops: give a tablebase of "
            f"dobutsu-nodrops, or leave out --variant/--variant-file to use the file's own rules") in result.output
    from conftest import LION_CHICK

    ok = cli("verify-line", "--tb", lion_chick_tb.path, "--start", LION_CHICK, "--variant", "dobutsu", "Lb4-a3")
    assert ok.exit_code == 0, ok.output


def test_verify_line_names_a_tablebase_of_another_variant_of_the_same_name(cli, tmp_path):
    """The third hostile round: a file of a variant ``lions`` and a variant file ``lions`` with
    other rules were said as 'a tablebase of a lions whose rules differ from the variant file's,
    not of lions'."""
    built = tmp_path / "lions.toml"
    built.write_text(LIONS_ONLY, encoding="utf-8")
    out = tmp_path / "lions.h5"
    assert cli("build", "--variant-file", built, "--out", out, "-q").exit_code == 0
    other = tmp_path / "other" / "lions.toml"
    other.parent.mkdir()
    other.write_text(LIONS_ONLY.replace("drops = false", "drops = false\ntry_rule = false"), encoding="utf-8")
    result = cli("verify-line", "--tb", out, "--variant-file", other, "Lb3-a2")
    assert result.exit_code == 2
    said = " ".join(result.output.split())  # (click wraps the usage error's line)
    assert (f"Error: {out} is a tablebase of another variant named lions, with rules other than those asked for: "
            f"give a tablebase built from the rules asked for, or leave out --variant/--variant-file to use the "
            f"file's own rules") in said, result.output
    retitled = tmp_path / "retitled" / "lions.toml"  # the same rules under another title: the same variant
    retitled.parent.mkdir()
    retitled.write_text('title = "Two lions"\n' + LIONS_ONLY, encoding="utf-8")
    ok = cli("verify-line", "--tb", out, "--variant-file", retitled, "Lb3-a2")
    assert ok.exit_code == 0, ok.output
