"""The kernel cache (encoding/jit.py) cannot break a command: the tests compile into a folder of
their own, an index written for another program's types is a plain miss, and a damaged index or
entry is compiled again with one warning line, never a traceback."""

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import TEST_CACHE

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"

#: Every puzzle command (and each engine of Room Sweeper), with a line its output must hold.
PUZZLE_COMMANDS = [
    (["lastone", DATA / "lastone" / "t-shape-seed.dat"], "4 jumps"),
    (["lastone", DATA / "lastone" / "cross.txt", "--count"], "jump sequences that solve it:"),
    (["lastone", DATA / "lastone" / "cross.txt", "--fewest-moves"], "5 moves"),
    (["tankchange", "--count"], "fewest moves: 18"),
    (["othello", "--count"], "fewest placements: 9"),
    (["othello", "--check", "c4 c3 c2 b4 a5 f4 g4 c5 d6"], "9 placements, legal"),
    (["squares", DATA / "squares" / "seed.txt"], "3 solutions"),
    (["sweep", DATA / "sweep" / "tiny.txt", "--engine", "search"], "found without meetings"),
    (["sweep", DATA / "sweep" / "meeting-5x5.txt"], "found with meetings"),
    (["sweep", DATA / "sweep" / "short-budget.txt", "--engine", "sat"], "No solution"),
    (["sweep", DATA / "sweep" / "sweepoptimizer" / "q64.txt", "--check", DATA / "sweep" / "q64-routes.txt"],
     "valid: the routes leave the room clean"),
]


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "dobutsu_tb.analysis.cli", *map(str, args)], capture_output=True,
                          text=True, check=False, timeout=600, env=env, cwd=ROOT)


def test_the_tests_have_a_cache_of_their_own():
    from dobutsu_tb.encoding.jit import cache_root

    assert cache_root() == TEST_CACHE == os.environ["DOBUTSU_TB_CACHE"]


def test_the_search_tests_then_every_puzzle_command_in_one_cache():
    """The issue's failure: after the search tests, ``puzzle squares`` died with
    ``ModuleNotFoundError: No module named 'test_search'`` (a generic kernel's index listed the
    tests' types). The search tests run first, in a process of their own, into the tests' cache;
    then every puzzle command runs against the same folder."""
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                          str(ROOT / "tests" / "test_search.py")], capture_output=True, text=True, check=False,
                         timeout=900, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    # The situation of the issue holds: an index of the tests' cache names the tests' module.
    indexes = list(Path(TEST_CACHE).glob("numba-*/search_*/dfs.never_dead-*.nbi"))
    assert any(b"test_search" in path.read_bytes() for path in indexes), indexes
    for args, expected in PUZZLE_COMMANDS:
        result = _cli("puzzle", *args)
        shown = f"puzzle {' '.join(map(str, args))}: exit {result.returncode}\n{result.stdout[-1500:]}\n{result.stderr}"
        assert result.returncode == 0 and "Traceback" not in result.stderr, shown
        assert not result.stderr.strip(), shown  # not even a warning: another program's index is a plain miss
        assert any(line.strip().startswith(expected) for line in result.stdout.splitlines()), shown


KERNEL = textwrap.dedent("""
    from dobutsu_tb.encoding.jit import njit

    @njit
    def twice(x):
        return 2 * x
""")


