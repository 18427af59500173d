"""Builds that lose nothing (issue 9): the output is checked before any work, files that are not
tablebases are kept, the umask is honoured, signals stop a build in every phase with nothing
left behind, leftovers of killed builds go, two builds cannot write one file, a full disk is one
error line, and a machine without the memory is told so before the build starts.

Signals and kills are sent from inside a child ``dobutsu-tb build`` at a chosen phase (a hook
wraps the phase's first function), so each phase is hit for certain.
"""

import fcntl
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import LION_CHICK
from dobutsu_tb.tablebase import build as build_module
from dobutsu_tb.tablebase.probe import open_tablebase

# A child `dobutsu-tb build` whose phase argv[1] starts by argv[2]: a signal to itself (SIGINT,
# SIGTERM, SIGKILL), or "pause" (write argv[3], then wait until argv[4] exists).
CHILD = r"""
import os, signal, sys, time
from dobutsu_tb.tablebase import build, probe, retrograde, writer
phase, action = sys.argv[1], sys.argv[2]
hooks = {"enumeration": (build, "enumerate_positions"), "retrograde": (retrograde, "solve"),
         "sort": (build, "record_blocks"), "write": (writer, "_encode_group"), "check": (probe, "open_tablebase")}
module, name = hooks[phase]
original = getattr(module, name)
def hooked(*args, **kwargs):
    if action == "pause":
        open(sys.argv[3], "w").close()
        while not os.path.exists(sys.argv[4]):
            time.sleep(0.05)
    elif not getattr(hooked, "done", False):
        hooked.done = True
        os.kill(os.getpid(), getattr(signal, action))
    return original(*args, **kwargs)
setattr(module, name, hooked)
from dobutsu_tb.analysis.cli import main
main([a for a in sys.argv[5:]], prog_name="dobutsu-tb")
"""


def child(phase, action, out, *extra, wait=True):
    args = [sys.executable, "-c", CHILD, phase, action, *extra] + [""] * (2 - len(extra)) + [
        "build", "--start", LION_CHICK, "--out", str(out), "--quiet"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not wait:
        return proc
    out_text, err_text = proc.communicate(timeout=300)
    return proc.returncode, out_text, err_text


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("phase,sig", [("enumeration", "SIGINT"), ("retrograde", "SIGTERM"), ("sort", "SIGINT"),
                                       ("write", "SIGTERM"), ("check", "SIGINT"), ("enumeration", "SIGHUP"),
                                       ("write", "SIGHUP")])
def test_a_signal_stops_the_build_in_every_phase(tmp_path, phase, sig):
    out = tmp_path / "lc.h5"
    code, stdout, stderr = child(phase, sig, out)
    signum = getattr(signal, sig)
    assert code == 128 + signum, stderr
    assert stdout == ""
    assert stderr == f"error: interrupted by {sig}: the build stopped, {out} was not written\n"
    assert leftovers(tmp_path) == []


def test_a_signal_keeps_the_file_it_would_have_replaced(lion_chick_tb, tmp_path):
    out = tmp_path / "lc.h5"
    out.write_bytes(lion_chick_tb.path.read_bytes())
    code, _, _ = child("write", "SIGTERM", out)
    assert code == 143 and leftovers(tmp_path) == ["lc.h5"]
    assert out.read_bytes() == lion_chick_tb.path.read_bytes()


def test_leftovers_of_a_killed_build_are_removed_by_the_next(cli, tmp_path):
    out = tmp_path / "lc.h5"
    code, _, _ = child("write", "SIGKILL", out)
    assert code == -signal.SIGKILL
    left = leftovers(tmp_path)
    assert ".lc.h5.lock" in left and any(n.startswith(".lc.h5.") and n.endswith(".partial") for n in left)
    (tmp_path / ".other.h5.1234abcd.partial").write_bytes(b"not ours to remove")
    result = cli("build", "--start", LION_CHICK, "--out", out)
    assert result.exit_code == 0, result.output
    assert "removed 1 leftover file of an interrupted build" in result.output
    assert leftovers(tmp_path) == [".other.h5.1234abcd.partial", "lc.h5"]


def test_two_builds_cannot_write_one_file(cli, tmp_path):
    out = tmp_path / "lc.h5"
    paused, go = tmp_path / "paused", tmp_path / "go"
    first = child("enumeration", "pause", out, paused, go, wait=False)
    try:
        deadline = time.monotonic() + 120
        while not paused.exists():
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.05)
        result = cli("build", "--start", LION_CHICK, "--out", out, "-q")
        assert result.exit_code == 1
        assert result.output == (f"error: {out} is being written by another build (process {first.pid}); "
                                 f"wait for it to finish or write elsewhere\n")
    finally:
        go.touch()
        stdout, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr
    assert "win in 15 plies" in stdout
    with open_tablebase(out) as tb:
        assert tb.probe_dtm(LION_CHICK) == 15
    assert leftovers(tmp_path) == ["go", "lc.h5", "paused"]


