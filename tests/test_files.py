"""Files that are not what they claim (issue 9): every one gives a ``TablebaseFileError`` and, in
every command that reads a tablebase, one ``error:`` line and exit code 1; never a traceback and
never a wrong answer.

Each case takes a copy of the lion-and-chick tablebase and changes it as a careless tool or a
hostile user would: attributes of the wrong type, missing or unknown; datasets missing, extra, of
the wrong dtype, shape, chunking or filters; a damaged or forged index, chunk table or chunk;
metadata that lie. "Resealed" cases recompute the checksums (as a forger would), so that the
check under test is the one that trips.
"""

import os
import shutil
import zlib

import h5py
import numpy as np
import pytest

from conftest import LION_CHICK, reseal
from dobutsu_tb.tablebase import writer
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.game.variant import get_variant, parse_variant
from dobutsu_tb.tablebase.probe import open_tablebase
from dobutsu_tb.tablebase.reader import TablebaseFile
from dobutsu_tb.tablebase.schema import TablebaseFileError
from dobutsu_tb.tablebase.values import decode_value, decode_values, signed_dtm
from dobutsu_tb.tablebase.writer import pack_records

COMMANDS = [("probe", LION_CHICK, "--tb"), ("line", LION_CHICK, "--tb"), ("stats", "--tb"), ("verify", "--tb"),
            ("verify-line", "--start", LION_CHICK, "Lb4-c3", "--tb"), ("serve", "--port", "0", "--chunked", "--tb")]


def recreate(f, name, data, **options):
    del f[name]
    f.create_dataset(name, data=data, **options)


def truth(path):
    with TablebaseFile(path) as f:
        return f.read_all()


def forge(path, records, meta, monkeypatch):
    """Write records that no build would write (the writer's own checks switched off)."""
    monkeypatch.setattr(writer, "check_records", lambda records, counts, wide=False: None)
    with writer.reserve_output(path, force=True) as out:
        writer.write_file(out.tmp, records, meta)
        out.commit()
    monkeypatch.undo()


# --- files refused on open -----------------------------------------------------------------

def _attrs(**changes):
    def change(f):
        for k, v in changes.items():
            if v is None:
                del f.attrs[k]
            else:
                f.attrs[k] = v
    return change


def _resealed(change):
    def both(f):
        change(f)
        reseal(f)
    return both


def _swap_index(f):
    index = f["index"][()]
    index[[1, 2]] = index[[2, 1]]
    f["index"][...] = index


def _table_outside(f):
    table = f["chunk_table"][()]
    table[3, 0] = 10 ** 9
    f["chunk_table"][...] = table


def _table_swapped(f):
    """Chunk 1 of /keys read from chunk 2's bytes, chunk 3 of /values from chunk 4's (a pure
    exchange of two entries, every checksum recomputed, is a forged file: verify's to find)."""
    table = f["chunk_table"][()]
    m = f["index"].shape[0]
    table[1] = table[2]
    table[m + 3] = table[m + 4]
    f["chunk_table"][...] = table


def _table_huge_size(f):
    table = f["chunk_table"][()]
    table[0, 1] = 1 << 20
    f["chunk_table"][...] = table


#: A variant whose keys need 58 bits, more than a build holds (docs/variants.md): no build writes it.
_WIDE_KEYS = parse_variant({"name": "wide", "files": 2, "ranks": 10, "start": "S/aa/AA/aa/lA/aA/A-/AL/AA/aa/AA/-",
                            "drops": False, "try_rule": False,
                            "pieces": [{"letter": "L", "name": "lion", "royal": True,
                                        "steps": ["f", "b", "l", "r", "fl", "fr", "bl", "br"]},
                                       {"letter": "A", "name": "wall", "steps": []}]}).to_json()