@pytest.fixture
def tiny_kernel(tmp_path):
    """A one-kernel module in a folder of its own and a cache folder of its own; ``run()`` calls
    the kernel in a new process and returns (stdout, stderr lines); ``files(suffix)`` lists the
    cache's files of that kernel."""
    (tmp_path / "kern.py").write_text(KERNEL)
    env = {**os.environ, "DOBUTSU_TB_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(tmp_path)}

    def run():
        proc = subprocess.run([sys.executable, "-c", "import kern; print(kern.twice(21))"], capture_output=True,
                              text=True, check=False, timeout=300, env=env, cwd=tmp_path)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        return proc.stdout.strip(), proc.stderr.splitlines()

    def files(suffix):
        found = sorted((tmp_path / "cache").glob(f"numba-*/*/kern.twice-*{suffix}"))
        assert found, list((tmp_path / "cache").rglob("*"))
        return found

    return run, files


def test_a_damaged_cache_entry_is_compiled_again_with_one_warning(tiny_kernel, tmp_path):
    run, files = tiny_kernel
    assert run() == ("42", [])
    assert run() == ("42", [])  # from the cache
    for damage in (lambda p: p.write_bytes(b"garbage"), lambda p: p.write_bytes(b""),
                   lambda p: p.write_bytes(p.read_bytes()[:40])):
        for suffix in (".nbi", ".nbc"):
            for path in files(suffix):
                damage(path)
            out, err = run()
            assert out == "42" and len(err) == 1, err
            assert err[0].startswith(f"warning: the kernel cache in {tmp_path / 'cache'}") \
                and err[0].endswith("compiling again"), err
            assert run() == ("42", [])  # compiled again and saved: the next run loads it


def test_a_cache_folder_that_cannot_be_made_is_named_and_nothing_is_cached_elsewhere(tmp_path):
    """``DOBUTSU_TB_CACHE`` naming a file: numba's other locators used to cache the kernels beside
    the sources (the module's ``__pycache__``) without a word; now one warning names the folder,
    and the kernel runs uncached."""
    (tmp_path / "kern.py").write_text(KERNEL)
    (tmp_path / "a-file").write_text("")
    env = {**os.environ, "DOBUTSU_TB_CACHE": str(tmp_path / "a-file"), "PYTHONPATH": str(tmp_path)}
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", "import kern; print(kern.twice(21))"], capture_output=True,
                              text=True, check=False, timeout=300, env=env, cwd=tmp_path)
        assert proc.returncode == 0 and proc.stdout.strip() == "42", proc.stderr
        assert proc.stderr.splitlines() == [
            f"warning: the kernel cache folder {tmp_path / 'a-file'} "
            "cannot be written; the kernels are compiled in every run (DOBUTSU_TB_CACHE names another folder)"]
    assert not [p for p in tmp_path.rglob("*") if p.suffix in (".nbi", ".nbc")]


def test_an_index_of_another_programs_types_is_a_plain_miss(tiny_kernel, tmp_path):
    """An index that lists a signature with a class from a module this process cannot import
    (as the search tests leave in a generic kernel's index) is a miss without a word."""
    run, files = tiny_kernel
    assert run() == ("42", [])
    (index,) = files(".nbi")
    folder = tmp_path / "gone"
    folder.mkdir()
    (folder / "gone_module.py").write_text("class Ctx:\n    pass\n")
    sys.path.insert(0, str(folder))
    try:
        import gone_module

        with open(index, "rb") as f:
            version = pickle.load(f)
            stamp, overloads = pickle.loads(f.read())
        overloads[("sig", gone_module.Ctx)] = "kern.twice-2.py311.9.nbc"
        with open(index, "wb") as f:
            pickle.dump(version, f)
            f.write(pickle.dumps((stamp, overloads)))
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("gone_module", None)
    assert b"gone_module" in index.read_bytes()
    assert run() == ("42", [])
    assert b"gone_module" not in index.read_bytes()  # the index was written again without it
    assert run() == ("42", [])


SAVER = textwrap.dedent("""
    import os, sys, time
    from dobutsu_tb.encoding.jit import _TolerantIndex

    folder, who, go = sys.argv[1], sys.argv[2], float(sys.argv[3])
    index = _TolerantIndex(folder, "kern.twice-7.py311", "stamp")
    while time.time() < go:
        pass
    for i in range(40):
        index.save((who, i), f"{who} {i} " * 1000)
""")


