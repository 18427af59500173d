"""Damaged files give right answers or errors, never wrong answers (issue 9).

The lion-and-chick tablebase is damaged in seeded random ways, in memory: single bytes changed
anywhere in the file (each to a random other value), regions zeroed, the file cut short, bytes
appended. After each damage:

- a fixed sample of stored positions is probed through a lazily opened and an in-memory
  tablebase, and every 10th time through ``dobutsu-tb probe``: each answer must be the true one
  or a :class:`TablebaseFileError` (one ``error:`` line and exit code 1 from the command line);
- ``verify_file`` must fail (raise or report a problem) whenever the damage is *damaging*: when
  HDF5 (h5py) reads the file differently from the pristine one (any dataset's contents, dtype,
  shape, chunking, filters or chunk index entries, any attribute) or cannot read it, or our
  reader refuses something. A damage that is not damaging (free space, padding, bytes past the
  end) must leave every probe right and ``verify`` passing.

The figures (how many changes, how many damaging, how many refused) are printed at the end
(``pytest -s``). A run that hangs in HDF5 (it can loop on some damaged structures) is stopped
by faulthandler after 10 minutes, with the stack.
"""

import faulthandler
import sys

import h5py
import numpy as np

from conftest import LION_CHICK
from dobutsu_tb.analysis.verify import verify_file
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.probe import MissingPositionError, open_tablebase
from dobutsu_tb.tablebase.reader import TablebaseFile
from dobutsu_tb.tablebase.schema import TablebaseFileError
from dobutsu_tb.tablebase.values import decode_value, signed_dtm

SEED = 20261123
FLIPS, ZEROED, TRUNCATED, APPENDED = 520, 80, 40, 5


def hdf5_view(path):
    """What an HDF5 reader gets from the file: every dataset (contents, dtype, shape, chunking,
    filters, chunk index entries) and every attribute; or a string if it cannot read it."""
    try:
        with h5py.File(path, "r") as f:
            view = {}

            def visit(name, obj):
                for key in obj.attrs.keys():
                    view[f"{name}@{key}"] = repr(obj.attrs[key])
                if isinstance(obj, h5py.Dataset):
                    view[name] = (obj[()].tobytes(), obj.dtype.str, obj.shape, obj.chunks, obj.compression,
                                  obj.shuffle, obj.fletcher32)
                    if obj.chunks:
                        rows = []
                        obj.id.chunk_iter(lambda i: rows.append((i.chunk_offset, i.filter_mask, i.byte_offset, i.size)))
                        view[name + "#index"] = rows

            visit("/", f)
            f.visititems(visit)
            return view
    except Exception as exc:  # noqa: BLE001 (any failure to read is a difference)
        return f"unreadable: {type(exc).__name__}"


def damages(size, rng):
    """(kind, function of bytes -> bytes) in a fixed order for a seed."""
    out = []
    for _ in range(FLIPS):
        at, xor = int(rng.integers(size)), int(rng.integers(1, 256))
        out.append((f"byte {at} ^ {xor:#04x}", lambda b, at=at, xor=xor: b[:at] + bytes([b[at] ^ xor]) + b[at + 1:]))
    for _ in range(ZEROED):
        length = int(rng.choice([1, 2, 4, 8, 16, 64, 256, 1024, 4096]))
        at = int(rng.integers(size - length))
        out.append((f"bytes {at}..{at + length - 1} zeroed", lambda b, at=at, n=length: b[:at] + bytes(n) + b[at + n:]))
    for _ in range(TRUNCATED):
        at = int(rng.integers(size))
        out.append((f"cut at {at}", lambda b, at=at: b[:at]))
    for _ in range(APPENDED):
        extra = rng.integers(256, size=int(rng.integers(1, 2000)), dtype=np.uint8).tobytes()
        out.append((f"{len(extra)} bytes appended", lambda b, extra=extra: b + extra))
    return out


def test_damage_gives_right_answers_or_errors_never_wrong(cli, lion_chick_tb, tmp_path):
    pristine = lion_chick_tb.path.read_bytes()
    reference = hdf5_view(lion_chick_tb.path)
    with TablebaseFile(lion_chick_tb.path) as f:
        keys, values = f.read_all()
    rng = np.random.default_rng(SEED)
    sample = np.sort(rng.choice(keys.shape[0], 60, replace=False))
    positions = [Position.from_key(int(k)) for k in keys[sample]]
    want = [(w, signed_dtm(w, d)) for w, d in (decode_value(int(values[i])) for i in sample)]
    want_dtm = np.array([abs(w[1]) for w in want])
    pristine_cli = cli("probe", LION_CHICK, "--tb", lion_chick_tb.path).output
    path = tmp_path / "damaged.h5"
    counts = dict(changes=0, damaging=0, refused_on_open=0, refused_a_probe=0, verify_failed=0, harmless=0,
                  wrong=0)
    faulthandler.dump_traceback_later(600, exit=True)
    try:
        for n, (what, damage) in enumerate(damages(len(pristine), rng)):
            path.write_bytes(damage(pristine))
            counts["changes"] += 1
            refused = False
            for in_memory in (False, True):
                try:
                    tb = open_tablebase(path, in_memory=in_memory)
                except TablebaseFileError:
                    refused = True
                    counts["refused_on_open"] += not in_memory
                    continue
                with tb:
                    for pos, value in zip(positions, want):
                        try:
                            found = tb.value(pos)[:2]
                        except TablebaseFileError:
                            refused = True
                            counts["refused_a_probe"] += 1
                            continue
                        except MissingPositionError:
                            found = None
                        counts["wrong"] += found != value
                        assert found == value, f"{what}: {pos.text()} reads {found}, not {value}"
                    if in_memory:
                        wdl, dtm = tb.probe_many(keys[sample])
                        assert np.array_equal(np.abs(dtm), want_dtm), what
            if n % 10 == 0:
                result = cli("probe", LION_CHICK, "--tb", path)
                assert (result.exit_code, result.output) == (0, pristine_cli) or (
                    result.exit_code == 1 and result.output.startswith("error: ") and result.output.count("\n") == 1
                ), f"{what}: {result.output}"
            try:
                failed = not verify_file(path).ok
            except TablebaseFileError:
                failed = True
            damaging = refused or hdf5_view(path) != reference
            counts["damaging"] += damaging
            counts["verify_failed"] += failed
            counts["harmless"] += not damaging
            assert failed == damaging, f"{what}: verify {'fails' if failed else 'passes'} on a " \
                                       f"{'damaging' if damaging else 'harmless'} change"
    finally:
        faulthandler.cancel_dump_traceback_later()
    print(f"\ncorruption test (seed {SEED}): " + ", ".join(f"{k} {v}" for k, v in counts.items()), file=sys.stderr)
    assert counts["changes"] == FLIPS + ZEROED + TRUNCATED + APPENDED and counts["wrong"] == 0
    assert counts["damaging"] > 0.9 * counts["changes"]  # the sample really exercises the checks