def test_a_lock_held_elsewhere_is_one_error_line(cli, tmp_path):
    lock = os.open(tmp_path / ".lc.h5.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = cli("build", "--start", LION_CHICK, "--out", tmp_path / "lc.h5", "-q")
    finally:
        os.close(lock)
    assert result.exit_code == 1 and result.output.startswith("error: ") and result.output.count("\n") == 1
    assert "is being written by another build" in result.output
    assert leftovers(tmp_path) == [".lc.h5.lock"]  # the holder's: not ours to remove


def _no_computing(monkeypatch):
    """Make any start of the computation fail the test: the errors below come before it."""
    def refuse(*args, **kwargs):
        raise AssertionError("the build started computing")
    monkeypatch.setattr(build_module, "enumerate_positions", refuse)


def test_an_unwritable_folder_fails_before_computing(cli, tmp_path, monkeypatch):
    _no_computing(monkeypatch)
    if os.geteuid() == 0:  # root writes anywhere but in sysfs
        folder = "/sys"
    else:
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o555)
    result = cli("build", "--start", LION_CHICK, "--out", f"{folder}/lc.h5", "-q")
    assert result.exit_code == 1
    assert result.output.startswith(f"error: cannot write in {folder} (") and result.output.count("\n") == 1
    result = cli("build", "--start", LION_CHICK, "--out", tmp_path / "no" / "such" / "lc.h5", "-q")
    assert result.exit_code == 1 and result.output == f"error: {tmp_path / 'no' / 'such'}: no such folder\n"
    (tmp_path / "a-file").write_text("x")  # a file where the folder should be: said as such
    result = cli("build", "--start", LION_CHICK, "--out", tmp_path / "a-file" / "lc.h5", "-q")
    assert result.exit_code == 1 and result.output == f"error: {tmp_path / 'a-file'}: not a folder\n"


def test_a_file_that_is_not_a_tablebase_is_kept(cli, lion_chick_tb, tmp_path, monkeypatch):
    out = tmp_path / "notes.h5"
    out.write_text("my notes")
    with monkeypatch.context() as m:
        _no_computing(m)
        result = cli("build", "--start", LION_CHICK, "--out", out, "-q")
    assert result.exit_code == 1
    assert result.output == (f"error: {out} exists and is not a dobutsu tablebase: not replacing it "
                             f"(--force replaces it)\n")
    assert out.read_text() == "my notes" and leftovers(tmp_path) == ["notes.h5"]
    assert cli("build", "--start", LION_CHICK, "--out", out, "-q", "--force").exit_code == 0
    with open_tablebase(out) as tb:
        assert tb.probe_dtm(LION_CHICK) == 15
    # A tablebase (even a damaged one) is replaced without --force.
    damaged = tmp_path / "damaged.h5"
    data = bytearray(lion_chick_tb.path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    assert cli("build", "--start", LION_CHICK, "--out", damaged, "-q").exit_code == 0
    assert leftovers(tmp_path) == ["damaged.h5", "notes.h5"]


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002])
def test_the_file_honours_the_umask(cli, tmp_path, umask):
    old = os.umask(umask)
    try:
        assert cli("build", "--start", LION_CHICK, "--out", tmp_path / "lc.h5", "-q").exit_code == 0
    finally:
        os.umask(old)
    assert (tmp_path / "lc.h5").stat().st_mode & 0o777 == 0o666 & ~umask


