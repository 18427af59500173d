import contextlib
import os
import random
import sys

import pytest

#: The tests compile their kernels into a cache folder of their own, never the user's: numba
#: keeps every signature of a function in one index, so a generic kernel compiled with a test's
#: types would list them where the command line looks (encoding/jit.py). Set before anything
#: imports numba; child processes of the tests inherit it.
TEST_CACHE = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".cache")
os.environ["DOBUTSU_TB_CACHE"] = TEST_CACHE

sys.path.insert(0, os.path.dirname(__file__))

#: The tests run as at a terminal, whatever started them: a run in the background of a shell
#: inherits SIGINT ignored, one under nohup SIGHUP, and the command line (like any program) keeps
#: an ignored signal ignored, so the tests that stop builds by these signals would see nothing.
#: Child processes inherit the default actions. (Tests of ignored signals set them themselves.)
import signal  # noqa: E402

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)

import naive  # noqa: E402
from dobutsu_tb.tablebase.game.position import Position  # noqa: E402
from dobutsu_tb.tablebase.game.variant import get_variant, shipped_variants  # noqa: E402

#: The test files that build on the shapes ``prewarm.py`` compiles (its comments say which): a
#: run that selects none of them starts no background compiling.
PREWARMED_FILES = {"test_build_safety.py", "test_cluster.py", "test_encoding.py", "test_export.py",
                   "test_out_of_core.py", "test_rules.py", "test_variants.py"}
#: The test files a run must select to start the background compiling (a whole run has 25).
PREWARM_MIN_FILES = 10
_prewarm = []  # (the background process, its temporary folder)


def pytest_collection_finish(session):
    """In a run of most of the suite (:data:`PREWARM_MIN_FILES` test files or more, one of
    :data:`PREWARMED_FILES` among them), compile the other board shapes' kernels in the
    background, at the lowest priority, while the first tests run (tests/prewarm.py). Not with
    ``DOBUTSU_TB_PREWARM=0``, numba's JIT off, ``--collect-only``, or in a pytest-xdist worker."""
    import subprocess
    import tempfile

    import numba

    files = {item.path.name for item in session.items}
    if (os.environ.get("DOBUTSU_TB_PREWARM") == "0" or numba.config.DISABLE_JIT or session.config.option.collectonly
            or os.environ.get("PYTEST_XDIST_WORKER") or len(files) < PREWARM_MIN_FILES
            or not files & PREWARMED_FILES):
        return
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prewarm.py")
    # (its temporary files, and its children's, in a folder of its own: removed at the end even
    # when the process was killed, which runs no clean-up)
    work = tempfile.mkdtemp(prefix="dobutsu-tb-prewarm-")
    child = subprocess.Popen([sys.executable, script, str(os.getpid()), work], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                             env={**os.environ, "TMPDIR": work})
    _prewarm.append((child, work))


@contextlib.contextmanager
def prewarm_held(timeout: float = 900.0):
    """Hold the background compiling between two of its steps for the ``with`` block, once the
    step it is in has ended (killing it after ``timeout`` seconds): for a test that looks at every
    file of the tests' kernel cache, which the background process writes (tests/prewarm.py, ``hold``)."""
    import time

    from prewarm import HELD, HOLD

    for _, work in _prewarm:
        open(os.path.join(work, HOLD), "w").close()
    try:
        deadline = time.monotonic() + timeout
        for child, work in _prewarm:
            while child.poll() is None and not os.path.exists(os.path.join(work, HELD)):
                if time.monotonic() > deadline:
                    _stop(child)
                    break
                time.sleep(0.2)
        yield
    finally:
        for child, work in _prewarm:
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(work, HOLD))
            while child.poll() is None and os.path.exists(os.path.join(work, HELD)):  # (until it goes on)
                time.sleep(0.05)


def _stop(child) -> None:
    """Kill the background process and its children (it leads their process group)."""
    from dobutsu_tb.tablebase.precompile import _kill_group

    _kill_group(child)
    child.wait()