def test_two_processes_saving_into_one_index_at_once_lose_and_mix_up_nothing(tmp_path):
    """precompile's two children compile kernels of one board shape into one folder at once.
    numba read an index, named a new entry's data file by the index's length, wrote the index,
    then the data: two processes saving at once lost each other's entries, and could both take
    one data file, so that an index named the other process's code for a signature. Two
    processes save 40 entries each into one index, started together: every entry is there, with
    its own data."""
    import time

    from dobutsu_tb.encoding.jit import _TolerantIndex

    go = str(time.time() + 2)
    savers = [subprocess.Popen([sys.executable, "-c", SAVER, str(tmp_path), who, go], stderr=subprocess.PIPE,
                               text=True, cwd=ROOT) for who in ("A", "B")]
    for saver in savers:
        assert saver.wait(timeout=120) == 0, saver.stderr.read()
    index = _TolerantIndex(str(tmp_path), "kern.twice-7.py311", "stamp")
    for who in ("A", "B"):
        for i in range(40):
            assert index.load((who, i)) == f"{who} {i} " * 1000, (who, i)


PERFT = textwrap.dedent("""
    import sys
    from dobutsu_tb.tablebase.game.game import game_of
    from dobutsu_tb.tablebase.game.position import Position
    from dobutsu_tb.tablebase.game.variant import get_variant

    for name in sys.argv[1:]:
        variant = get_variant(name)
        print(name, game_of(variant).perft(Position.start(variant).state(), 4))
""")