OPEN_CASES = [
    ("version-as-text", _attrs(format_version="3"), "'format_version' is not an integer"),
    ("version-6", _attrs(format_version=np.int64(6)), "format version 6 (this program reads versions 2 to 5"),
    ("version-3-with-variant", _attrs(format_version=np.int64(3)), "unknown metadata attribute 'variant'"),
    ("variant-missing", _resealed(_attrs(variant=None)), "metadata attribute 'variant' is missing"),
    ("variant-not-json", _resealed(_attrs(variant="{")), "its variant: not a JSON variant description"),
    ("variant-bad-field", _resealed(_attrs(variant='{"name": "x"}')), "its variant: files: this field is missing"),
    ("variant-keys-too-wide", _resealed(_attrs(variant=_WIDE_KEYS)),
     "its variant: pieces: a position's key needs up to 58 bits; at most 56 fit"),
    ("variant-other-board", _resealed(_attrs(variant=get_variant("dobutsu-5x3").to_json())),
     "is not a position of dobutsu-5x3"),
    ("version-2-with-crc", _attrs(format_version=np.int64(2)), "unknown metadata attribute 'metadata_crc32'"),
    ("count-as-float", _attrs(nonterminal=11711.0), "'nonterminal' is not an integer"),
    ("count-as-array", _attrs(wins=np.array([6465, 0])), "'wins' is not an integer"),
    ("count-as-bool", _attrs(no_moves=np.bool_(False)), "'no_moves' is not an integer"),
    ("start-as-int", _attrs(start=np.int64(5)), "'start' is not a string"),
    ("seconds-as-text", _attrs(seconds_write="fast"), "'seconds_write' is not a number"),
    ("missing-attribute", _attrs(max_dtm=None), "'max_dtm' is missing"),
    ("missing-crc", _attrs(metadata_crc32=None), "'metadata_crc32' is missing"),
    ("unknown-attribute", _attrs(wdl_codes="1 0 -1"), "unknown metadata attribute 'wdl_codes'"),
    ("edited-created", _attrs(created="2000-01-01T00:00:00+00:00"), "metadata fail their CRC-32 check"),
    ("edited-start-dtm", _attrs(start_dtm=np.int64(13)), "metadata fail their CRC-32 check"),
    ("start-not-a-position", _resealed(_attrs(start="S/-l-/-c-/-C-/-L-")), "is not a position"),
    ("start-terminal", _resealed(_attrs(start="S/---/-l-/-L-/---/-")), "is terminal"),
    ("start-not-stored", _resealed(_attrs(start="S/gle/-c-/-C-/ELG/-")),
     "start position S/gle/-c-/-C-/ELG/- is not stored"),
    ("start-value-lie", _resealed(_attrs(start_dtm=np.int64(13))), "is not the one stored"),
    ("counts-disagree", _resealed(_attrs(wins=np.int64(6466))), "wins + draws + losses"),
    ("max-dtm-out-of-range", _resealed(_attrs(max_dtm=np.int64(70000))), "the longest DTM 70000 is out of range"),
    ("max-dtm-past-one-byte", _resealed(_attrs(max_dtm=np.int64(254))), "254 does not fit the file's one-byte"),
    ("extra-dataset", lambda f: f.create_dataset("wdl", data=np.zeros(3, "i1")), "unexpected dataset /wdl"),
    ("missing-stats", lambda f: f.__delitem__("stats/dtm_losses"), "dataset /stats/dtm_losses is missing"),
    ("stats-not-a-group", lambda f: (f.__delitem__("stats"), f.create_dataset("stats", data=1)),
     "the list of datasets is unreadable"),
    ("values-short", lambda f: recreate(f, "values", f["values"][:-1], chunks=(1024,), compression="gzip",
                                        fletcher32=True), "/values is uint8 of shape (11710,)"),
    ("keys-2d", lambda f: recreate(f, "keys", f["keys"][()].reshape(-1, 1), chunks=(512, 1), compression="gzip",
                                   shuffle=True, fletcher32=True), "expected int64 of shape (11711,)"),
    ("keys-float", lambda f: recreate(f, "keys", f["keys"][()].astype("<f8"), chunks=(512,), compression="gzip",
                                      shuffle=True, fletcher32=True), "/keys is float64"),
    ("keys-big-endian", lambda f: recreate(f, "keys", f["keys"][()].astype(">i8"), chunks=(512,),
                                           compression="gzip", shuffle=True, fletcher32=True), "/keys is >i8"),
    ("values-16-bit", lambda f: recreate(f, "values", f["values"][()].astype("<u2"), chunks=(1024,),
                                         compression="gzip", fletcher32=True), "/values is uint16"),
    ("values-no-fletcher32", lambda f: recreate(f, "values", f["values"][()], chunks=(1024,), compression="gzip"),
     "/values does not have the filters of a tablebase (deflate, fletcher32"),
    ("keys-lzf", lambda f: recreate(f, "keys", f["keys"][()], chunks=(512,), compression="lzf", shuffle=True,
                                    fletcher32=True), "/keys does not have the filters"),
    ("values-shuffled", lambda f: recreate(f, "values", f["values"][()], chunks=(1024,), shuffle=True,
                                           compression="gzip", fletcher32=True), "/values does not have the filters"),
    ("values-scaleoffset", lambda f: recreate(f, "values", f["values"][()], chunks=(1024,), scaleoffset=0,
                                              compression="gzip"), "/values does not have the filters"),
    ("values-not-chunked", lambda f: recreate(f, "values", f["values"][()]), "/values is not chunked"),
    ("keys-huge-chunks", lambda f: recreate(f, "keys", f["keys"][()], chunks=(1 << 17,), maxshape=(None,),
                                            compression="gzip", shuffle=True, fletcher32=True),
     "/keys is not chunked as a tablebase's is (chunks (131072,))"),
    ("stats-float", lambda f: recreate(f, "stats/dtm_wins", f["stats/dtm_wins"][()].astype("f8")),
     "/stats/dtm_wins is float64"),
    ("stats-2d", lambda f: recreate(f, "stats/dtm_wins", f["stats/dtm_wins"][()].reshape(1, -1)),
     "/stats/dtm_wins has shape"),
    ("index-damaged", _swap_index, "/index fails its CRC-32 check"),
    ("index-forged", _resealed(_swap_index), "/index is not strictly ascending"),
    ("index-float", _resealed(lambda f: recreate(f, "index", f["index"][()].astype("f8"))), "/index is float64"),
    ("chunk-table-damaged", _table_outside, "/chunk_table fails its CRC-32 check"),
    ("chunk-table-outside", _resealed(_table_outside), "/chunk_table points outside the file"),
    ("chunk-table-huge-size", _resealed(_table_huge_size), "impossible sizes"),
    ("chunk-table-overlapping", _resealed(_table_swapped), "/chunk_table has chunks that overlap"),
    ("chunk-table-short", _resealed(lambda f: recreate(f, "chunk_table", f["chunk_table"][:-1])),
     "/chunk_table is int64 of shape (34, 3)"),
    ("chunk-table-of-version-3", _resealed(lambda f: recreate(f, "chunk_table", f["chunk_table"][:, :2])),
     "/chunk_table is int64 of shape (35, 2); expected int64 of shape (35, 3)"),
]