def test_a_full_disk_is_one_error_line_and_leaves_nothing(tmp_path):
    """Writes beyond a file size limit fail (EFBIG) as on a full disk (ENOSPC), in a child."""
    import resource

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))

    for out in (tmp_path / "lc.h5",):
        proc = subprocess.run([sys.executable, "-m", "dobutsu_tb.analysis.cli", "build", "--start", LION_CHICK,
                               "--out", str(out), "-q"], capture_output=True, text=True, preexec_fn=limit, timeout=300)
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr == (f"error: writing the tablebase into {tmp_path} failed ({os.strerror(27)}); "
                               f"nothing was written\n")
        assert leftovers(tmp_path) == []


def test_too_little_room_for_the_metadata_says_how_much(cli, tmp_path, monkeypatch):
    """The third hostile round: a disk of 64 KiB refused an 8 KiB tablebase as 'No space left on
    device', the writer's 64 KiB set aside for HDF5's metadata unsaid. The error says the bytes
    needed, where, and how many are free."""
    from dobutsu_tb.tablebase import writer

    monkeypatch.setattr(writer, "_free_bytes", lambda path: 40_960)
    result = cli("build", "--start", LION_CHICK, "--out", tmp_path / "lc.h5", "-q")
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert re.fullmatch(rf"error: writing the tablebase into {re.escape(str(tmp_path))} failed \(No space left on "
                        rf"device: the end of the write needs ([0-9,]+) bytes in {re.escape(str(tmp_path))}, where "
                        rf"40,960 are free: ([0-9,]+) for the last data and 65,536 set aside for HDF5's metadata\); "
                        rf"nothing was written\n", result.output), result.output
    assert leftovers(tmp_path) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