def test_two_shapes_from_caches_filled_by_two_processes(tmp_path):
    """The hostile round's wrong value: a process that used two variants whose kernels two other
    processes had compiled, in the same order, ran the first variant's kernels for the second
    (a cached kernel carries its callees' code under names made of the module, the name and the
    count of kernels compiled before it in the process, the same in both). The kernels of each
    board shape are compiled in a cache of their own; their folders are put together; one process
    uses both."""
    names = ("dobutsu", "dobutsu-5x3")

    def perft(cache, *variants):
        env = {**os.environ, "DOBUTSU_TB_CACHE": str(cache)}
        proc = subprocess.run([sys.executable, "-c", PERFT, *variants], capture_output=True, text=True,
                              check=False, timeout=600, env=env, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr
        return dict(line.split() for line in proc.stdout.splitlines())

    alone = {}
    for name in names:
        alone.update(perft(tmp_path / name, name))
    assert alone == {"dobutsu": "976", "dobutsu-5x3": "517"}
    merged = tmp_path / names[0]
    for folder in (tmp_path / names[1]).glob("numba-*/shape-*"):
        folder.rename(merged / folder.parent.name / folder.name)
    assert len(list(merged.glob("numba-*/shape-*"))) == 2
    assert perft(merged, *names) == alone
    assert perft(merged, *reversed(names)) == alone


def test_a_build_with_the_cache_empty_has_a_child_compile_its_kernels(tmp_path):
    """numba keeps what compiling takes (about 220 MiB for a build's kernels) for the life of the
    process, so a build whose kernels are not cached has a child process compile them
    (tablebase/precompile.py) and loads them from the cache: its own peak is that of a build with
    the cache filled (0.18 GiB for this one; 0.39 GiB when it compiled them itself). The next
    build compiles nothing, and both files hold the same positions and values."""
    from conftest import LION_CHICK
    from dobutsu_tb.tablebase.precompile import BIG_MARK, MARK
    from dobutsu_tb.tablebase.reader import TablebaseFile

    env = {**os.environ, "DOBUTSU_TB_CACHE": str(tmp_path / "cache")}
    runs = [_cli("build", "--start", LION_CHICK, "--out", tmp_path / name, env=env) for name in ("a.h5", "b.h5")]
    for run in runs:
        assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    said = [[line for line in run.stderr.splitlines() if line.startswith("compiling the kernels")] for run in runs]
    assert said == [["compiling the kernels for boards of 3 files x 4 ranks (once per version of the program and "
                     "board shape, up to a minute)"], []]
    [mark] = list((tmp_path / "cache").glob(f"numba-*/shape-3x4/{MARK}"))
    written_after = [p.name for p in (tmp_path / "cache").rglob("*") if p.is_file()
                     and p.stat().st_mtime_ns > mark.stat().st_mtime_ns]
    assert written_after == [], written_after  # the build compiled nothing itself
    # (nor did the children compile the paths of big builds: a plan of one pass of each)
    assert not list((tmp_path / "cache").glob(f"numba-*/shape-3x4/{BIG_MARK}"))
    peaks = [float(line.rsplit("peak memory so far ", 1)[1].split()[0]) for line in runs[0].stderr.splitlines()
             if "peak memory so far" in line]
    assert peaks and max(peaks) < 0.3, runs[0].stderr
    contents = []
    for name in ("a.h5", "b.h5"):
        with TablebaseFile(tmp_path / name) as f:
            keys, values = f.read_all()
            contents.append((keys.tolist(), values.tolist()))
    assert contents[0] == contents[1] and len(contents[0][0]) == 11_711


def test_only_a_big_plan_has_the_children_compile_the_paths_of_big_builds(tmp_path):
    """The standard game's plan with memory to spare takes none of the paths of big builds (its
    first build compiles about 5 s sooner); within 1 GiB it counts the terminal positions in
    partitions, and the 5x3 game's tables pass 2 GiB: both have the children compile those paths
    (precompile.BIG_MARK), so that nothing compiles beside their tables at their peak."""
    from dobutsu_tb.tablebase import memory
    from dobutsu_tb.tablebase.precompile import big_build

    standard = memory.make_plan(memory.Sizes(44, 19), 99_485_568, 147_317_599, None, tmp_path)
    tight = memory.make_plan(memory.Sizes(44, 19), 99_485_568, 147_317_599, 1 << 30, tmp_path)
    five_by_three = memory.make_plan(memory.Sizes(47, 16), 1_441_956_293, 1_917_954_233, None, tmp_path)
    assert standard.terminal_parts == 1 and not standard.spill and not big_build(standard)
    assert tight.terminal_parts > 1 and big_build(tight)
    assert big_build(five_by_three)


def test_a_start_of_unknown_counts_asks_for_the_big_paths_by_its_estimate(tmp_path):
    """A start whose counts nobody knows is planned for its start alone, a plan that takes no big
    path: its estimate decides instead. dobutsu-nodrops within 330 MiB doubled its terminal
    partitions and compiled six kernels mid-build (7.2 s, 248 MB against 1.5 s, 205 MB) when the
    plan alone decided; the lion-and-chick ending, estimated at 321 MiB, stays small."""
    from conftest import LION_CHICK
    from dobutsu_tb.encoding import config
    from dobutsu_tb.tablebase import memory
    from dobutsu_tb.tablebase.game.game import game_of
    from dobutsu_tb.tablebase.game.position import Position
    from dobutsu_tb.tablebase.game.variant import get_variant
    from dobutsu_tb.tablebase.precompile import big_build

    def big(variant_name, start, budget):
        variant = get_variant(variant_name)
        layout = game_of(variant).layout
        sizes = memory.Sizes(layout["MAX_KEY_BITS"], layout["KEY_SHIFT"])
        position = Position.from_text(start, variant) if start else Position.start(variant)
        plan = memory.make_plan(sizes, config.DEFAULT_EXPECTED, config.DEFAULT_EXPECTED, budget, tmp_path,
                                known=False)
        assert not big_build(plan)  # (the plan alone never says so)
        return big_build(plan, memory.estimate_build(sizes, variant, position))

    assert big("dobutsu-nodrops", None, 330 << 20)
    assert not big("dobutsu-nodrops", None, None) and not big("dobutsu-nodrops", None, 23 << 30)
    assert not big("dobutsu", LION_CHICK, 330 << 20) and not big("dobutsu-3x3", None, None)
    assert big("dobutsu-6x3", None, None)  # (its estimate passes 2 GiB: tables grouped by region)


def test_a_failed_or_interrupted_precompile_leaves_the_build_to_compile(monkeypatch, tmp_path):
    """A child that fails says why in one line and the build compiles its kernels itself; an
    interrupt while the child runs kills it and goes on up."""
    import time

    from dobutsu_tb.tablebase import precompile
    from dobutsu_tb.tablebase.game.game import game_of
    from dobutsu_tb.tablebase.game.variant import standard_variant

    game = game_of(standard_variant())
    monkeypatch.setattr(precompile, "kernels_cached", lambda g, dense="", big=False: False)
    monkeypatch.setattr(precompile, "_folder", lambda g: str(tmp_path / "shape"))  # (not the current folder)
    failing = [sys.executable, "-c", "import sys; sys.stdin.read(); sys.exit('no compiler here')"]
    monkeypatch.setattr(precompile, "_child_command", lambda work, part: failing)
    said = []
    assert precompile.compile_kernels(game, said.append) is False
    assert said[0].startswith("compiling the kernels for boards of 3 files x 4 ranks")
    assert said[1] == ("warning: compiling the kernels in a child process failed (exit code 1: no compiler here); "
                       "compiling them in this one")

    monkeypatch.setattr(precompile, "_child_command",
                        lambda work, part: [sys.executable, "-c", "import time; time.sleep(60)"])

    class Stop(Exception):
        pass

    def check():
        raise Stop

    t = time.monotonic()
    with pytest.raises(Stop):
        precompile.compile_kernels(game, None, check)
    assert time.monotonic() - t < 10



GRANDPARENT = textwrap.dedent("""
    import subprocess, sys, time
    sys.stdin.read()
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    open(sys.argv[1], "w").write(str(grandchild.pid))
    time.sleep(60)
""")


def test_an_interrupt_kills_the_children_and_theirs(monkeypatch, tmp_path):
    """The children run in sessions of their own, killed whole: the analysis child's child (the
    enumeration without the JIT) outlived a build stopped by SIGTERM, and a Ctrl-C reached the
    children before the parent, which then warned that they had failed before it stopped (the
    hostile check of the two children)."""
    import time

    from dobutsu_tb.tablebase import precompile
    from dobutsu_tb.tablebase.game.game import game_of
    from dobutsu_tb.tablebase.game.variant import standard_variant

    monkeypatch.setattr(precompile, "kernels_cached", lambda g, dense="", big=False: False)
    monkeypatch.setattr(precompile, "_folder", lambda g: str(tmp_path / "shape"))  # (not the current folder)
    monkeypatch.setattr(precompile, "_child_command",
                        lambda work, part: [sys.executable, "-c", GRANDPARENT, str(tmp_path / part)])

    class Stop(Exception):
        pass

    def check():
        if all((tmp_path / part).exists() and (tmp_path / part).read_text() for part in precompile.PARTS):
            raise Stop

    with pytest.raises(Stop):
        precompile.compile_kernels(game_of(standard_variant()), None, check)
    for part in precompile.PARTS:
        pid = int((tmp_path / part).read_text())
        for _ in range(50):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"the grandchild {pid} of the {part} child is still running")


KILLED_PARENT = textwrap.dedent("""
    import os, subprocess, sys, time
    from dobutsu_tb.tablebase import precompile
    gone = subprocess.run(precompile._python_command("_die_with_parent", "1"))  # (its parent is not PID 1)
    assert gone.returncode == 1
    command = precompile._python_command("_die_with_parent", str(os.getpid()))  # (a child as the build starts it)
    command[2] += "; print(flush=True); import time; time.sleep(60)"
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    child.stdout.readline()  # (armed)
    print(child.pid, flush=True)
    time.sleep(60)
""")


def _state(pid: int) -> str:
    """A process's state letter (Z: a zombie, not reaped yet), or '' if it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_parent_killed_by_sigkill_takes_its_children_and_leaves_no_folder(monkeypatch, tmp_path):
    """A build killed by SIGKILL (no handler runs) left its two compiling children running for half
    a minute, held by no one, and their work folder behind (the hostile check of 2026-12-08): the
    children (started as the build starts them) now die with their parent, and the next compile
    removes the work folders whose lock no process holds and whose process id no longer runs, and
    no other."""
    import fcntl
    import signal
    import time

    from dobutsu_tb.tablebase import output, precompile

    parent = subprocess.Popen([sys.executable, "-c", KILLED_PARENT], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(parent.stdout.readline())
        assert _state(pid) not in ("", "Z")
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        parent.stdout.close()
    for _ in range(50):
        if _state(pid) in ("", "Z"):
            break
        time.sleep(0.1)
    else:
        if "time.sleep(60)" in Path(f"/proc/{pid}/cmdline").read_text():
            os.kill(pid, signal.SIGKILL)
        pytest.fail("the child outlived its parent killed by SIGKILL")

    monkeypatch.setattr(precompile.tempfile, "tempdir", str(tmp_path))
    nobody = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # (no process has this id)
    folders = {name: tmp_path / f"dobutsu-tb-precompile-{pid}-{name}" for name, pid in
               (("gone", nobody), ("held", nobody), ("alive", os.getpid()), ("unlocked", nobody))}
    folders["other"] = tmp_path / "dobutsu-tb-precompile-xyz"
    for name, folder in folders.items():
        (folder / "analysis").mkdir(parents=True)
        if name != "unlocked":
            (folder / output.WORK_LOCK).touch()
    held = os.open(folders["held"] / output.WORK_LOCK, os.O_RDWR)  # (its process in another PID namespace, say)
    fcntl.flock(held, fcntl.LOCK_EX)
    stuck = tmp_path / f"dobutsu-tb-precompile-{nobody}-stuck"  # (an orphan that cannot be removed whole)
    (stuck / "analysis").mkdir(parents=True)
    (stuck / output.WORK_LOCK).touch()
    rmtree = output.shutil.rmtree
    monkeypatch.setattr(output.shutil, "rmtree",
                        lambda path, **kw: None if Path(path).parent == stuck else rmtree(path, **kw))
    try:
        precompile._remove_orphans()
    finally:
        os.close(held)
    assert [name for name, folder in folders.items() if not folder.exists()] == ["gone"]
    assert sorted(p.name for p in stuck.iterdir()) == [output.WORK_LOCK, "analysis"]  # (to try again)
    monkeypatch.setattr(output.shutil, "rmtree", rmtree)
    precompile._remove_orphans()
    assert not stuck.exists()


def test_no_room_for_the_mark_leaves_the_build_to_compile(monkeypatch, tmp_path):
    """A cache folder out of inodes: the mark could not be made, and every build stopped with
    ``error: ...compiled-by-precompile: No space left on device``."""
    import errno

    from dobutsu_tb.tablebase import precompile
    from dobutsu_tb.tablebase.game.game import game_of
    from dobutsu_tb.tablebase.game.variant import standard_variant

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setattr(precompile, "kernels_cached", lambda g, dense="", big=False: False)
    monkeypatch.setattr(precompile, "_folder", lambda g: str(tmp_path / "shape"))  # (not the current folder)
    monkeypatch.setattr(precompile, "_child_command",
                        lambda work, part: [sys.executable, "-c", "import sys; sys.stdin.read()"])
    monkeypatch.setattr(precompile.Path, "touch", full)
    assert precompile.compile_kernels(game_of(standard_variant())) is False


def test_the_child_compiles_the_kernels_of_wide_keys_with_two_byte_values(monkeypatch, tmp_path):
    """Its tiny build with two-byte values works for keys of more than 48 bits (a record keeps the
    byte LONG, the values go in a list of their own): the child once failed on it for every such
    variant ('keys must be strictly ascending', or 'the start position ... is not stored' for the
    shipped dobutsu-6x3 and dobutsu-4x4), with a warning at each of their builds and the kernels
    compiled in the build's process."""
    from dobutsu_tb.tablebase import precompile
    from dobutsu_tb.tablebase.game.game import game_of
    from dobutsu_tb.tablebase.game.variant import parse_variant

    pieces = [{"letter": "L", "name": "lion", "royal": True, "steps": ["f", "b", "l", "r", "fl", "fr", "bl", "br"]}]
    pieces += [{"letter": x, "name": n, "steps": []} for x, n in zip("ABCDEF", ["a", "b", "c", "d", "e", "f"])]
    game = game_of(parse_variant({"name": "wide", "files": 3, "ranks": 4, "start": "S/elB/EBC/--L/ceD/-",
                                  "drops": False, "pieces": pieces}))
    assert game.layout["MAX_KEY_BITS"] == 50
    monkeypatch.setattr(precompile, "kernels_cached", lambda g, dense="", big=False: False)
    monkeypatch.setattr(precompile, "_folder", lambda g: str(tmp_path / "shape"))  # (not the current folder)
    said = []
    precompile.compile_kernels(game, said.append, big=True)
    assert len(said) == 1 and said[0].startswith("compiling the kernels for boards of 3 files x 4 ranks"), said

def test_without_the_jit_a_build_runs_as_plain_python(tmp_path):
    """``NUMBA_DISABLE_JIT=1`` (encoding/jit.py: for debugging) ran into numba's intrinsics, which
    work only compiled (the hostile round's traceback): they have plain-Python stand-ins, and the
    file is the compiled build's, value for value."""
    from dobutsu_tb.tablebase.reader import TablebaseFile

    files = []
    for jit, name in (("1", "plain.h5"), ("0", "compiled.h5")):
        env = {**os.environ, "NUMBA_DISABLE_JIT": jit}
        run = _cli("build", "--variant", "dobutsu-3x3", "--out", tmp_path / name, "-q", env=env)
        assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
        assert "Warning" not in run.stderr, run.stderr  # (numpy's overflow warnings of the wrapping arithmetic)
        with TablebaseFile(tmp_path / name) as f:
            keys, values = f.read_all()
            files.append((keys.tolist(), values.tolist()))
    assert files[0] == files[1] and len(files[0][0]) == 1_793


def test_a_kernel_whose_source_changed_while_the_program_ran_is_one_clear_error(tmp_path):
    """The jitted copies are compiled from the kernels' source read again (their reads of the
    rules array rewritten): a source file edited or reinstalled since the program imported it
    (here: a kernel above the one imported, then the file gone) is a SourceChangedError that
    names the file, not a StopIteration from deep inside (a build died so on 2026-12-06), and the
    command line says it in one line."""
    import importlib.util

    from dobutsu_tb.analysis.cli.common import expected_errors
    from dobutsu_tb.encoding import binding

    path = tmp_path / "kernels_that_change.py"
    path.write_text("def kernel(rules, i):\n    return rules[i] + 1\n")
    spec = importlib.util.spec_from_file_location("kernels_that_change", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    code = binding.invariant_code(module.kernel, "rules")
    assert code.co_name == "kernel" and binding.INVARIANT_LOAD in code.co_names
    path.write_text("def other(rules):\n    return rules[0]\n\n\n" + "def kernel(rules, i):\n    return rules[i] + 1\n")
    with pytest.raises(binding.SourceChangedError, match="kernels_that_change.py changed while it ran") as changed:
        binding.invariant_code(module.kernel, "rules")
    assert isinstance(changed.value, expected_errors())
    path.unlink()
    with pytest.raises(binding.SourceChangedError, match="run the command again"):
        binding.invariant_code(module.kernel, "rules")


def test_the_child_compiles_the_growth_of_tables_past_two_billion_slots():
    """A table's growth keeps each old slot's new place in int32 up to 2**31 slots and in int64
    beyond (compact.remap_dtype): the compiling child compiles both, so that a build whose table
    grows past 2**31 slots (an unknown count of some 1.5 billion positions, or a cluster worker's)
    compiles nothing beside its tables at their peak."""
    import numpy as np

    from conftest import LION_CHICK
    from dobutsu_tb.encoding import compact
    from dobutsu_tb.tablebase import enumeration, precompile
    from dobutsu_tb.tablebase.game.position import Position

    precompile._compile_enumeration(Position.from_text(LION_CHICK))
    for kernel, remap in ((compact._rehash, 5), (enumeration._move_tags, 1)):
        remaps = {np.dtype(str(signature[remap].dtype)) for signature in kernel.signatures}
        assert remaps >= {np.dtype(np.int32), np.dtype(np.int64)}, (kernel, kernel.signatures)
    assert compact.remap_dtype(1 << 31) == np.int32 and compact.remap_dtype((1 << 31) + 1) == np.int64