@pytest.fixture()
def bad_copy(lion_chick_tb, tmp_path):
    path = tmp_path / "bad.h5"
    shutil.copyfile(lion_chick_tb.path, path)
    return path


def _refused_everywhere(cli, path, message, serve=True):
    """open_tablebase raises with ``message``; each command prints one error line, exit code 1."""
    for in_memory in (False, True):
        with pytest.raises(TablebaseFileError) as caught:
            open_tablebase(path, in_memory=in_memory)
        assert message in str(caught.value)
    for command in COMMANDS if serve else COMMANDS[:-1]:
        result = cli(*command, path)
        assert result.exit_code == 1, (command, result.output)
        if command == ("verify", "--tb") and "FAILED" in result.output:
            assert "metadata: " in result.output  # metadata that contradict the data: its report says how
            continue
        assert message in result.output, (command, result.output)
        assert result.output.startswith("error: ") and result.output.count("\n") == 1, (command, result.output)


@pytest.mark.parametrize("change,message", [c[1:] for c in OPEN_CASES], ids=[c[0] for c in OPEN_CASES])
def test_a_file_that_breaks_its_schema_is_refused(cli, bad_copy, change, message):
    with h5py.File(bad_copy, "a") as f:
        change(f)
    _refused_everywhere(cli, bad_copy, message)


def test_format_version_1_says_build_again(cli, lion_chick_tb, tmp_path):
    keys, values = truth(lion_chick_tb.path)
    wdl, dtm = decode_values(values)
    path = tmp_path / "v1.h5"
    with h5py.File(path, "w") as f:  # the layout of format version 1
        for name, data in (("keys", keys), ("wdl", wdl), ("dtm", dtm.astype("<u2")), ("index", keys[::512])):
            f.create_dataset(name, data=data, chunks=True, compression="gzip", fletcher32=True)
        f.attrs.update({"format": "dobutsu-tablebase", "format_version": np.int64(1), "start": LION_CHICK})
    _refused_everywhere(cli, path, "format version 1 (this program reads versions 2 to 5; build the file again")


def test_someone_elses_files_are_refused(cli, tmp_path):
    cases = [("empty.h5", b"", "not a readable HDF5 file"), ("text.h5", b"keys,values\n1,2\n", "not a readable HDF5")]
    for name, data, message in cases:
        (tmp_path / name).write_bytes(data)
        _refused_everywhere(cli, tmp_path / name, message)
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["keys"] = np.arange(10)
        f.attrs["format"] = "something else"
    _refused_everywhere(cli, tmp_path / "other.h5", "not a dobutsu tablebase")
    (tmp_path / "folder.h5").mkdir()  # the commands' --tb refuses a folder as a usage error
    with pytest.raises(TablebaseFileError, match="is a folder"):
        open_tablebase(tmp_path / "folder.h5")


def as_version(path, version):
    """Rewrite a file of format version 5 as one of version 4 (the same, its probe header no
    longer read), 3 (the chunk table without its place CRCs) or 2 (also without
    ``metadata_crc32``): what older builds wrote."""
    with h5py.File(path, "a") as f:
        if version < 4:
            recreate(f, "chunk_table", np.ascontiguousarray(f["chunk_table"][:, :2]))
            del f.attrs["variant"]  # (versions 2 and 3 are dobutsu shogi's, without the attribute)
        f.attrs["format_version"] = np.int64(version)
        reseal(f)
        if version == 2:
            del f.attrs["metadata_crc32"]


@pytest.mark.parametrize("version", [2, 3, 4])
def test_a_file_of_an_older_version_is_still_read(lion_chick_tb, bad_copy, version):
    """Files of format versions 2 to 4 (no probe header; versions 2 and 3 without place CRCs;
    version 2 without the metadata CRC) are read through h5py with every other check."""
    as_version(bad_copy, version)
    keys, values = truth(lion_chick_tb.path)
    with open_tablebase(bad_copy) as tb:
        assert tb.metadata.format_version == version
        assert tb.probe_dtm(LION_CHICK) == 15
    assert _every_answer_right_or_refused(bad_copy, keys, values) == 0


# --- the probe header (format version 5) -------------------------------------------------------


def _header(path):
    """The probe header's payload (a dict) and the user block's size."""
    from dobutsu_tb.tablebase import header

    with open(path, "rb") as f:
        payload = header.read(f.fileno())
    with h5py.File(path, "r") as f:
        return payload, f.userblock_size


def _write_header(path, payload, block):
    from dobutsu_tb.tablebase import header

    with open(path, "r+b") as f:
        f.write(header.encode(payload, block))