@pytest.mark.parametrize("size", ["8k", "16k", "20k", "24k", "88k"])
def test_a_really_full_disk(tmp_path, size):
    """ENOSPC at every stage of the write (the sizes fill the disk at chunks, or leave less room
    than the metadata need: the writer refuses to go on then, since HDF5 writes them from
    destructors and on close, where a failure left it crashing at exit; with the chunk table of
    format 4, 24k did): one error line, nothing left, no crash."""
    folder = tmp_path / "small"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        proc = subprocess.run([sys.executable, "-m", "dobutsu_tb.analysis.cli", "build", "--start", LION_CHICK,
                               "--out", str(folder / "lc.h5"), "-q"], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
        assert "No space left on device" in proc.stderr and "nothing was written" in proc.stderr
        assert leftovers(folder) == []
    finally:
        subprocess.run(["umount", str(folder)])


def test_too_little_memory_is_said_before_the_build(cli, tmp_path, monkeypatch):
    from dobutsu_tb.tablebase import memory

    monkeypatch.setattr(memory, "available_memory", lambda: 100 << 20)
    monkeypatch.setattr(memory, "resident_memory", lambda: 0)
    with monkeypatch.context() as m:
        _no_computing(m)
        result = cli("build", "--out", tmp_path / "full.h5", "-q")
        assert result.exit_code == 1 and result.output.count("\n") == 1
        assert result.output == ("error: the build needs at least 1022 MiB of memory for its 246,803,167 positions: "
                                 "702 MiB for the table of the 99,485,568 non-terminal ones, their values and the "
                                 "analysis's buffers, and 320 MiB for the interpreter and the kernels; but the budget "
                                 "is 100 MiB (MemAvailable in /proc/meminfo); free some memory or raise --max-memory "
                                 "by 922 MiB at least\n")
        result = cli("build", "--out", tmp_path / "full.h5", "-q", "--max-memory", "900M")
        assert result.exit_code == 1 and "but the budget is 900 MiB (--max-memory)" in result.output
        # Within a few MiB of the floor: not 1024 scans of the table for the records. The records
        # share the table with one value byte a slot (the counters' half of the cells given back),
        # so 1 GiB plans 8 ranges; with fewer allowed it is refused in one line. (990 MiB was
        # planned, and the build peaked 19 MiB above it: the analysis's buffers now count.)
        result = cli("build", "--out", tmp_path / "full.h5", "-q", "--max-memory", "990M")
        assert result.exit_code == 1 and "needs at least 1022 MiB" in result.output, result.output
        assert result.output.endswith("raise --max-memory by 32 MiB at least\n"), result.output
        plan = memory.make_plan(memory.Sizes(44, 19), 99_485_568, 147_317_599, 1 << 30, tmp_path)
        assert (plan.terminal_parts, plan.record_passes, plan.table_load) == (8, 8, 0.85)
        m.setattr(memory, "MAX_RECORD_PASSES", 4)
        result = cli("build", "--out", tmp_path / "full.h5", "-q", "--max-memory", "1G")
        assert result.exit_code == 1 and result.output.count("\n") == 1 and \
            "needs about 1,068 MiB of memory for 246,803,167 positions (their sort records in 4 key ranges, each a " \
            "scan of the table), but the budget is 1,024 MiB (--max-memory); free some memory or raise --max-memory " \
            "by 44 MiB at least" in result.output, result.output  # (1.0 GiB both)
        result = cli("build", "--out", tmp_path / "full.h5", "-q", "--max-memory", "lots")
        assert result.exit_code == 2 and "'lots' is not a size like 20G" in result.output
        result = cli("build", "--out", tmp_path / "full.h5", "-q", "--max-memory", "1000T")
        assert result.exit_code == 2 and "'1000T' is more than this machine has" in result.output
        result = cli("build", "--out", tmp_path / "full.h5", "-q", "--max-memory", "1")
        assert result.exit_code == 1 and "but the budget is 1 byte (--max-memory)" in result.output
        result = cli("build", "--out", tmp_path / "full.h5", "-q", "--max-memory", "20G", "--ignore-memory")
        assert result.exit_code == 2 and "--ignore-memory builds without a budget and --max-memory sets one" in \
            result.output
        # A start whose counts nobody knows: the first tables, said to be so.
        result = cli("build", "--start", "S/-l-/-c-/-CE/-L-/-", "--out", tmp_path / "x.h5", "-q", "--max-memory",
                     "1M")
        assert result.exit_code == 1 and "of memory for its first tables: " in result.output and \
            "before their count is known" in result.output, result.output
    assert leftovers(tmp_path) == []
    # As the tables grow (a start whose counts are not known in advance).
    from dobutsu_tb.encoding import compact_layout, config

    monkeypatch.setattr(config, "DEFAULT_EXPECTED", 1024)
    monkeypatch.setattr(compact_layout, "MIN_SLOT_BITS", 14)  # tables that start small and grow
    monkeypatch.setattr(memory, "available_memory", lambda: memory.BASE_MEMORY + 120_000)
    result = cli("build", "--start", LION_CHICK, "--out", tmp_path / "lc.h5", "-q")
    assert result.exit_code == 1 and "error: the enumeration needs more memory than the budget" in result.output, \
        result.output
    assert leftovers(tmp_path) == []
    result = cli("build", "--start", LION_CHICK, "--out", tmp_path / "lc.h5", "-q", "--ignore-memory")
    assert result.exit_code == 0 and leftovers(tmp_path) == ["lc.h5"]


def test_the_memory_estimate_grows_with_the_positions():
    small = build_module.estimate_memory(10_000, 10_000)
    full = build_module.estimate_memory(build_module.STANDARD_NONTERMINAL, build_module.STANDARD_TERMINAL)
    assert build_module.BASE_MEMORY < small < 2 * build_module.BASE_MEMORY
    # The full build's peak is the enumeration: a 2**27-slot table (512 MiB), its tags (128 MiB)
    # and the set of 147 M terminal positions, 2**23 buckets of 64 bytes (512 MiB) and a stash of
    # 2**21 hashes (16 MiB), besides the base.
    assert full == build_module.BASE_MEMORY + (512 + 128) * 2**20 + (512 + 16) * 2**20


def test_the_plan_counts_the_sorts_scratch_of_more_than_two_threads(monkeypatch):
    """BASE_MEMORY holds the radix sort's scratch of two threads; each phase's estimate adds that
    of every thread beyond them (2 MiB each), so a plan on many cores does not go over its budget."""
    from dobutsu_tb.encoding import config
    from dobutsu_tb.encoding.sorting import SCRATCH_BYTES
    from dobutsu_tb.tablebase import memory

    sizes = memory.Sizes(44, 18)
    counts = (build_module.STANDARD_NONTERMINAL, build_module.STANDARD_TERMINAL)
    monkeypatch.setattr(config, "THREADS", 2)
    two = (sizes.enumeration(*counts), sizes.retrograde(counts[0]), sizes.records(counts[0], 3))
    assert memory.sort_scratch() == 0 and SCRATCH_BYTES == 2 << 20
    monkeypatch.setattr(config, "THREADS", 16)
    assert (sizes.enumeration(*counts), sizes.retrograde(counts[0]), sizes.records(counts[0], 3)) == tuple(
        x + 14 * SCRATCH_BYTES for x in two)


def test_parallel_commands_wait_for_the_cached_build(tmp_path):
    """Three ``verify-line`` at once for a start that no tablebase covers yet: the first builds it
    into the cache folder, the other two say they wait for it, then all three use it (the issue:
    two of them failed with 'is being written by another build')."""
    from conftest import TEST_CACHE

    cache = tmp_path / "cache"
    cache.mkdir()
    for kernels in Path(TEST_CACHE).glob("numba-*"):  # the compiled kernels, not the tablebases
        (cache / kernels.name).symlink_to(kernels)
    env = {**os.environ, "DOBUTSU_TB_CACHE": str(cache)}
    start, moves = "S/-lg/-c-/-C-/-L-/-", ["Lb4-c3", "Gc1-c2"]
    paused, go = tmp_path / "paused", tmp_path / "go"
    first = subprocess.Popen([sys.executable, "-c", CHILD, "enumeration", "pause", str(paused), str(go),
                              "verify-line", "--start", start, *moves], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env, cwd=tmp_path)
    others = []
    try:
        deadline = time.monotonic() + 120
        while not paused.exists():
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.05)
        others = [subprocess.Popen([sys.executable, "-m", "dobutsu_tb.analysis.cli", "verify-line", "--start", start,
                                    *moves], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                   cwd=tmp_path) for _ in range(2)]
        said = []
        for proc in others:  # each says it waits, before the build goes on
            line = proc.stderr.readline()
            said.append(line)
            assert line.startswith(f"waiting for process {first.pid}, which is building the tablebase for {start}"), \
                line + proc.stderr.read()
    finally:
        go.touch()
    results = [proc.communicate(timeout=300) + (proc.returncode,) for proc in [first, *others]]
    assert [code for _, _, code in results] == [0, 0, 0], results
    assert len({out for out, _, _ in results}) == 1 and "Lb4-c3" in results[0][0]
    assert results[0][1].startswith("building the tablebase for")
    assert [err for _, err, _ in results[1:]] == ["", ""]  # nothing more than the line read above
    assert len(list((cache / "tablebases").glob("*.h5"))) == 1


@pytest.mark.parametrize("text, size", [("20G", 20 << 30), ("1gb", 1 << 30), ("1GiB", 1 << 30), ("512mb", 512 << 20),
                                        ("1.5gib", 3 << 29), (" 2 T ", 2 << 40), ("1000000", 10**6), ("100B", 100),
                                        ("1P", 1 << 50)])
def test_a_memory_size_in_any_common_spelling(text, size):
    from dobutsu_tb.tablebase.memory import parse_size

    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["lots", "", "0", "-1G", "nan", "inf", "1ib", "1gbb", "1.2.3G", "gb", "1 0G", "0.5",
                                  "0.4B", "1e-300G"])
def test_a_memory_size_that_is_not_one(text):
    from dobutsu_tb.tablebase.memory import parse_size

    with pytest.raises(ValueError, match="is not a size like 20G"):
        parse_size(text)


def test_a_named_pipe_is_neither_read_nor_written(cli, tmp_path):
    """The hostile round: a named pipe given as ``--tb`` or ``--out`` blocked for ever (opening it
    waits for the other end). Reading refuses it at once; a build refuses it, --force or not, as
    it refuses every file that is not a regular one (``--out /dev/null --force`` run as root would
    have replaced the device)."""
    fifo = tmp_path / "pipe.h5"
    os.mkfifo(fifo)
    for command in (("probe", LION_CHICK, "--tb", fifo), ("stats", "--tb", fifo)):
        result = cli(*command)
        assert result.exit_code == 1 and result.output == (
            f"error: {fifo}: not a regular file (a named pipe, a device or a socket)\n")
    for force in ((), ("--force",)):
        result = cli("build", "--variant", "dobutsu-3x3", "-q", "--out", fifo, *force)
        assert result.exit_code == 1 and result.output == (
            f"error: {fifo} is not a regular file (a named pipe, a device or a socket): not writing there; name "
            f"another file\n")
    assert fifo.is_fifo()
    # /dev/stdout when it is a pipe: a link to a pipe with no name (it said "cannot write in /proc/N/fd")
    run = subprocess.run([sys.executable, "-m", "dobutsu_tb.analysis.cli", "build", "--variant", "dobutsu-3x3", "-q",
                          "--out", "/dev/stdout"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 1 and run.stdout == "" and run.stderr == (
        "error: /dev/stdout is not a regular file (a named pipe, a device or a socket): not writing there; name "
        "another file\n")


def test_a_build_through_a_symbolic_link_replaces_the_file_it_names(cli, tmp_path):
    """``--out link.h5`` writes the file the link names and keeps the link (a link to nowhere: the
    file it names is made); links in a loop are an error."""
    (tmp_path / "link.h5").symlink_to("real.h5")
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    for _ in range(2):  # made, then replaced (a tablebase: no --force needed)
        assert cli("build", "--variant", "dobutsu-3x3", "-q", "--out", tmp_path / "link.h5").exit_code == 0
        assert (tmp_path / "link.h5").is_symlink() and (tmp_path / "real.h5").is_file()
    with open_tablebase(tmp_path / "link.h5") as tb:
        assert tb.variant.name == "dobutsu-3x3"
    result = cli("build", "--variant", "dobutsu-3x3", "-q", "--out", tmp_path / "loop1")
    assert result.exit_code == 1 and result.output.startswith(f"error: {tmp_path / 'loop1'}: its symbolic links "
                                                              f"cannot be followed (")
    result = cli("probe", "S/-l-/---/-L-/-", "--tb", tmp_path / "loop1")  # (it said 'no such file')
    assert result.exit_code == 1
    assert result.output == f"error: {tmp_path / 'loop1'}: a symbolic link to no file (loop2)\n"


def test_sizes_are_said_in_the_unit_that_reads():
    """Byte counts for people: bytes to PiB, a need and a budget a few MiB apart never read the
    same, and a full game of a big board not in millions of GiB."""
    from dobutsu_tb.tablebase.memory import gib, gib_apart

    assert [gib(n) for n in (1, 1000, 1023, 5 << 10, (1 << 20) - 1, 320 << 20, (1 << 30) - (1 << 20),
                             (1 << 30) - 1, 3 << 29, 1023 << 30, (1 << 40) - 1, 1 << 40, 1443093 << 30, 3 << 50,
                             5000 << 50)] == [
        "1 byte", "1000 bytes", "1023 bytes", "5 KiB", "1 MiB", "320 MiB", "1023 MiB", "1.0 GiB", "1.5 GiB",
        "1023.0 GiB", "1.0 TiB", "1.0 TiB", "1.4 PiB", "3.0 PiB", "5000.0 PiB"]
    assert gib_apart(328 << 20, (328 << 20) + 5000) == ["335,872 KiB", "335,877 KiB"]  # not 328 MiB twice
    assert gib_apart(1068 << 20, 1 << 30) == ["1,068 MiB", "1,024 MiB"]  # not 1.0 GiB twice
    assert gib_apart(1000, 1001) == ["1000 bytes", "1001 bytes"]
    assert gib_apart(2048, 2049) == ["2,048 bytes", "2,049 bytes"]
    assert gib_apart(328 << 20, 1 << 30) == ["328 MiB", "1.0 GiB"]


def test_how_much_to_raise_a_budget_is_rounded_up():
    """'raise --max-memory by K at least' is a figure of at least the bytes missing, rounded up in
    its unit (the hostile round: 1.4 MiB said '1 MiB', and a user who raised the budget by that
    was refused again, three times over one build)."""
    from dobutsu_tb.tablebase.memory import GIB, gib_up, parse_size

    cases = (1, 1023, 1024, 1025, (1 << 20) + 1, 1_468_006, (1 << 30) - 1, GIB + 1, 3 * GIB // 2 + 1,
             (1 << 40) - 1, (1 << 40) + 1, 123_456_789_012)
    assert [gib_up(n) for n in cases] == [
        "1 byte", "1023 bytes", "1 KiB", "2 KiB", "2 MiB", "2 MiB", "1.0 GiB", "1.1 GiB", "1.6 GiB", "1.0 TiB",
        "1.1 TiB", "115.0 GiB"]
    for n in (*cases, *range(1, 5000, 7), *range(GIB - 5000, GIB + 5000, 13)):
        said = gib_up(n).replace(" bytes", "").replace(" byte", "").replace("iB", "").replace(" ", "")
        assert said.endswith("T") or parse_size(said) >= n, (n, gib_up(n))  # (1 TiB: more than this machine)