def pytest_sessionfinish(session):
    """Stop the background compiling if it has not ended; remove its temporary folder."""
    import shutil

    for child, work in _prewarm:
        _stop(child)
        shutil.rmtree(work, ignore_errors=True)
    _prewarm.clear()


DATA = os.path.join(os.path.dirname(__file__), "data")
LION_CHICK = "S/-l-/-c-/-C-/-L-/-"
#: The shipped variants' names, for tests run on each.
VARIANTS = list(shipped_variants())


def with_rules(kernels, rules):
    """The kernels of a namespace (``Game.kernels``, ``Game.jitted()``) with the rules array given
    as their first argument where they take one: ``with_rules(g.kernels, g.rules).classify(b, h)``."""
    import functools
    import types

    out = {}
    for name, kernel in vars(kernels).items():
        code = getattr(kernel, "py_func", kernel).__code__
        out[name] = functools.partial(kernel, rules) if code.co_varnames[:1] == ("rules",) else kernel
    return types.SimpleNamespace(**out)


def jitted(game):
    """``game``'s jitted kernels with its rules array bound (:func:`with_rules`)."""
    return with_rules(game.jitted(), game.rules_array)


def plain(game):
    """``game``'s plain kernels with its rules bound (:func:`with_rules`)."""
    return with_rules(game.kernels, game.rules)


def random_positions(n, seed=0, material=None, variant="dobutsu"):
    """n random legal positions of a variant as (Position, NaivePosition) pairs."""
    rng = random.Random(seed)
    game = naive.load_game(variant)
    v = get_variant(variant)
    out = []
    while len(out) < n:
        npos = naive.random_position(rng, game, material)
        out.append((Position.from_text(npos.text(), v), npos))
    return out


def reseal(f):
    """Recompute the CRC-32s of /index, /chunk_table and the metadata of an open h5py file, as a
    forger would after editing it (so that a test reaches the check behind the checksums)."""
    import zlib

    import numpy as np

    from dobutsu_tb.tablebase.schema import metadata_crc32

    def plain(value):
        if isinstance(value, bytes):
            return value.decode()
        if isinstance(value, np.integer):
            return int(value)
        return float(value) if isinstance(value, np.floating) else value

    f.attrs["index_crc32"] = np.int64(zlib.crc32(f["index"][()].tobytes()))
    f.attrs["chunk_table_crc32"] = np.int64(zlib.crc32(f["chunk_table"][()].tobytes()))
    f.attrs["metadata_crc32"] = np.int64(metadata_crc32({k: plain(v) for k, v in f.attrs.items()}))


def reseal_chunks(f):
    """:func:`reseal`, after making /chunk_table again from HDF5's chunk index, the place CRCs of
    format version 4 included: as a forger would after rewriting chunks through HDF5."""
    import numpy as np

    from dobutsu_tb.tablebase.chunks import hdf5_chunk_table, place_crc

    table = np.concatenate([hdf5_chunk_table(f["keys"]), hdf5_chunk_table(f["values"])])
    with open(f.filename, "rb") as raw:
        data = raw.read()
    table[:, 2] = [place_crc(r, data[offset:offset + size]) for r, (offset, size) in enumerate(table[:, :2].tolist())]
    del f["chunk_table"]
    f.create_dataset("chunk_table", data=np.ascontiguousarray(table).astype("<i8"))
    reseal(f)


@pytest.fixture(scope="session")
def cli():
    """Run ``dobutsu-tb`` in-process: ``cli("probe", POSITION, "--tb", path)`` returns click's
    result (exit_code, output with stderr mixed in); exceptions other than the CLI's own exits
    propagate, so a traceback fails the test."""
    from click.testing import CliRunner

    from dobutsu_tb.analysis.cli import main

    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(main, [str(a) for a in args], catch_exceptions=False)

    return invoke


