"""The Parquet export (issue 44, ``dobutsu-tb export``; docs/export.md): every row read back with
pyarrow and compared with ``probe`` and ``probe_moves``, the moves with Fairy-Stockfish's legal
moves, the sample and the filters, bad options, a missing pyarrow, an interrupted export."""

import json
import os
import random
import sys

import numpy as np
import pytest

from conftest import DATA, LION_CHICK
from dobutsu_tb.tablebase.build import build_tablebase
from dobutsu_tb.tablebase.game.notation import uci_of_move_text
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.probe import open_tablebase
from dobutsu_tb.tablebase.reader import TablebaseFile
from dobutsu_tb.tablebase.values import decode_values

pq = pytest.importorskip("pyarrow.parquet")

from dobutsu_tb.tablebase import export as ex  # noqa: E402

COLUMNS = ["position", "fen", "wdl", "dtm", "moves", "move_dtm", "best_moves", "key"]
#: Lions, giraffes and chicks: 1,254,075 stored positions (a few seconds to build).
LARGER = "S/gl-/-c-/-C-/-LG/-"


@pytest.fixture(scope="module")
def larger_tb(tmp_path_factory):
    return build_tablebase(tmp_path_factory.mktemp("tb") / "glc.h5", LARGER, progress=False)


def stored(path):
    with TablebaseFile(path) as f:
        return f.read_all()


def read_rows(path):
    return pq.read_table(path).to_pylist()


def check_row(tb, row):
    """The row is what probe and probe_moves say of its position (docs/export.md)."""
    v = tb.variant
    pos = Position.from_key(row["key"], v)
    assert (row["position"], row["fen"]) == (pos.text(), pos.fen()), row
    assert row["position"].startswith("S/") and row["fen"].endswith(" w 0 1")
    assert Position.from_text(row["position"], v).key() == row["key"]
    wdl, dtm = tb.probe_wdl(pos), tb.probe_dtm(pos)
    assert (row["wdl"], row["dtm"]) == (wdl, dtm), row
    moves = tb.probe_moves(pos)
    assert row["moves"] == [uci_of_move_text(m.move, v) for m in moves], row
    assert row["move_dtm"] == [m.dtm for m in moves], row
    assert [np.sign(d) for d in row["move_dtm"]] == [m.wdl for m in moves]
    assert row["best_moves"] == [uci_of_move_text(m.move, v) for m in moves if (m.wdl, m.dtm) == (wdl, dtm)], row
    assert row["moves"][:len(row["best_moves"])] == row["best_moves"]


@pytest.mark.parametrize("which", ["lion_chick_tb", "tiny_3x3_tb"])
def test_every_row_of_a_small_tablebase_is_probe_and_probe_moves(cli, tmp_path, request, which):
    built = request.getfixturevalue(which)
    out = tmp_path / "rows.parquet"
    result = cli("export", "--tb", built.path, "--out", out)
    assert result.exit_code == 0, result.output
    n = built.metadata.nonterminal
    assert f"{out}: {n:,} positions" in result.stdout
    table = pq.read_table(out)
    assert table.column_names == COLUMNS
    types = {f.name: str(f.type) for f in table.schema}
    assert types == {"position": "string", "fen": "string", "wdl": "int8", "dtm": "int16",
                     "moves": "list<element: string not null>", "move_dtm": "list<element: int16 not null>",
                     "best_moves": "list<element: string not null>", "key": "int64"}
    keys, _ = stored(built.path)
    assert np.array_equal(table["key"].to_numpy(), keys)  # every stored position once, in key order
    with open_tablebase(built.path) as tb:
        for row in table.to_pylist():
            check_row(tb, row)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.parquet"]  # no temporary file left


def test_terminal_children_are_valued_as_probe_moves_values_them(lion_chick_tb, tmp_path):
    """A move to a catch-terminal position (the opponent captures the lion next) is a loss in 2,
    a move into a successful try a win in 1; a capture of the lion (a win in 1) never shows, since
    the stored positions are the non-terminal ones (the side to move cannot capture the lion)."""
    out = tmp_path / "lc.parquet"
    ex.export_parquet(lion_chick_tb.path, out, sample=2000, seed=2)
    seen = {}
    with open_tablebase(lion_chick_tb.path) as tb:
        for row in read_rows(out):
            moves = tb.probe_moves(Position.from_key(row["key"]))
            for m, d in zip(moves, row["move_dtm"]):
                assert d == m.dtm
                if m.terminal is not None:
                    seen[str(m.terminal)] = seen.get(str(m.terminal), 0) + 1
                    assert d == {"catch": -2, "try": 1}[str(m.terminal)], (row, m)
    assert set(seen) == {"catch", "try"} and min(seen.values()) > 100, seen