def test_a_file_opens_from_its_probe_header_as_it_reads_through_hdf5(lion_chick_tb):
    """A fresh file is opened from its header, without h5py; what it reads is what the reader
    reads through h5py, chunk by chunk and whole, and the header agrees with HDF5."""
    with TablebaseFile(lion_chick_tb.path) as fast, TablebaseFile(lion_chick_tb.path, hdf5=True) as slow:
        assert fast._file is None and slow._file is not None
        assert fast.metadata == slow.metadata and fast.metadata.format_version == 5
        assert slow.header_problems == []
        assert (fast.n, fast.key_chunk, fast.value_chunk) == (slow.n, slow.key_chunk, slow.value_chunk)
        assert np.array_equal(fast.index, slow.index)
        for c in range(fast.chunk_count()):
            assert fast.keys_of_chunk(c).tolist() == slow.read_keys(c).tolist()
        for c in range(fast.chunk_count(True)):
            assert list(fast.values_of_chunk(c)) == slow.read_values(c).tolist()
        for a, b in zip(fast.read_all(), slow.read_all()):
            assert np.array_equal(a, b)
        assert [s.tolist() for s in fast.read_stats()] == [s.tolist() for s in slow.read_stats()]
        assert fast.check_hdf5_index() == []


def test_a_value_read_from_a_chunk_inflated_in_part_is_the_value_of_the_whole_chunk(lion_chick_tb):
    """A probe inflates a chunk of /values only as far as the entry it reads (further on a later
    read): in any order of reads, forwards, back and to the end, each entry's code is the one of
    the chunk inflated whole."""
    import random

    rng = random.Random(5)
    with TablebaseFile(lion_chick_tb.path) as f:
        for c in range(f.chunk_count(True)):
            whole = list(f.values_of_chunk(c))
            source = f.value_source(c)
            order = sorted(rng.sample(range(len(whole)), min(8, len(whole))))
            order += order[::-1] + [len(whole) - 1, 0]
            assert [f.value_code(c, source, j) for j in order] == [whole[j] for j in order]
            assert source[1][:len(whole)] == bytes(whole)  # (the last chunk is stored full size)


def test_inflating_a_prefix_stops_where_asked_and_refuses_streams_cut_short_or_damaged():
    """:func:`inflate_prefix` gives the bytes zlib gives whole, as far as asked, and says
    ValueError for a stream that ends before the bytes asked for, or is not deflate."""
    from dobutsu_tb.tablebase.chunks import CHECKSUM_BYTES, inflate_prefix

    data = bytes(range(256)) * 3 + b"\x07" * 256
    stored = zlib.compress(data) + b"\0" * CHECKSUM_BYTES
    assert inflate_prefix(stored, 10) == data[:10] and inflate_prefix(stored, len(data)) == data
    cut = zlib.compress(data)[:40] + b"\0" * CHECKSUM_BYTES
    with pytest.raises(ValueError, match="fewer than 1024"):
        inflate_prefix(cut, len(data))
    with pytest.raises(ValueError, match="damaged deflate stream"):
        inflate_prefix(b"not a zlib stream" + b"\0" * CHECKSUM_BYTES, 1)
    with pytest.raises(ValueError, match="too short"):
        inflate_prefix(b"\0" * CHECKSUM_BYTES, 1)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_a_tablebase_dropped_without_closing_gives_its_descriptor_back(lion_chick_tb):
    """Opened, probed and dropped 200 times without close(): no descriptor stays open (the last
    hostile round ran out of them after 60 under ``ulimit -n 64``)."""
    import gc

    before = len(os.listdir("/proc/self/fd"))
    for _ in range(200):
        tb = open_tablebase(lion_chick_tb.path)
        assert tb.probe_dtm(LION_CHICK) == 15
        del tb
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) <= before


def test_a_probe_imports_neither_h5py_nor_numpy(lion_chick_tb):
    """``dobutsu-tb probe`` of a file with its probe header: the command's whole work, in a fresh
    process, loads none of h5py, numpy and numba (their imports were most of its time)."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from dobutsu_tb.analysis.cli.group import main\n"
            f"main(['probe', {LION_CHICK!r}, '--tb', {str(lion_chick_tb.path)!r}], standalone_mode=False)\n"
            "print(sorted(m for m in ('h5py', 'numpy', 'numba') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0] == f"{LION_CHICK}: win in 15 plies for Sente, DTM +15"
    assert out.splitlines()[-1] == "[]"


def test_a_damaged_probe_header_is_refused(cli, bad_copy):
    payload, block = _header(bad_copy)
    data = bytearray(bad_copy.read_bytes())
    data[100] ^= 0x20  # in the payload
    bad_copy.write_bytes(bytes(data))
    _refused_everywhere(cli, bad_copy, "the probe header fails its CRC-32 check: the file is damaged")
    data[100] ^= 0x20
    data[0] ^= 0x01  # the magic: no header at all, in a file of version 5
    bad_copy.write_bytes(bytes(data))
    _refused_everywhere(cli, bad_copy, "the probe header at the start of the file is missing: the file is damaged")


def test_a_file_changed_by_an_hdf5_tool_is_read_through_hdf5(lion_chick_tb, bad_copy):
    """An HDF5 tool's change after the build (here a resealed attribute) leaves the header
    describing another file: the reader goes through h5py and reads the new attribute; the stale
    header is not read, and verify, which reads HDF5, passes."""
    from dobutsu_tb.analysis.verify import verify_file

    with h5py.File(bad_copy, "a") as f:
        f.attrs.create("created", data=b"2000-01-01T00:00:00+00:00", dtype=h5py.string_dtype("utf-8", 25))
        reseal(f)
    keys, values = truth(lion_chick_tb.path)
    with TablebaseFile(bad_copy) as f:
        assert f._file is not None and f.metadata.created == "2000-01-01T00:00:00+00:00"
    assert _every_answer_right_or_refused(bad_copy, keys, values) == 0
    assert verify_file(bad_copy).ok


def test_a_forged_probe_header_is_read_and_verify_finds_it(lion_chick_tb, bad_copy):
    """A header rewritten with its CRC recomputed but another creation time (the metadata's CRC
    recomputed too): probes trust it (its CRC holds); verify, which reads HDF5's metadata, fails."""
    from dobutsu_tb.analysis.verify import verify_file
    from dobutsu_tb.tablebase.schema import metadata_crc32

    payload, block = _header(bad_copy)
    payload["attrs"]["created"] = "2000-01-01T00:00:00+00:00"
    payload["attrs"]["metadata_crc32"] = metadata_crc32(payload["attrs"])
    _write_header(bad_copy, payload, block)
    with open_tablebase(bad_copy) as tb:
        assert tb._file._file is None and tb.metadata.created == "2000-01-01T00:00:00+00:00"
        assert tb.probe_dtm(LION_CHICK) == 15
    report = verify_file(bad_copy)
    assert not report.ok and {p.where for p in report.problems} == {"probe header"}, report.problems
    assert any("'created'" in p.message for p in report.problems), report.problems


def test_a_miss_is_answered_only_from_an_index_in_order(cli, bad_copy):
    """A header file whose /index is forged out of order (the index's CRC-32 recomputed in the
    header): positions stored are found (the index is checked on the first miss, not on open);
    a position the file does not hold is an error, never "not in this tablebase"."""
    from dobutsu_tb.tablebase.schema import metadata_crc32

    payload, block = _header(bad_copy)
    offset, entries = payload["index"]
    data = bytearray(bad_copy.read_bytes())
    index = np.frombuffer(bytes(data[offset:offset + 8 * entries]), "<i8").copy()
    index[[10, 11]] = index[[11, 10]]
    data[offset:offset + 8 * entries] = index.tobytes()
    bad_copy.write_bytes(bytes(data))
    payload["attrs"]["index_crc32"] = zlib.crc32(index.tobytes())
    payload["attrs"]["metadata_crc32"] = metadata_crc32(payload["attrs"])
    _write_header(bad_copy, payload, block)
    with open_tablebase(bad_copy) as tb:
        assert tb.probe_dtm(LION_CHICK) == 15
        with pytest.raises(TablebaseFileError, match="/index is not strictly ascending"):
            tb.probe_dtm("S/gle/-c-/-C-/ELG/-")
    result = cli("probe", "S/gle/-c-/-C-/ELG/-", "--tb", bad_copy)
    assert result.exit_code == 1 and result.output.startswith("error: ") and result.output.count("\n") == 1
    assert "/index is not strictly ascending" in result.output


# --- files whose damage shows when a chunk is read --------------------------------------------


def _every_answer_right_or_refused(path, keys, values):
    """Probe every stored position lazily and in memory: each answer is the true one or a
    TablebaseFileError. Returns how many were refused lazily."""
    positions = [Position.from_key(int(k)) for k in keys]
    refused = 0
    with open_tablebase(path) as tb:
        for pos, code in zip(positions, values.tolist()):
            try:
                found = tb.value(pos)
            except TablebaseFileError:
                refused += 1
                continue
            wdl, dtm = decode_value(code)
            assert found[:2] == (wdl, signed_dtm(wdl, dtm)), pos.text()
    try:
        tb = open_tablebase(path, in_memory=True)
    except TablebaseFileError:
        return refused
    with tb:
        wdl, dtm = tb.probe_many(keys)
    assert np.array_equal(np.abs(dtm), np.where(values > 0, values.astype(np.int16) - 1, 0))
    return refused


def _forged(lion_chick_tb, tmp_path, monkeypatch, edit):
    keys, values = truth(lion_chick_tb.path)
    k, v = keys.copy(), values.copy()
    edit(k, v)
    path = tmp_path / "forged.h5"
    forge(path, pack_records(k, v, 19), lion_chick_tb.metadata, monkeypatch)
    return path, keys, values


@pytest.mark.parametrize("entry,edit,message", [
    (5000, lambda k, v: v.__setitem__(5000, 200), "the value byte of entry 5000 (200) is out of range"),
    (7000, lambda k, v: v.__setitem__(7000, 1), "the value byte of entry 7000 (1) is out of range"),
    (3000, lambda k, v: k.__setitem__(slice(3000, 3002), k[3000:3002][::-1]), "chunk 5 of /keys is out of order"),
], ids=["value-beyond-longest-dtm", "loss-in-0-without-such-positions", "keys-out-of-order"])
def test_a_forged_chunk_gives_errors_not_answers(cli, lion_chick_tb, tmp_path, monkeypatch, entry, edit, message):
    path, keys, values = _forged(lion_chick_tb, tmp_path, monkeypatch, edit)
    assert _every_answer_right_or_refused(path, keys, values) > 0
    with pytest.raises(TablebaseFileError, match="out of"):
        open_tablebase(path, in_memory=True)
    victim = Position.from_key(int(keys[entry])).text()
    for command in (("stats", "--tb", path), ("verify", "--tb", path), ("probe", victim, "--tb", path)):
        result = cli(*command)
        assert result.exit_code == 1 and result.output.startswith("error: ") and result.output.count("\n") == 1
        assert (message if command[0] == "probe" else "out of") in result.output, result.output


def test_a_filter_mask_that_skips_filters(cli, lion_chick_tb, bad_copy):
    """A chunk recorded in HDF5's index with a filter mask that tells HDF5 readers to skip its
    filters (HDF5's checksums intact): our reader goes by the chunk table and answers right;
    verify names the chunk."""
    keys, values = truth(lion_chick_tb.path)
    with h5py.File(bad_copy, "a") as f:
        dset = f["values"]
        info = dset.id.get_chunk_info(2)
        raw = open(bad_copy, "rb").read()[info.byte_offset: info.byte_offset + info.size]
        # (HDF5 keeps the old mask of a chunk rewritten at the same size: one byte more.)
        dset.id.write_direct_chunk(info.chunk_offset, raw + b"\0", filter_mask=1)
    assert _every_answer_right_or_refused(bad_copy, keys, values) == 0
    result = cli("verify", "--tb", bad_copy)
    assert result.exit_code == 1 and "FAILED" in result.output
    assert "chunk 2 of /values: HDF5's filter mask is 0x1" in result.output


def test_counts_that_lie_are_refused_by_whole_file_readers(cli, lion_chick_tb, bad_copy):
    """Counts that still add up but are not the data's (resealed): probes are right (the values
    are); in-memory opening, stats and verify refuse the file."""
    with h5py.File(bad_copy, "a") as f:
        f.attrs["wins"] = f.attrs["wins"] + 1
        f.attrs["losses"] = f.attrs["losses"] - 1
        reseal(f)
    with open_tablebase(bad_copy) as tb:
        assert tb.probe_dtm(LION_CHICK) == 15
    with pytest.raises(TablebaseFileError, match="inconsistent metadata: wins is 6,466 but the data have 6,465"):
        open_tablebase(bad_copy, in_memory=True)
    result = cli("stats", "--tb", bad_copy)
    assert result.exit_code == 1 and result.output.startswith("error: ") and "wins is 6,466" in result.output
    result = cli("verify", "--tb", bad_copy)
    assert result.exit_code == 1 and "metadata: wins is 6,466 but the data has 6,465" in result.output


# --- chunks out of place -------------------------------------------------------------------------


def _equal_sizes(table, rows):
    """Pairs of rows (of ``rows``) of the chunk table whose chunks have the same stored size."""
    by_size = {}
    for r in rows:
        by_size.setdefault(int(table[r, 1]), []).append(r)
    return [group[:2] for group in by_size.values() if len(group) > 1]


@pytest.fixture(scope="module")
def small_chunks(lion_chick_tb, tmp_path_factory):
    """The lion-and-chick tablebase written with chunks of 16 keys and 64 values: hundreds of
    chunks, many of them of the same stored size as another."""
    from dobutsu_tb.encoding import config

    keys, values = truth(lion_chick_tb.path)
    path = tmp_path_factory.mktemp("small-chunks") / "small.h5"
    with pytest.MonkeyPatch.context() as m:
        m.setattr(config, "KEY_CHUNK", 16)
        m.setattr(config, "VALUE_CHUNK", 64)
        writer.write_tablebase(path, pack_records(keys, values, 19), lion_chick_tb.metadata)
    with h5py.File(path, "r") as f:
        table, m = f["chunk_table"][()], f["index"].shape[0]
    return path, keys, values, table, m


def _move_chunks(path, table, edits):
    """Write chunk ``a``'s stored bytes over chunk ``b``'s for each (a, b) in ``edits`` (rows of
    the chunk table, chunks of equal size), all read before any is written."""
    data = bytearray(path.read_bytes())
    raws = {a: bytes(data[table[a, 0]: table[a, 0] + table[a, 1]]) for a, _ in edits}
    for a, b in edits:
        assert table[a, 1] == table[b, 1]
        data[table[b, 0]: table[b, 0] + table[b, 1]] = raws[a]
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("dataset", ["keys", "values"])
@pytest.mark.parametrize("how", ["swapped", "copied"])
def test_a_chunk_out_of_place_is_an_error_never_a_value(cli, small_chunks, tmp_path, dataset, how):
    """Chunks of equal stored size swapped or copied over each other (each chunk's own checksums
    travel with it): every position is probed, lazily and in memory; no answer is wrong, the
    positions the moved chunks serve are refused, and verify names the place."""
    path, keys, values, table, m = small_chunks
    rows = range(m) if dataset == "keys" else range(m, table.shape[0])
    pairs = _equal_sizes(table, rows)[:3]
    assert len(pairs) == 3, "no chunks of equal size to move"
    edits = [e for a, b in pairs for e in ([(a, b), (b, a)] if how == "swapped" else [(a, b)])]
    copy = tmp_path / "moved.h5"
    shutil.copyfile(path, copy)
    _move_chunks(copy, table, edits)
    refused = _every_answer_right_or_refused(copy, keys, values)
    # Every position served by an overwritten chunk is refused (each key chunk also hides the
    # positions it locates, whose values are never reached).
    per_chunk = 16 if dataset == "keys" else 64
    assert refused >= per_chunk * len(edits) - 64
    with pytest.raises(TablebaseFileError, match="fails the CRC-32 of its place in /chunk_table"):
        open_tablebase(copy, in_memory=True)
    c = min(b for _, b in edits) - (0 if dataset == "keys" else m)  # the first chunk out of place
    for command in (("stats", "--tb", copy), ("verify", "--tb", copy)):
        result = cli(*command)
        assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
        assert f"chunk {c} of /{dataset} fails the CRC-32 of its place" in result.output, result.output


def test_a_values_chunk_out_of_place_in_a_version_3_file(cli, small_chunks, tmp_path):
    """What files of format version 3 (and 2) are guaranteed: their /values chunks say nothing of
    their place, so probes answer from a swapped one; ``verify``, which re-derives every value,
    fails such a file (the guarantee docs/file-format.md states for them)."""
    path, keys, values, table, m = small_chunks
    copy = tmp_path / "v3.h5"
    shutil.copyfile(path, copy)
    as_version(copy, 3)
    (a, b), = _equal_sizes(table, range(m, table.shape[0]))[:1]
    _move_chunks(copy, table, [(a, b), (b, a)])
    result = cli("verify", "--tb", copy)
    assert result.exit_code == 1 and "FAILED" in result.output, result.output


@pytest.mark.parametrize("keep", [0.3, 0.999])
def test_a_truncated_file_says_so(cli, lion_chick_tb, tmp_path, keep):
    """A copy cut short (a download or a copy that stopped) is refused everywhere with its size and
    the size its HDF5 superblock records, not with HDF5's offsets."""
    data = lion_chick_tb.path.read_bytes()
    path = tmp_path / "cut.h5"
    path.write_bytes(data[:int(keep * len(data))])
    _refused_everywhere(cli, path, f"the file is truncated ({int(keep * len(data)):,} bytes; its HDF5 superblock "
                                   f"says {len(data):,}): copy or build it again")


# --- the chunks made in compiled code ------------------------------------------------------

@pytest.mark.parametrize("wide", [False, True])
def test_compiled_chunks_are_those_of_pythons_zlib(wide):
    """``chunk_kernels.encode_span`` (zlib called from numba, every thread at once) against the
    slow reference: ``encode_chunks`` in Python's zlib and ``place_crc``, byte for byte, for
    both datasets, spans that start inside the records and a last chunk padded; two-byte values
    taken from the long values where a record's byte is LONG (one in twenty here), by key."""
    from dobutsu_tb.tablebase import chunk_kernels
    from dobutsu_tb.tablebase.chunks import encode_chunks, place_crc

    assert chunk_kernels.AVAILABLE  # 64-bit Linux: the writer's fast path must not vanish unseen
    rng = np.random.default_rng(int(wide))
    n, key_shift = 512 * 21 + 77, 5
    keys = np.unique(rng.integers(0, 1 << 40, 2 * n))[:n] << key_shift
    values = rng.integers(0, 255, n)
    if wide:
        values[::20] = rng.integers(255, 1 << 16, values[::20].shape[0])
    records = writer.pack_records(keys, values, key_shift)
    longs = writer.long_values(keys, values, key_shift) if wide else None
    assert not wide or longs.codes.shape[0] >= n // 20
    for keys_, chunk in ((True, 512), (False, 1024)):
        dtype = np.int64 if keys_ else (np.uint16 if wide else np.uint8)
        full = np.zeros(-(-n // chunk) * chunk, dtype)
        full[:n] = keys if keys_ else values  # the slow reference: what the file must hold
        assert np.array_equal(full[:n], writer.record_keys(records, key_shift) if keys_
                              else writer.record_values(records, longs))
        reference = encode_chunks(full.reshape(-1, chunk), shuffle=keys_)
        m = len(reference)
        for first, count in ((0, m), (3, m - 3), (m - 1, 1)):
            out, sizes, crcs = chunk_kernels.encode_span(records, first, count, chunk, keys_, key_shift, longs,
                                                         100 + first)
            assert [bytes(out[k, :sizes[k]]) for k in range(count)] == reference[first:first + count]
            assert crcs.tolist() == [place_crc(100 + first + k, reference[first + k]) for k in range(count)]
    if wide:  # a record whose byte says two bytes, and no long value for its key
        short = writer.LongValues(longs.codes[1:], longs.values[1:])
        with pytest.raises(ValueError, match="long values have none for its key"):
            chunk_kernels.encode_span(records, 0, 1 + n // 1024, 1024, False, key_shift, short, 0)
        with pytest.raises(ValueError, match="long values have none for its key"):
            writer.record_values(records, short)


def test_a_file_written_without_the_compiled_chunks_is_the_same(lion_chick_tb, tmp_path, monkeypatch):
    """Where zlib cannot be called from compiled code, the writer compresses in Python's zlib in
    a thread pool: the same chunks, chunk for chunk, and the same chunk table (the chunks lie in
    another order in the file: the tasks differ in size)."""
    from dobutsu_tb.tablebase import chunk_kernels
    from dobutsu_tb.tablebase.game.game import game_of

    keys, values = truth(lion_chick_tb.path)
    with TablebaseFile(lion_chick_tb.path) as f:
        meta = f.metadata
    records = pack_records(keys, values, game_of(meta.variant).layout["KEY_SHIFT"])
    paths, calls = {}, []
    slow = writer.encode_chunks
    monkeypatch.setattr(writer, "encode_chunks", lambda *args, **kw: calls.append(1) or slow(*args, **kw))
    for native in (True, False):
        monkeypatch.setattr(chunk_kernels, "AVAILABLE", native)
        monkeypatch.setattr(writer.config, "KEY_CHUNK", 64)  # many chunks, several tasks
        monkeypatch.setattr(writer.config, "VALUE_CHUNK", 128)
        monkeypatch.setattr(writer, "_TASK_CHUNKS", 4)
        monkeypatch.setattr(writer, "_NATIVE_TASK_CHUNKS", 8)
        paths[native] = writer.write_tablebase(tmp_path / f"{native}.h5", records, meta)
        assert bool(calls) != native  # each path taken
    with h5py.File(paths[True], "r") as a, h5py.File(paths[False], "r") as b:
        for name in ("keys", "values"):
            chunk = a[name].chunks[0]
            assert a[name].shape[0] > 8 * chunk
            for start in range(0, a[name].shape[0], chunk):
                assert a[name].id.read_direct_chunk((start,)) == b[name].id.read_direct_chunk((start,))
        for name in ("index", "stats/dtm_wins", "stats/dtm_losses"):
            assert np.array_equal(a[name][()], b[name][()])
        assert np.array_equal(a["chunk_table"][()][:, 1:], b["chunk_table"][()][:, 1:])  # sizes, CRCs
    for path in paths.values():
        assert np.array_equal(truth(path)[0], keys) and np.array_equal(truth(path)[1], values)


def test_the_chunk_table_is_hdf5s_own_without_reading_it_back(lion_chick_tb, tmp_path, monkeypatch):
    """The writer places each chunk where the one written before it ends (HDF5 puts each at the
    end of the file) instead of reading HDF5's chunk index back whole (0.35-0.6 s for the
    standard file); the places agree with HDF5's, over many chunks and tasks in both ways of
    compressing. A place that a check finds wrong has the index read back, the same table: each
    dataset's first places asked off by a byte, or one size in the middle of a task off by one
    (every later place off: the last chunk's check sees it, where a sum of sizes ends)."""
    from dobutsu_tb.tablebase import chunk_kernels
    from dobutsu_tb.tablebase.chunks import hdf5_chunk_table
    from dobutsu_tb.tablebase.game.game import game_of

    keys, values = truth(lion_chick_tb.path)
    with TablebaseFile(lion_chick_tb.path) as f:
        meta = f.metadata
    records = pack_records(keys, values, game_of(meta.variant).layout["KEY_SHIFT"])
    monkeypatch.setattr(writer.config, "KEY_CHUNK", 64)  # many chunks, several tasks
    monkeypatch.setattr(writer.config, "VALUE_CHUNK", 128)
    monkeypatch.setattr(writer, "_TASK_CHUNKS", 4)
    monkeypatch.setattr(writer, "_NATIVE_TASK_CHUNKS", 8)
    read_back = []
    monkeypatch.setattr(writer, "hdf5_chunk_table", lambda dset: read_back.append(1) or hdf5_chunk_table(dset))
    offset, placed = writer._ChunkWriter._offset, writer._ChunkWriter.chunk_table

    def one_size_wrong(self, dsets):  # (a chunk in the middle of a task one byte longer than written)
        sizes = self.writes[len(self.writes) // 2][2]
        sizes[sizes.shape[0] // 2] += 1
        return placed(self, dsets)

    for native, wrong in ((True, ""), (False, ""), (True, "place"), (False, "size")):
        monkeypatch.setattr(chunk_kernels, "AVAILABLE", native)
        monkeypatch.setattr(writer._ChunkWriter, "_offset",
                            staticmethod(lambda d, c: offset(d, c) + (wrong == "place")))
        monkeypatch.setattr(writer._ChunkWriter, "chunk_table", one_size_wrong if wrong == "size" else placed)
        read_back.clear()
        path = writer.write_tablebase(tmp_path / f"{native}-{wrong}.h5", records, meta)
        assert bool(read_back) == bool(wrong)
        with h5py.File(path, "r") as f:
            assert f["keys"].shape[0] > 8 * f["keys"].chunks[0]
            own = np.concatenate([hdf5_chunk_table(f["keys"]), hdf5_chunk_table(f["values"])])
            assert (own[:, 0] > 0).all()
            assert np.array_equal(f["chunk_table"][()][:, :2], own[:, :2])


def test_record_checks_agree_with_numpy():
    """The writer's compiled counts and order check (every thread, no temporaries) against numpy:
    counts against ``np.bincount``; a descent or a tie is found wherever it lies, at the border
    between two threads' parts included; a byte LONG only in a file of two-byte values."""
    rng = np.random.default_rng(7)
    codes = np.unique(rng.integers(1, 1 << 40, 5000)).astype(np.uint64)
    values = rng.integers(0, 60, codes.shape[0]).astype(np.uint64)
    records = (codes << np.uint64(8)) | values
    counts = writer.value_counts_of(records)
    assert counts.shape == (256,)
    assert np.array_equal(counts, np.bincount(values.astype(np.int64), minlength=256))
    writer.check_records(records, counts)  # ascending, values in range: no error
    long = records.copy()
    long[-1] |= np.uint64(255)  # 255 is LONG, the analysis's mark of a DTM that needs two bytes
    with pytest.raises(ValueError, match=r"value byte is out of range \(above 254"):
        writer.check_records(long, writer.value_counts_of(long))
    writer.check_records(long, writer.value_counts_of(long), wide=True)
    n = records.shape[0]
    for at in (1, n // 2, n // 2 + 1, n - 1):  # n // 2: where the second of two threads starts
        for fault in ("descent", "tie"):
            bad = records.copy()
            bad[at] = bad[at - 1] - np.uint64(256) if fault == "descent" else bad[at - 1] + np.uint64(1)
            with pytest.raises(ValueError, match="keys must be strictly ascending"):
                writer.check_records(bad, counts)