@pytest.fixture(scope="session")
def cli_split(cli):
    """As :func:`cli`, but ``cli_split(*args)`` gives (exit code, stdout, stderr) apart."""

    def invoke(*args):
        result = cli(*args)
        return result.exit_code, result.stdout, result.stderr

    return invoke


@pytest.fixture(scope="session")
def lion_chick_tb(tmp_path_factory):
    """The lion-and-chick tablebase (docs/rules.md §9), built once per test session."""
    from dobutsu_tb.tablebase.build import build_tablebase

    path = tmp_path_factory.mktemp("tb") / "lion-chick.h5"
    return build_tablebase(path, LION_CHICK, progress=False)


#: The lion-and-chick start of the 5x3 board (dobutsu-5x3): Gote wins in 20 plies.
LION_CHICK_5X3 = "S/-l-/-c-/---/-C-/-L-/-"


@pytest.fixture(scope="session")
def lion_chick_5x3_tb(tmp_path_factory):
    """The lion-and-chick tablebase of the 5x3 board (43,710 stored positions), built once per session."""
    from dobutsu_tb.tablebase.build import build_tablebase

    path = tmp_path_factory.mktemp("tb") / "lion-chick-5x3.h5"
    return build_tablebase(path, LION_CHICK_5X3, progress=False, variant=get_variant("dobutsu-5x3"))


#: The lion-and-chick start of the 4x4 board (dobutsu-4x4): Sente wins in 9 plies.
LION_CHICK_4X4 = "S/--l-/--c-/-C--/-L--/-"


@pytest.fixture(scope="session")
def lion_chick_4x4_tb(tmp_path_factory):
    """The lion-and-chick tablebase of the 4x4 board (52,803 stored positions: squares beyond the
    board word), built once per session."""
    from dobutsu_tb.tablebase.build import build_tablebase

    path = tmp_path_factory.mktemp("tb") / "lion-chick-4x4.h5"
    return build_tablebase(path, LION_CHICK_4X4, progress=False, variant=get_variant("dobutsu-4x4"))


@pytest.fixture(scope="session")
def tiny_3x3_tb(tmp_path_factory):
    """The whole tablebase of the tiny variant dobutsu-3x3, built once per session."""
    from dobutsu_tb.tablebase.build import build_tablebase

    path = tmp_path_factory.mktemp("tb") / "tiny-3x3.h5"
    return build_tablebase(path, None, progress=False, variant=get_variant("dobutsu-3x3"))


def _serve(path):
    """``dobutsu-tb serve`` on ``path``, on a free port of 127.0.0.1, in a child process; yields the
    page's address (``http://127.0.0.1:PORT/``) and stops the server afterwards."""
    import re
    import subprocess

    proc = subprocess.Popen([sys.executable, "-m", "dobutsu_tb.analysis.cli", "serve", "--tb", str(path),
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+/", first)
        if found is None:
            proc.kill()
            pytest.fail(f"dobutsu-tb serve did not start: {first}{proc.stderr.read()}")
        yield found.group(0)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="session")
def web_server(lion_chick_tb):
    """``dobutsu-tb serve`` on the lion-and-chick tablebase for the session; yields the page's address."""
    yield from _serve(lion_chick_tb.path)


@pytest.fixture(scope="session")
def web_server_5x3(lion_chick_5x3_tb):
    """``dobutsu-tb serve`` on the 5x3 lion-and-chick tablebase for the session; yields the page's address."""
    yield from _serve(lion_chick_5x3_tb.path)


@pytest.fixture(scope="session")
def web_server_4x4(lion_chick_4x4_tb):
    """``dobutsu-tb serve`` on the 4x4 lion-and-chick tablebase for the session; yields the page's address."""
    yield from _serve(lion_chick_4x4_tb.path)


@pytest.fixture(scope="session")
def web_server_3x3(tiny_3x3_tb):
    """``dobutsu-tb serve`` on the dobutsu-3x3 tablebase for the session; yields the page's address."""
    yield from _serve(tiny_3x3_tb.path)