def test_random_rows_of_a_larger_tablebase(larger_tb, tmp_path):
    """1.25 M positions in row groups of 2**16 (the writer thread busy while the next is made);
    1,000 random rows against probe_moves, and every key."""
    out = tmp_path / "glc.parquet"
    report = ex.export_parquet(larger_tb.path, out, row_group=1 << 16)
    n = larger_tb.metadata.nonterminal
    assert report.rows == n == 1_254_075 and report.bytes == os.path.getsize(out)
    f = pq.ParquetFile(out)
    assert f.metadata.num_rows == n and f.metadata.num_row_groups == -(-n // (1 << 16))
    keys, values = stored(larger_tb.path)
    assert np.array_equal(f.read(columns=["key"])["key"].to_numpy(), keys)
    wdl, _ = decode_values(values)
    assert np.array_equal(f.read(columns=["wdl"])["wdl"].to_numpy(), wdl)
    rng = random.Random(44)
    picked = sorted(rng.sample(range(n), 1000))
    table = f.read()
    with open_tablebase(larger_tb.path) as tb:
        for i in picked:
            check_row(tb, table.slice(i, 1).to_pylist()[0])


def test_a_variant_file_of_another_board(lion_chick_5x3_tb, cli, tmp_path):
    """Files of any variant: the 5x3 board's lion-and-chick file (its variant read from the file;
    --variant only checks it), 1,500 random rows."""
    out = tmp_path / "lc5x3.parquet"
    result = cli("export", "--tb", lion_chick_5x3_tb.path, "--out", out, "--variant", "dobutsu-5x3")
    assert result.exit_code == 0, result.output
    rows = read_rows(out)
    assert len(rows) == lion_chick_5x3_tb.metadata.nonterminal
    meta = pq.ParquetFile(out).metadata.metadata
    assert json.loads(meta[b"dobutsu_tb.source"])["variant"] == "dobutsu-5x3"
    with open_tablebase(lion_chick_5x3_tb.path) as tb:
        for row in random.Random(5).sample(rows, 1500):
            check_row(tb, row)
    assert cli("export", "--tb", lion_chick_5x3_tb.path, "--out", out, "--variant", "dobutsu").exit_code == 2


def test_a_variant_file_and_the_default_output(tiny_3x3_tb, cli, tmp_path, monkeypatch):
    """--variant-file names the file's variant (a check); without --out the file is the
    tablebase's name with .parquet in the current folder; the variant file is never written over."""
    from dobutsu_tb.tablebase.game.variant import get_variant

    toml = tmp_path / "three.toml"
    toml.write_text(get_variant("dobutsu-3x3").to_toml(), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = cli("export", "--tb", tiny_3x3_tb.path, "--variant-file", toml)
    assert result.exit_code == 0, result.output
    assert len(read_rows(tmp_path / "tiny-3x3.parquet")) == tiny_3x3_tb.metadata.nonterminal
    result = cli("export", "--tb", tiny_3x3_tb.path, "--variant-file", toml, "--out", toml)
    assert result.exit_code == 1 and "is a variant file this command reads" in result.output
    assert toml.read_text(encoding="utf-8") == get_variant("dobutsu-3x3").to_toml()


# --- Fairy-Stockfish -------------------------------------------------------------------------------

_FSF_NAMES = {"dobutsu": "dobutsu", "dobutsu-5x3": "dobutsu5x3", "dobutsu-3x3": "dobutsu3x3"}


def _fsf(pyffish, name):
    if _FSF_NAMES[name] not in pyffish.variants():
        with open(os.path.join(DATA, "fairy-variants.ini")) as f:
            pyffish.load_variant_config(f.read())
    return _FSF_NAMES[name]


def _royal_on_its_far_rank(pos) -> bool:
    """Sente's lion on rank 1 or Gote's on the last rank (where the two rule sets differ)."""
    v = pos.variant
    royal = v.pieces.index(v.royal) + 1
    return royal in pos.board[:v.files] or royal | 8 in pos.board[v.cells - v.files:]


@pytest.mark.parametrize("which", ["lion_chick_tb", "tiny_3x3_tb", "larger_tb"])
def test_moves_are_fairy_stockfishs_legal_moves(tmp_path, request, which):
    """``moves`` is the set of legal moves pyffish gives for ``fen``, wherever the two rule sets
    agree (docs/uci.md): neither lion on a far rank (Fairy-Stockfish ends the game there at once)."""
    pyffish = pytest.importorskip("pyffish")
    built = request.getfixturevalue(which)
    out = tmp_path / "rows.parquet"
    ex.export_parquet(built.path, out, sample=min(3000, built.metadata.nonterminal), seed=3)
    variant = built.metadata.variant
    fsf = _fsf(pyffish, variant.name)
    compared = 0
    rows = read_rows(out)
    for row in rows:
        if _royal_on_its_far_rank(Position.from_text(row["position"], variant)):
            continue
        assert sorted(row["moves"]) == sorted(pyffish.legal_moves(fsf, row["fen"], [])), row
        assert len(set(row["moves"])) == len(row["moves"])
        compared += 1
    assert compared > 0.9 * len(rows)


# --- sample and filters ---------------------------------------------------------------------------


def test_a_sample_is_reproducible_uniform_and_without_replacement(larger_tb, tmp_path, cli):
    a, b, c = (tmp_path / f"{name}.parquet" for name in "abc")
    for out, seed in ((a, 7), (b, 7), (c, 8)):
        result = cli("export", "--tb", larger_tb.path, "--out", out, "--sample", 20000, "--seed", seed)
        assert result.exit_code == 0 and "20,000 positions" in result.stdout, result.output
    ka, kb, kc = (pq.read_table(p, columns=["key"])["key"].to_numpy() for p in (a, b, c))
    assert np.array_equal(ka, kb) and not np.array_equal(ka, kc)
    assert len(ka) == 20000 and np.all(np.diff(ka) > 0)  # distinct, in key order
    keys, values = stored(larger_tb.path)
    assert np.isin(ka, keys).all()
    wdl, _ = decode_values(values)
    share = np.mean(wdl == 1)
    got = np.mean(pq.read_table(a, columns=["wdl"])["wdl"].to_numpy() == 1)
    assert abs(got - share) < 0.015  # 4 standard deviations of a sample of 20,000
    positions = np.searchsorted(keys, ka)  # spread over the whole file
    assert positions.min() < len(keys) // 20 and positions.max() > len(keys) * 19 // 20
    meta = pq.ParquetFile(a).metadata.metadata
    chosen = json.loads(meta[b"dobutsu_tb.selection"])
    assert (chosen["sample"], chosen["seed"], chosen["rows"]) == (20000, 7, 20000)


def _values_of(path):
    keys, values = stored(path)
    wdl, dtm = decode_values(values)
    return keys, wdl, np.where(wdl < 0, -dtm.astype(np.int32), dtm.astype(np.int32))


@pytest.mark.parametrize("wheres, keep", [
    (["wdl=1", "dtm>=9"], lambda w, d: (w == 1) & (d >= 9)),
    (["wdl = loss"], lambda w, d: w == -1),
    (["wdl!=draw", "dtm > -5", "dtm<=3"], lambda w, d: (w != 0) & (d > -5) & (d <= 3)),
    (["dtm==-14"], lambda w, d: d == -14),
    (["wdl<0", "wdl>=0"], lambda w, d: np.zeros_like(w, bool)),
])
def test_where_keeps_exactly_the_positions_of_those_values(cli, lion_chick_tb, tmp_path, wheres, keep):
    out = tmp_path / "where.parquet"
    result = cli("export", "--tb", lion_chick_tb.path, "--out", out, *[a for w in wheres for a in ("--where", w)])
    assert result.exit_code == 0, result.output
    keys, wdl, dtm = _values_of(lion_chick_tb.path)
    table = pq.read_table(out)
    assert np.array_equal(table["key"].to_numpy(), keys[keep(wdl, dtm)])
    meta = json.loads(pq.ParquetFile(out).metadata.metadata[b"dobutsu_tb.selection"])
    assert len(meta["where"]) == len(wheres) and meta["rows"] == table.num_rows


def test_a_sample_of_the_positions_that_pass_where(lion_chick_tb, tmp_path):
    out = tmp_path / "both.parquet"
    filters = [ex.parse_filter("wdl=-1"), ex.parse_filter("dtm<=-4")]
    report = ex.export_parquet(lion_chick_tb.path, out, filters=filters, sample=300, seed=1, row_group=64)
    assert report.rows == 300
    keys, wdl, dtm = _values_of(lion_chick_tb.path)
    got = pq.read_table(out)["key"].to_numpy()
    assert len(set(got)) == 300 and np.isin(got, keys[(wdl == -1) & (dtm <= -4)]).all() and np.all(np.diff(got) > 0)
    again = tmp_path / "again.parquet"
    ex.export_parquet(lion_chick_tb.path, again, filters=filters, sample=300, seed=1, row_group=1 << 19)
    assert np.array_equal(pq.read_table(again)["key"].to_numpy(), got)  # row groups change nothing


def test_the_metadata_says_the_schema_units_and_conventions(lion_chick_tb, tmp_path):
    out = tmp_path / "meta.parquet"
    ex.export_parquet(lion_chick_tb.path, out, sample=10)
    meta = {k.decode(): v.decode() for k, v in pq.ParquetFile(out).metadata.metadata.items()}
    assert meta["dobutsu_tb.format"] == "dobutsu-tablebase export 1"
    columns = json.loads(meta["dobutsu_tb.columns"])
    assert [c["name"] for c in columns] == COLUMNS and all(c["description"] for c in columns)
    assert "plies" in meta["dobutsu_tb.units"] and "Sente to move" in meta["dobutsu_tb.conventions"]
    source = json.loads(meta["dobutsu_tb.source"])
    assert (source["start"], source["stored_positions"], source["variant"]) == (LION_CHICK, 11711, "dobutsu")
    assert json.loads(meta["dobutsu_tb.variant"])["name"] == "dobutsu"
    uci = json.loads(meta["dobutsu_tb.uci_moves"])
    assert "C@b3" in uci and "a3a4+" in uci and len(uci) == len(set(uci))


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize("where, says", [
    ("", "an empty filter"),
    ("mate<3", "'mate<3': unknown field 'mate'"),
    ("dtm=>30", "'dtm=>30' is not FIELD OP VALUE"),
    ("wdl=2", "'wdl=2': wdl is 1 (win), 0 (draw) or -1 (loss)"),
    ("dtm=win", "'dtm=win': win is a value of wdl"),
    ("dtm>=1.5", "'dtm>=1.5' is not FIELD OP VALUE"),
    ("dtm>=99999999999999999999", "a DTM has at most 65,534 plies"),
    ("WDL=1", "unknown field 'WDL'"),
])
def test_a_bad_filter_is_a_usage_error(cli_split, lion_chick_tb, tmp_path, where, says):
    out = tmp_path / "x.parquet"
    code, stdout, stderr = cli_split("export", "--tb", lion_chick_tb.path, "--out", out, "--where", where)
    assert code == 2 and "Error: Invalid value for '--where': " in stderr and says in stderr, stderr
    assert not out.exists()


@pytest.mark.parametrize("args, code, says", [
    (["--sample", "0"], 2, "Error: Invalid value for '--sample'"),
    (["--sample", "x"], 2, "Error: Invalid value for '--sample'"),
    (["--seed", "-1", "--sample", "5"], 2, "Error: Invalid value for '--seed'"),
    (["--seed", "3"], 2, "Error: --seed goes with --sample"),
    (["--sample", "11712"], 1, "error: --sample 11,712 is more than the 11,711 stored positions in the file\n"),
    (["--sample", "5", "--where", "dtm>100"], 1,
     "error: --sample 5 is more than the 0 stored positions that pass --where\n"),
    (["--variant", "dobutsu-3x3"], 2, "is a tablebase of dobutsu, not of dobutsu-3x3"),
    (["--variant", "nope"], 1, "error: unknown variant 'nope'"),
])
def test_bad_options(cli_split, lion_chick_tb, tmp_path, args, code, says):
    out = tmp_path / "x.parquet"
    got, stdout, stderr = cli_split("export", "--tb", lion_chick_tb.path, "--out", out, *args)
    assert got == code and says in stderr, stderr
    if code == 1:
        assert stderr.count("\n") == 1 and stderr.startswith(says) and not stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_bad_files(cli_split, lion_chick_tb, tmp_path):
    code, _, stderr = cli_split("export", "--tb", tmp_path / "none.h5", "--out", tmp_path / "x.parquet")
    assert (code, stderr) == (1, f"error: {tmp_path / 'none.h5'}: no such file (build one with 'dobutsu-tb build')\n")
    code, _, stderr = cli_split("export", "--tb", lion_chick_tb.path, "--out", lion_chick_tb.path)
    assert code == 1 and "not writing over it" in stderr and stderr.count("\n") == 1
    code, _, stderr = cli_split("export", "--tb", lion_chick_tb.path, "--out", tmp_path / "no" / "x.parquet")
    assert (code, stderr) == (1, f"error: {tmp_path / 'no'}: no such folder\n")
    (tmp_path / "a.parquet").write_bytes(b"PAR1")  # (not a tablebase)
    code, _, stderr = cli_split("export", "--tb", tmp_path / "a.parquet", "--out", tmp_path / "b.parquet")
    assert code == 1 and stderr.startswith("error: ") and stderr.count("\n") == 1


def test_without_pyarrow_export_says_what_to_install(cli_split, lion_chick_tb, tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "pyarrow" or m.startswith("pyarrow.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow: ImportError
    out = tmp_path / "x.parquet"
    code, stdout, stderr = cli_split("export", "--tb", lion_chick_tb.path, "--out", out)
    assert (code, stdout) == (1, "")
    assert stderr == ("error: export needs pyarrow, which is not installed: pip install 'dobutsu-tablebase[data]' "
                      "(or pip install pyarrow)\n")
    assert not out.exists()


def test_a_damaged_value_is_an_error_not_a_row(lion_chick_tb, tmp_path, monkeypatch):
    """A stored value that its moves' values contradict (the file read with good checksums: a
    forger's) stops the export, naming the position; nothing is written."""
    read_all = TablebaseFile.read_all

    def forged(self, *args, **kwargs):
        keys, values = read_all(self, *args, **kwargs)
        values = values.copy()
        values[100] = 2 if values[100] != 2 else 4  # a win in 1 (or a win in 3)
        return keys, values

    monkeypatch.setattr(TablebaseFile, "read_all", forged)
    out = tmp_path / "x.parquet"
    with pytest.raises(ex.TablebaseFileError, match=r"the stored value of S/.* is not the best of its moves' values "
                                                    r"\(stored entry 100\): the file is damaged"):
        ex.export_parquet(lion_chick_tb.path, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# --- an export cut short ------------------------------------------------------------------------


def test_an_interrupted_export_leaves_nothing(lion_chick_tb, tmp_path, monkeypatch):
    """Ctrl-C (or any error) between row groups: no file, no temporary file, no lock; a file that
    was there before is kept as it was."""
    made = []
    block_arrays = ex.block_arrays

    def cut(ctx, rows):
        made.append(len(rows))
        if len(made) == 3:
            raise KeyboardInterrupt
        return block_arrays(ctx, rows)

    monkeypatch.setattr(ex, "block_arrays", cut)
    out = tmp_path / "x.parquet"
    with pytest.raises(KeyboardInterrupt):
        ex.export_parquet(lion_chick_tb.path, out, row_group=1000)
    assert made == [1000] * 3 and sorted(p.name for p in tmp_path.iterdir()) == []
    out.write_bytes(b"an older export")
    made.clear()
    with pytest.raises(KeyboardInterrupt):
        ex.export_parquet(lion_chick_tb.path, out, row_group=1000)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.parquet"] and out.read_bytes() == b"an older export"


def test_a_failing_write_is_one_error_and_leaves_nothing(cli_split, lion_chick_tb, tmp_path, monkeypatch):
    """pyarrow's writer failing (a full disk) mid-export: one error line, no file."""
    writer = pq.ParquetWriter
    calls = []

    class Full(writer):
        def write_batch(self, *args, **kwargs):
            calls.append(1)
            if len(calls) == 2:
                raise OSError(28, "No space left on device")
            return super().write_batch(*args, **kwargs)

    monkeypatch.setattr(pq, "ParquetWriter", Full)
    monkeypatch.setattr(ex, "ROW_GROUP", 2000)
    out = tmp_path / "x.parquet"
    code, stdout, stderr = cli_split("export", "--tb", lion_chick_tb.path, "--out", out)
    assert (code, stdout) == (1, "")
    assert stderr == f"error: writing {out} failed (No space left on device); nothing was written\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == []
