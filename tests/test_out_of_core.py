"""Builds that fit a small memory budget (tablebase/memory.py): terminal positions counted in
partitions, lists spilled to disk, records sorted and written by key range, two-byte values. Each
path, forced on a small build, must give the same file (keys and values) as the plain build."""

import dataclasses
import os
import re
import weakref
from pathlib import Path

import h5py
import numba
import numpy as np
import pytest

from conftest import LION_CHICK
from dobutsu_tb.encoding import compact, compact_layout, compact_set, config, jit
from dobutsu_tb.tablebase import memory, precompile, retrograde, writer
from dobutsu_tb.tablebase.build import build_tablebase, record_blocks
from dobutsu_tb.tablebase.enumeration import enumerate_positions
from dobutsu_tb.tablebase.game.game import game_of
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.game.variant import get_variant
from dobutsu_tb.tablebase.probe import open_tablebase
from dobutsu_tb.tablebase.reader import TablebaseFile


def _contents(path):
    with TablebaseFile(path) as f:
        keys, values = f.read_all()
        return keys, values.astype(np.uint16), f.metadata


def _same_file(path, tb):
    """Assert that the file at ``path`` has the keys, values and terminal counts of the tablebase
    ``tb``'s; returns its metadata."""
    keys, values, meta = _contents(path)
    want_keys, want_values, want = _contents(tb.path)
    assert np.array_equal(keys, want_keys) and np.array_equal(values, want_values)
    assert (meta.catch_terminal, meta.try_terminal, meta.reachable) == (want.catch_terminal, want.try_terminal,
                                                                         want.reachable)
    return meta


@pytest.fixture()
def small_tables(monkeypatch):
    """Tables that start tiny and grow, so that a budget of under a MiB bites (the lion-and-chick
    game's table and tags take 320 KiB once grown, and growing to them 0.8 MiB)."""
    monkeypatch.setattr(config, "DEFAULT_EXPECTED", 1024)
    monkeypatch.setattr(compact_layout, "MIN_SLOT_BITS", 14)
    monkeypatch.setattr(compact_set, "MIN_SET_BUCKETS", 64)
    monkeypatch.setattr(compact_set, "SET_BUCKET_GRAIN", 16)


def test_a_tiny_budget_gives_the_same_file(tmp_path, small_tables, lion_chick_tb):
    work = tmp_path / "work"
    result = build_tablebase(tmp_path / "small.h5", LION_CHICK, progress=False, max_memory=memory.BASE_MEMORY + 600_000,
                             work_dir=work, spill=True)
    assert result.plan.terminal_parts >= 2 and result.plan.spill
    _same_file(result.path, lion_chick_tb)
    assert not work.exists()  # the build's own folder is gone, and the one it made for it


def test_the_terminal_passes_log_as_the_enumeration_does(tmp_path, small_tables, monkeypatch, capsys):
    """Without a terminal (no bars), the passes that count terminal partitions log their progress
    every LOG_EVERY seconds, as the enumeration does (a 5x3-sized pass takes minutes)."""
    from dobutsu_tb.tablebase import build

    monkeypatch.setattr(build, "LOG_EVERY", 0.0)
    result = build_tablebase(tmp_path / "small.h5", LION_CHICK, progress=None, max_memory=memory.BASE_MEMORY + 600_000,
                             work_dir=tmp_path / "work", spill=True)
    assert result.plan.terminal_parts == 2
    err = capsys.readouterr().err
    assert "enumeration: 1 position expanded" in err
    assert f"terminal positions: {result.metadata.nonterminal:,} of {result.metadata.nonterminal:,} positions " \
           "expanded again to count them" in err, err
    # (the plan had room for the set; the tables that grew did not: how much more would have held it)
    assert re.search(r"counting the terminal positions in 1 more pass, each as long as the enumeration's "
                     r"expansion \(the budget held 1/2 of the set of terminal positions; about \d+ KiB more, "
                     r"--max-memory, would hold it all\)", err), err


@pytest.mark.parametrize("free", [None, 1000, "tmpfs"])
def test_a_plan_of_terminal_partitions_sets_their_children_aside(tmp_path, monkeypatch, capsys, lion_chick_tb, free):
    """A plan of two terminal partitions (the 5x3 game's in 12 GiB): the enumeration sets the
    second one's terminal children aside in the work folder, and the count reads them back, or,
    when the disk has less room free than the plan's figure or is a tmpfs (memory, not disk),
    expands the table again. The same file either way; the folder is gone."""
    from dobutsu_tb.tablebase import build

    real_plan, real_count, seen = build.make_plan, build.count_terminal_partitions, []

    def plan(sizes, nonterminal, terminal, *args, **kwargs):
        made = real_plan(sizes, nonterminal, terminal, *args, **kwargs)
        if kwargs.get("found"):
            return made
        return dataclasses.replace(made, terminal_parts=2, terminal_disk=memory.terminal_spill_bytes(nonterminal, 2))

    def count(enum, *args):
        seen.append(enum.spilled is not None and [p.exists() for p in enum.spilled.paths])
        real_count(enum, *args)

    monkeypatch.setattr(build, "make_plan", plan)
    monkeypatch.setattr(build, "count_terminal_partitions", count)
    if free == "tmpfs":
        monkeypatch.setattr(build, "in_memory_file_system", lambda path: "tmpfs")
    elif free is not None:
        usage = build.shutil.disk_usage(tmp_path)
        monkeypatch.setattr(build.shutil, "disk_usage", lambda path: usage._replace(free=free))
    work = tmp_path / "work"
    result = build_tablebase(tmp_path / "parts.h5", LION_CHICK, progress=None, work_dir=work)
    err = capsys.readouterr().err
    assert result.plan.terminal_parts == 2
    _same_file(result.path, lion_chick_tb)
    assert not work.exists()
    if free is None:
        assert seen == [[True]]
        assert re.search(r"terminal positions in 2 partitions, 1 of them set aside in \S+ \(about \d+ [KM]iB of disk\)",
                         err), err
        assert re.search(r"counting the terminal positions of 1 more partition from the \d+ [KM]iB of their "
                         r"children set aside", err), err
    elif free == "tmpfs":
        assert seen == [False]
        assert re.search(rf"the work folder {work} \(--work-dir\) is on tmpfs, in memory: the terminal children of 1 "
                         r"partition \(about \d+ [KM]iB\) would take memory beside the budget there; they are counted "
                         r"in 1 more pass over the table instead \(--work-dir on a disk sets them aside\)", err), err
        assert re.search(r"terminal positions in 2 partitions, counted in 2 passes", err), err
    else:
        assert seen == [False]
        assert re.search(rf"the disk of {work} \(--work-dir\) has 1000 bytes free, less than the \d+ [KM]iB the "
                         r"terminal children of 1 partition would take: they are counted in 1 more pass "
                         r"over the table instead", err), err
        assert "counting the terminal positions in 1 more pass" in err
        # The plan line already says how they are counted, after the disk was seen.
        assert re.search(r"terminal positions in 2 partitions, counted in 2 passes", err), err
        assert err.index("has 1000 bytes free") < err.index("terminal positions in 2 partitions"), err


def test_lists_spilled_to_a_tmpfs_are_warned_of(tmp_path, monkeypatch, capsys, lion_chick_tb):
    """Lists spilled to a file system in memory (tmpfs: /dev/shm, a /tmp on many systems) take memory
    beside the budget: one warning line says so and names the folder; the build goes on, same file."""
    from dobutsu_tb.tablebase import build

    seen = []
    monkeypatch.setattr(build, "in_memory_file_system", lambda path: seen.append(path) or "tmpfs")
    work = tmp_path / "work"
    result = build_tablebase(tmp_path / "spilled.h5", LION_CHICK, progress=None, work_dir=work, spill=True)
    _same_file(result.path, lion_chick_tb)
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: the work folder {work} (--work-dir) is on tmpfs, in memory: the lists spilled "
                        f"there take memory beside the budget; give --work-dir a folder on a disk"], warnings
    assert seen and not work.exists()


def test_a_disk_too_small_for_the_spilled_lists_is_warned_of(tmp_path, monkeypatch, capsys, lion_chick_tb):
    """A work folder whose disk has less room free than the plan gives the spilled lists: a warning
    line says so before the analysis (the lists themselves fit here: the same file)."""
    from dobutsu_tb.tablebase import build

    usage = build.shutil.disk_usage(tmp_path)
    monkeypatch.setattr(build.shutil, "disk_usage", lambda path: usage._replace(free=1000))
    work = tmp_path / "work"
    result = build_tablebase(tmp_path / "spilled.h5", LION_CHICK, progress=None, work_dir=work, spill=True)
    _same_file(result.path, lion_chick_tb)
    err = capsys.readouterr().err
    assert re.search(rf"warning: the disk of {work} \(--work-dir\) has 1000 bytes free, less than the up to \d+ "
                     r"[KM]iB the analysis's spilled lists may take: the build stops with an error if they do not "
                     r"fit\n", err), err


def test_the_file_system_of_a_path_is_its_nearest_mount(tmp_path):
    """memory.file_system_of reads the mount table: the deepest mount point above the path (the
    last of those mounted on one point), octal escapes in mount points, paths not made yet taken at
    their nearest existing folder; no table, no answer."""
    (tmp_path / "with space" / "deep").mkdir(parents=True)
    (tmp_path / "ram").mkdir()
    (tmp_path / "with spacex").mkdir()
    root = os.path.realpath(tmp_path).replace(" ", "\\040")
    table = tmp_path / "mountinfo"
    table.write_text(
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
        f"30 27 0:27 / {root}/with\\040space rw,relatime shared:5 - xfs /dev/vdb rw\n"
        f"31 27 0:28 / {root}/ram rw - ramfs ramfs rw\n"
        f"32 27 0:29 / {root}/ram rw - tmpfs tmpfs rw,size=4k\n"
        "bad line\n")
    kind = lambda path: memory.file_system_of(path, str(table))  # noqa: E731
    assert kind(tmp_path) == "ext4" and kind("/") == "ext4"
    assert kind(tmp_path / "with space" / "deep") == "xfs"
    assert kind(tmp_path / "with space" / "not" / "made") == "xfs"
    assert kind(tmp_path / "ram" / "x.h5") == "tmpfs"
    assert kind(tmp_path / "with spacex") == "ext4"  # (a mount point's name as a prefix is not a folder above)
    assert memory.file_system_of(tmp_path, str(tmp_path / "none")) is None
    if Path("/dev/shm").is_dir():
        assert memory.in_memory_file_system("/dev/shm") == "tmpfs"


def test_spilled_lists_free_their_disk_as_they_go(tmp_path, monkeypatch, lion_chick_tb):
    """A spilled list's file is unlinked as soon as it is mapped, so its disk goes with the array
    (a ply's list once the next ply is done), not at the end: the lists alive at once stay within
    the plan's disk figure, and the build's folder holds no file while it runs."""
    import weakref

    from dobutsu_tb.tablebase.build import WorkFolder

    made, most, files = [], [0], []
    real = WorkFolder.lists

    def lists(self, n, dtype):
        array = real(self, n, dtype)
        if n:
            made.append(weakref.ref(array))
            most[0] = max(most[0], sum(a().nbytes for a in made if a() is not None))
            files.extend(self.path.iterdir())
        return array

    monkeypatch.setattr(WorkFolder, "lists", lists)
    result = build_tablebase(tmp_path / "spilled.h5", LION_CHICK, progress=False, work_dir=tmp_path / "work",
                             spill=True)
    assert result.plan.spill and len(made) > 10 and files == []
    assert 0 < most[0] <= result.plan.disk, (most[0], result.plan.disk)
    keys, values, _ = _contents(result.path)
    want_keys, want_values, _ = _contents(lion_chick_tb.path)
    assert np.array_equal(keys, want_keys) and np.array_equal(values, want_values)


def test_a_work_folder_that_cannot_be_made_is_one_error_naming_it(tmp_path):
    from dobutsu_tb.tablebase.output import OutputError

    (tmp_path / "afile").write_text("")
    for work, why in [(tmp_path / "afile", "not a folder"),
                      (tmp_path / "afile" / "sub", "cannot make a folder there (Not a directory)")]:
        with pytest.raises(OutputError) as raised:
            build_tablebase(tmp_path / "spilled.h5", LION_CHICK, progress=False, work_dir=work, spill=True)
        assert str(raised.value) == (f"the work folder {work} (--work-dir), for what the build spills to disk: "
                                     f"{why}; nothing was written")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_the_work_folders_the_build_made_are_removed_and_others_kept(tmp_path):
    deep = tmp_path / "new" / "deeper" / "work"
    build_tablebase(tmp_path / "a.h5", LION_CHICK, progress=False, work_dir=deep, spill=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.h5"]  # new/deeper/work made, and removed
    (tmp_path / "kept").mkdir()
    build_tablebase(tmp_path / "b.h5", LION_CHICK, progress=False, work_dir=tmp_path / "kept", spill=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.h5", "b.h5", "kept"]
    assert list((tmp_path / "kept").iterdir()) == []


def test_a_dense_table_gives_the_same_file(tmp_path, monkeypatch):
    """A budget that a power of two of slots does not fit, but a table sized to the known count
    does (85 % full; the 5x3 game in 12 GiB): the same keys and values as the plain build, and
    the table did not grow."""
    from conftest import prewarm_held
    from dobutsu_tb.tablebase import build

    variant = get_variant("dobutsu-nodrops")
    start = Position.start(variant).text()
    plain = build_tablebase(tmp_path / "plain.h5", start, variant=variant, progress=False)
    meta = plain.metadata
    counts = (meta.nonterminal, meta.reachable - meta.nonterminal)
    monkeypatch.setitem(build.KNOWN_COUNTS, (variant.name, start), counts)
    monkeypatch.setattr(config, "ENUM_BATCH", 2048)  # a batch's children fit the last 7 % of a shard
    budget = memory.BASE_MEMORY + 6_050_000
    pow2 = memory.Sizes(44, 19)
    assert pow2.retrograde(meta.nonterminal, spilled=True) > budget - memory.BASE_MEMORY
    cache = Path(jit.cache_root())
    with prewarm_held():  # (no other process writes into the kernel cache while it looks)
        before = {p: p.stat().st_mtime_ns for p in cache.rglob("*") if p.is_file()}
        result = build_tablebase(tmp_path / "dense.h5", start, variant=variant, progress=False, max_memory=budget,
                                 work_dir=tmp_path)
        # Its kernels (int32 slots) compiled in the precompile children, or were cached: none in the build.
        mark = Path(numba.config.CACHE_DIR) / "shape-3x4" / precompile.DENSE_MARK.format("int32")  # (this version's)
        late = [p.name for p in cache.rglob("*") if p.is_file() and before.get(p) != p.stat().st_mtime_ns
                and p.stat().st_mtime_ns > mark.stat().st_mtime_ns]
    assert result.plan.table_load == 0.85 and result.plan.table_slots == 458_752  # the table as it was made
    assert late == [], late
    keys, values, _ = _contents(result.path)
    want_keys, want_values, _ = _contents(plain.path)
    assert np.array_equal(keys, want_keys) and np.array_equal(values, want_values)


def test_windows_in_key_order_give_the_same_file(tmp_path, monkeypatch, small_tables, lion_chick_tb):
    """The enumeration and the retrograde analysis take positions in windows sorted by key:
    windows of a few positions (the table growing under a window, a ply in many windows) change
    no key, value or count."""
    from dobutsu_tb.tablebase import enumeration

    monkeypatch.setattr(enumeration, "_WINDOW", 5)
    monkeypatch.setattr(config, "ENUM_BATCH", 2)
    monkeypatch.setattr(retrograde, "_WINDOW", 3)
    monkeypatch.setattr(retrograde, "_FRONTIER", 2)
    result = build_tablebase(tmp_path / "windows.h5", LION_CHICK, progress=False)
    _same_file(result.path, lion_chick_tb)


def test_accesses_grouped_by_region_give_the_same_file(tmp_path, monkeypatch, lion_chick_tb):
    """With a big table (5x3-sized: 2 GiB or more) the enumeration inserts each batch's children
    grouped by region of the table and of the set, in bigger batches, and the analysis looks a
    ply's predecessors up grouped by region: forced on the lion-and-chick game (regions of 4 KiB,
    batches of 128 positions instead of 16), the same file; every batch was grouped, in both structures, at
    least one was big, and every ply was grouped."""
    from dobutsu_tb.encoding import routing
    from dobutsu_tb.tablebase import enumeration

    monkeypatch.setattr(routing, "GROUP_FROM", 0)
    monkeypatch.setattr(routing, "REGION_BYTES", 1 << 12)
    monkeypatch.setattr(config, "ENUM_BATCH", 16)
    monkeypatch.setattr(enumeration, "_BIG_BATCH", 128)
    seen, applied = [], []
    insert, apply = enumeration._insert, retrograde.apply_predecessors

    def spy(*args):
        seen.append((args[4].shape[2], args[-2], args[-1]))  # (room a list, table_group, set_group)
        return insert(*args)

    def apply_spy(*args):
        applied.append(args[4].shape[0])
        return apply(*args)

    monkeypatch.setattr(enumeration, "_insert", spy)
    monkeypatch.setattr(retrograde, "apply_predecessors", apply_spy)
    result = build_tablebase(tmp_path / "grouped.h5", LION_CHICK, progress=False)
    meta = _same_file(result.path, lion_chick_tb)
    assert seen and all(table > 0 and tset > 0 for _, table, tset in seen), seen
    assert len(applied) >= meta.max_dtm and sum(applied) > meta.nonterminal  # each ply's predecessors, grouped
    small = enumeration.child_lists(config.THREADS, 1, config.ENUM_BATCH,
                                    game_of(get_variant("dobutsu")).layout["MAX_MOVES"]).shape[2]
    assert max(room for room, _, _ in seen) > small  # the lists were made for a big batch


@pytest.mark.parametrize("parts", [1, 4])
def test_the_enumeration_grouped_by_region_finds_the_same_positions_and_counters(monkeypatch, parts):
    """Grouped insertions change where keys land in the table, not which keys it holds, nor a
    position's counter of distinct children (its tag), nor the terminal counts (counted in one
    set, or in partitions, the later ones by count_terminal_partitions, grouped too)."""
    from dobutsu_tb.encoding import routing
    from dobutsu_tb.tablebase import enumeration

    game = game_of(get_variant("dobutsu"))
    start = Position.from_text("S/-l-/gc-/-CG/-L-/-", game.variant).state()

    def by_key(enum):
        enumeration.count_terminal_partitions(enum)
        where = enum.table.occupied()
        keys = enum.table.keys_at(where)
        order = np.argsort(keys)
        return keys[order], enum.tags[where][order], (enum.catch_terminal, enum.try_terminal, enum.no_moves)

    plain = by_key(enumerate_positions(game, start))
    monkeypatch.setattr(routing, "GROUP_FROM", 0)
    monkeypatch.setattr(routing, "REGION_BYTES", 1 << 14)
    monkeypatch.setattr(enumeration, "_BIG_BATCH", 4096)
    grouped = by_key(enumerate_positions(game, start, terminal_parts=parts))
    assert plain[0].shape[0] == 1_254_075 and plain[2] == (1_625_801, 128_397, 0)
    assert np.array_equal(plain[0], grouped[0]) and np.array_equal(plain[1], grouped[1]) and plain[2] == grouped[2]


@pytest.mark.parametrize("shift", [0, 3, 9])
def test_grouped_by_region_is_a_stable_sort_of_every_thread_list(shift):
    """Against numpy's stable sort of the lists concatenated thread by thread."""
    from dobutsu_tb.encoding.routing import grouped_by_region

    rng = np.random.default_rng(shift)
    lists = rng.integers(0, 1 << (12 + shift), (3, 2, 50)).astype(np.int64)
    counts = np.zeros((3, 2, 2), np.int64)
    counts[:, :, 1] = rng.integers(0, 51, (3, 2))
    for shard in range(2):
        out = np.full(200, -1, np.int64)
        n = grouped_by_region(lists, shard, counts, 1, shift, out)
        whole = np.concatenate([lists[t, shard, :counts[t, shard, 1]] for t in range(3)])
        assert n == whole.shape[0]
        assert np.array_equal(out[:n], whole[np.argsort(whole >> shift, kind="stable")])
        assert (out[n:] == -1).all()


def test_region_bits_cut_big_structures_into_stretches_of_32_mib():
    from dobutsu_tb.encoding.routing import region_bits

    assert [region_bits(n) for n in (1 << 30, (1 << 31) - 1)] == [0, 0]  # under 2 GiB: not grouped
    assert [region_bits(n) for n in (1 << 31, 8 << 30, 6650 << 20, 1 << 50)] == [6, 8, 8, 12]


def test_slots_in_key_order_sort_each_share():

    from dobutsu_tb.encoding.compact import table_key_at
    from dobutsu_tb.tablebase.enumeration import slots_in_key_order

    game = game_of(get_variant("dobutsu-3x3"))
    enum = enumerate_positions(game, Position.start(game.variant).state())
    found = np.flatnonzero(enum.table.slots).astype(np.int64)
    ordered = slots_in_key_order(enum.table, found.copy(), 3)
    assert np.array_equal(np.sort(ordered), found)  # the same slots
    per = -(-found.shape[0] // 3)
    for lo in range(0, found.shape[0], per):
        share = [table_key_at(enum.table.slots, enum.table.layout, s) >> 32 for s in ordered[lo:lo + per]]
        assert share == sorted(share) and len(set(share)) > 1


@pytest.mark.parametrize("spilled", [False, True])
@pytest.mark.parametrize("parts", [2, 4, 8])
def test_terminal_partitions_count_what_one_set_counts(parts, spilled, tmp_path):
    """Counted again by expanding the table, or from the children the enumeration set aside on
    disk (every one of them, repeats included, in the file of its partition, removed once read)."""
    from dobutsu_tb.tablebase.enumeration import CLASS_BITS, count_terminal_partitions

    game = game_of(get_variant("dobutsu-3x3"))
    start = Position.start(game.variant).state()
    whole = enumerate_positions(game, start)
    split = enumerate_positions(game, start, terminal_parts=parts, spill_dir=tmp_path if spilled else None)
    assert split.terminal_parts == parts and split.catch_terminal < whole.catch_terminal
    if spilled:
        assert split.spilled.failed is None and split.spilled.items[0] == 0
        for p, path in enumerate(split.spilled.paths, 1):
            items = np.fromfile(path, np.int64)
            assert items.shape[0] == split.spilled.items[p] > 0
            assert np.all((items >> CLASS_BITS) & (parts - 1) == p)
            assert np.unique(items).shape[0] < items.shape[0]  # repeats: a terminal position has many parents
    else:
        assert split.spilled is None
    count_terminal_partitions(split)
    assert (split.catch_terminal, split.try_terminal) == (whole.catch_terminal, whole.try_terminal)
    assert list(tmp_path.iterdir()) == []


def test_children_set_aside_are_given_up_when_a_write_fails(tmp_path):
    """A file of set-aside children that cannot be written (a full disk: ``/dev/full``) gives them
    all up, and the count expands the table again: the same counts, no file left."""
    from dobutsu_tb.tablebase.enumeration import count_terminal_partitions

    game = game_of(get_variant("dobutsu-3x3"))
    start = Position.start(game.variant).state()
    whole = enumerate_positions(game, start)
    (tmp_path / "terminal-2-of-4.bin").symlink_to("/dev/full")
    split = enumerate_positions(game, start, terminal_parts=4, spill_dir=tmp_path)
    assert split.spilled.failed.startswith(f"cannot write {tmp_path / 'terminal-2-of-4.bin'} (No space left on device")
    assert list(tmp_path.iterdir()) == []
    count_terminal_partitions(split)
    assert (split.catch_terminal, split.try_terminal) == (whole.catch_terminal, whole.try_terminal)


def test_children_set_aside_that_changed_on_disk_are_not_counted(tmp_path):
    """A file of set-aside children cut short (or removed) after the enumeration is given up
    before the count, which expands the table again: never a count from what is left."""
    from dobutsu_tb.tablebase.enumeration import count_terminal_partitions

    game = game_of(get_variant("dobutsu-3x3"))
    start = Position.start(game.variant).state()
    whole = enumerate_positions(game, start)
    for damage in (lambda p: os.truncate(p, 8 * 3), os.unlink):
        split = enumerate_positions(game, start, terminal_parts=4, spill_dir=tmp_path)
        damage(split.spilled.paths[1])
        count_terminal_partitions(split)
        assert (split.catch_terminal, split.try_terminal) == (whole.catch_terminal, whole.try_terminal)
        assert split.spilled.failed.startswith((f"{split.spilled.paths[1]} has 24 bytes, not the ",
                                                f"cannot read {split.spilled.paths[1]} (No such file"))
        assert list(tmp_path.iterdir()) == []


def test_the_work_folders_of_killed_builds_are_removed(tmp_path, capsys):
    """A build killed outright (SIGKILL, out of memory) leaves its work folder, gigabytes of
    terminal children: the next build in that folder removes it, and keeps those of builds that
    still run."""
    dead = tmp_path / ".dobutsu-tb-work-999999999-abc"  # (no such process)
    alive = tmp_path / f".dobutsu-tb-work-{os.getppid()}-def"
    for folder in (dead, alive):
        folder.mkdir()
        (folder / "terminal-1-of-2.bin").write_bytes(b"x" * 64)
    build_tablebase(tmp_path / "a.h5", LION_CHICK, progress=None, work_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [alive.name, "a.h5"]
    assert f"removed 1 work folder of a build that was killed: {dead.name}" in capsys.readouterr().err


def test_lists_the_disk_cannot_hold_are_one_error(tmp_path, monkeypatch):
    """A spilled list whose disk cannot be had (a full disk) is one error line before it is
    mapped: a mapped page the disk cannot hold would end the process with SIGBUS."""
    import errno

    from dobutsu_tb.tablebase.output import OutputError

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    work = tmp_path / "work"
    with pytest.raises(OutputError) as raised:
        build_tablebase(tmp_path / "spilled.h5", LION_CHICK, progress=False, work_dir=work, spill=True)
    assert re.fullmatch(rf"the work folder {work} \(--work-dir\) has no room for the analysis's lists \(\d+ KiB more: "
                        r"No space left on device\); nothing was written", str(raised.value)), str(raised.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_children_set_aside_are_given_up_when_the_partitions_double(tmp_path, small_tables):
    """An enumeration whose set outgrows its budget doubles the terminal partitions: the files of
    the old ones are given up, and the count expands the table again."""
    from dobutsu_tb.tablebase.enumeration import count_terminal_partitions

    game = game_of(get_variant("dobutsu"))
    start = Position.from_text(LION_CHICK).state()
    whole = enumerate_positions(game, start)
    for budget in range(500_000, 1_000_000, 25_000):
        try:
            split = enumerate_positions(game, start, budget=budget, terminal_parts=2, spill_dir=tmp_path)
        except memory.InsufficientMemoryError:
            continue
        if split.terminal_parts > 2:
            break
    else:
        pytest.fail("no budget doubled the partitions")
    assert split.spilled.failed == "the terminal positions' partitions doubled"
    assert list(tmp_path.iterdir()) == []
    count_terminal_partitions(split)
    assert (split.catch_terminal, split.try_terminal) == (whole.catch_terminal, whole.try_terminal)


class _HeldArrays:
    """The bytes of the arrays some modules make, held at once now and at most: the slow reference
    for what an enumeration's tables hold, as numpy allocated them (each array counted until it is
    freed)."""

    def __init__(self):
        self.live = self.peak = 0
        self.paused = False

    def track(self, array):
        if self.paused:
            return array
        self.live += array.nbytes
        self.peak = max(self.peak, self.live)
        weakref.finalize(array, self._free, array.nbytes)
        return array

    def _free(self, nbytes):
        self.live -= nbytes

    def numpy(self, empty=True):
        """numpy for a module, whose ``zeros`` (and ``empty``) arrays are counted."""
        held = self

        class Counted:
            def __getattr__(self, name):
                return getattr(np, name)

            def zeros(self, *args, **kwargs):
                return held.track(np.zeros(*args, **kwargs))

            def empty(self, *args, **kwargs):
                return held.track(np.empty(*args, **kwargs)) if empty else np.empty(*args, **kwargs)

        return Counted()


def _held_while_enumerating(game, start, budget, **options):
    """Enumerate within ``budget``, counting every array of the table, its tags and the set as
    numpy makes and frees them: (the enumeration or the refusal's message, the most bytes held at
    once)."""
    from dobutsu_tb.tablebase import enumeration

    try:  # the same enumeration first, uncounted: its kernels compile with numba's own numpy
        enumerate_positions(game, start, budget=budget, **options)
    except memory.InsufficientMemoryError:
        pass
    held = _HeldArrays()
    real_keys_at = compact.CompactTable.keys_at

    def keys_at(table, slots):  # (a window of positions to expand: the base memory's, as the lists are)
        held.paused = True
        try:
            return real_keys_at(table, slots)
        finally:
            held.paused = False

    with pytest.MonkeyPatch.context() as counted:
        counted.setattr(compact, "np", held.numpy())  # the table's slots and each growth's new places
        counted.setattr(compact_set, "np", held.numpy())  # the set's buckets
        counted.setattr(enumeration, "np", held.numpy(empty=False))  # the tags (not the lists of children)
        counted.setattr(compact.CompactTable, "keys_at", keys_at)
        try:
            enum = enumerate_positions(game, start, budget=budget, **options)
        except memory.InsufficientMemoryError as refused:
            assert "the enumeration needs more memory than the budget" in str(refused)
            assert "raise --max-memory by " in str(refused)  # and how much more: a user's next try
            enum = str(refused)
    return enum, held.peak


def test_tables_that_grow_stay_within_the_budget_while_they_grow(small_tables):
    """A start whose counts nobody knows: the table and the set grow as the enumeration finds
    positions. While one grows it holds its old memory and the new at once (the table also each
    old slot's new place and its tag), and the budget must hold that too, not only what is left
    after: the bytes every array of the table, its tags and the set held at once, counted as numpy
    made and freed them, never exceed the budget, whether the build fits in one terminal pass, in
    several or not at all; the terminal positions are still all counted."""
    from dobutsu_tb.tablebase.enumeration import count_terminal_partitions

    game = game_of(get_variant("dobutsu"))
    start = Position.from_text(LION_CHICK).state()
    whole = enumerate_positions(game, start)
    passes = []
    for budget in (500_000, 600_000, 650_000, 1_000_000):
        enum, peak = _held_while_enumerating(game, start, budget)
        assert 0 < peak <= budget, (budget, peak)
        if isinstance(enum, str):
            assert "its table's next growth needs" in enum, enum
            passes.append(None)
            continue
        passes.append(enum.terminal_parts)
        assert enum.table.capacity > 1 << 14  # the table grew
        count_terminal_partitions(enum)
        assert (len(enum.table), enum.catch_terminal, enum.try_terminal) == (
            len(whole.table), whole.catch_terminal, whole.try_terminal)
    assert passes[0] is None and passes[-1] == 1 and max(p or 0 for p in passes) > 1, passes


def test_first_tables_that_break_the_budget_are_refused_before_they_are_made(small_tables):
    """Through the Python API, counts given as ``expected`` size the first tables (the command line
    plans them first, the API did not): first tables that break the budget are refused in one
    line that says what they need and by how much to raise it, before the start is inserted;
    tables sized for the real counts build within the same budget."""
    game = game_of(get_variant("dobutsu"))
    start = Position.from_text(LION_CHICK).state()
    whole = enumerate_positions(game, start)
    nt, t = len(whole.table), whole.catch_terminal + whole.try_terminal
    with pytest.raises(memory.InsufficientMemoryError) as refused:
        enumerate_positions(game, start, expected=(100 * nt, 100 * t), budget=1_000_000)
    said = str(refused.value)
    assert said.startswith("the enumeration needs more memory than the budget (977 KiB for its tables): its first "
                           f"tables, for {100 * nt:,} non-terminal and {100 * t:,} terminal positions, need "), said
    assert re.search(r"; expect fewer positions, free some memory or raise --max-memory by [\d,.]+ [KMG]iB at least$",
                     said), said
    enum = enumerate_positions(game, start, expected=(nt, t), budget=1_000_000)
    assert (len(enum.table), enum.catch_terminal + enum.try_terminal) == (nt, t)
    with pytest.raises(memory.InsufficientMemoryError) as refused:  # no counts given: the default tables
        enumerate_positions(game, start, budget=10_000)
    assert ": its first tables, of the default size, need " in str(refused.value), str(refused.value)
    assert "expect fewer" not in str(refused.value)
    # The hostile round: inputs that crashed with ZeroDivisionError, or were taken, are one ValueError.
    for bad, said in (({"budget": -1}, "the budget must be a number of bytes, 0 or more; -1 given"),
                      ({"terminal_parts": 0}, "terminal_parts must be a power of two from 1 to "),
                      ({"terminal_parts": 3}, "terminal_parts must be a power of two from 1 to "),
                      ({"expected": (nt, t), "table_load": 0.0}, "table_load must be between 0 and 1"),
                      ({"expected": (nt, t), "table_load": 2.0}, "table_load must be between 0 and 1"),
                      ({"expected": (-5, -5)}, "the expected counts must be 0 or more; (-5, -5) given")):
        with pytest.raises(ValueError, match=re.escape(said)):
            enumerate_positions(game, start, **bad)


def test_a_dense_table_stays_within_the_budget_while_its_set_grows(small_tables, monkeypatch):
    """A dense table (sized once, for a known count of non-terminal positions) beside a terminal
    set that starts too small: the set's growth holds its old buckets and the new at once, and
    setting part of it aside holds the whole set and the part; the budget holds both (and refuses
    when nothing fits), and the terminal positions are all counted, in one pass or several."""
    from dobutsu_tb.tablebase.enumeration import count_terminal_partitions

    monkeypatch.setattr(config, "ENUM_BATCH", 128)  # (a batch's children fit the dense table's room)
    monkeypatch.setattr(config, "THREADS", 2)  # (two shards, as the budgets below are measured: with one a
    # thread, NUMBA_NUM_THREADS=1, the sizes differ)
    game = game_of(get_variant("dobutsu"))
    start = Position.from_text(LION_CHICK).state()
    whole = enumerate_positions(game, start)
    counts = (len(whole.table), whole.catch_terminal, whole.try_terminal)
    options = {"expected": (counts[0], 64), "table_load": 0.5}
    free = enumerate_positions(game, start, **options)
    assert compact.is_dense(free.table.slots) and free.table.capacity < 2 * counts[0] / 0.5
    _, unbounded = _held_while_enumerating(game, start, None, **options)
    passes, refusals = [], []
    # (at the start 226,761 bytes; the lowest budgets refuse to set terminal positions aside, or at 64
    # partitions to grow the set; a few keep a quarter of the set at once)
    for below in (0, 60_000, 180_000, 189_545, 194_545, 198_545):
        budget = unbounded - below
        enum, peak = _held_while_enumerating(game, start, budget, **options)
        assert 0 < peak <= budget, (budget, peak)
        if isinstance(enum, str):
            refusals.append(enum)
            continue
        passes.append(enum.terminal_parts)
        assert enum.table.capacity == free.table.capacity  # it never grew
        count_terminal_partitions(enum)
        assert (len(enum.table), enum.catch_terminal, enum.try_terminal) == counts
    assert passes[0] == 1 and max(passes) > 1 and len(passes) == 4, (unbounded, passes)
    assert len(refusals) == 2 and "in 64 partitions, needs" in refusals[0], refusals
    assert "setting terminal positions aside needs" in refusals[1], refusals


@pytest.mark.parametrize("passes", [1, 3, 16])
def test_records_by_key_range_are_the_records(passes):
    game = game_of()
    enum = enumerate_positions(game, Position.from_text(LION_CHICK).state())
    solution = retrograde.solve(enum)
    shift = game.layout["KEY_SHIFT"]
    one = np.concatenate(list(record_blocks(enum.table, solution, shift, 1).blocks()))
    blocks = list(record_blocks(enum.table, solution, shift, passes).blocks())
    assert len(blocks) == passes or passes > 8  # sample quantiles may coincide on tiny tables
    assert np.array_equal(np.concatenate(blocks), one) and one.shape[0] == len(enum.table)
    slots = enum.table.occupied()  # the slow reference: every slot's record, sorted by numpy at once
    reference = np.sort(writer.pack_records(enum.table.keys_at(slots), solution.values[slots], shift))
    assert np.array_equal(one, reference)
    assert all(np.all(b[1:] > b[:-1]) for b in blocks if b.size)


def test_the_writer_takes_uneven_blocks(tmp_path, monkeypatch, lion_chick_tb):
    """Blocks of any size, in compression tasks of 2 chunks (many tasks in flight, keys and
    values in turns): the build's keys, values and metadata."""
    monkeypatch.setattr(writer, "_TASK_CHUNKS", 2)
    keys, values, meta = _contents(lion_chick_tb.path)
    records = writer.pack_records(keys, values.astype(np.uint8), 19)
    cuts = [0, 1, 700, 701, 2048, 5000, records.shape[0]]
    made = []

    def blocks():
        for a, b in zip(cuts[:-1], cuts[1:]):
            made.append(a)
            yield records[a:b].copy()

    with writer.reserve_output(tmp_path / "blocks.h5") as out:
        writer.write_file(out.tmp, writer.RecordBlocks(records.shape[0], blocks), meta)
        out.commit()
    assert made == cuts[:-1]
    k, v, m = _contents(tmp_path / "blocks.h5")
    assert np.array_equal(k, keys) and np.array_equal(v, values) and m == meta


def _with_longs(blocks, longs):
    """The same record blocks with other long values."""
    return writer.RecordBlocks(blocks.n, blocks.blocks, longs)


def test_two_byte_values_by_key_range(tmp_path, monkeypatch, lion_chick_tb):
    """With DTMs too long for a byte (5 plies or more stand for them here), the records of every
    key range carry the byte LONG for those, and the writer takes their values from the long
    values, by key, across blocks: the file's values are the one-byte file's, in two bytes."""
    monkeypatch.setattr(retrograde, "LONG_DTM", 5)
    game = game_of()
    shift = game.layout["KEY_SHIFT"]
    enum = enumerate_positions(game, Position.from_text(LION_CHICK).state())
    solution = retrograde.solve(enum)
    solution.values = retrograde.contiguous_values(solution.values)
    keys, values, meta = _contents(lion_chick_tb.path)
    blocks = record_blocks(enum.table, solution, shift, 4)
    long = values >= 6  # value code DTM + 1
    assert np.array_equal(blocks.longs.codes, keys[long] >> shift) and np.array_equal(blocks.longs.values, values[long])
    with writer.reserve_output(tmp_path / "wide.h5") as out:
        writer.write_file(out.tmp, blocks, meta)
        out.commit()
    k, v, m = _contents(tmp_path / "wide.h5")
    assert v.dtype == np.dtype("<u2") and np.array_equal(k, keys) and np.array_equal(v, values)
    assert m == dataclasses.replace(meta, value_bits=16)
    wrong = writer.LongValues(blocks.longs.codes, blocks.longs.values[::-1].copy())  # (the values of other keys)
    with writer.reserve_output(tmp_path / "wrong.h5") as out:
        writer.write_file(out.tmp, _with_longs(record_blocks(enum.table, solution, shift, 4), wrong), meta)
        out.commit()
    with h5py.File(tmp_path / "wrong.h5", "r") as f:  # (so the first check can fail; the reader refuses it)
        assert not np.array_equal(f["values"][()], values)
    for bad, message in ((writer.LongValues(wrong.codes[1:], wrong.values[1:]), "long values have none for its key"),
                         (writer.LongValues(np.append(wrong.codes, 1 << 50), np.append(wrong.values, 300)),
                          r"records say their value needs two bytes, and [\d,]+ long values are given")):
        with pytest.raises(ValueError, match=message), writer.reserve_output(tmp_path / "bad.h5") as out:
            writer.write_file(out.tmp, _with_longs(record_blocks(enum.table, solution, shift, 4), bad), meta)
    assert not (tmp_path / "bad.h5").exists()


def test_long_values_that_cannot_be_are_refused_before_writing(tmp_path, lion_chick_tb):
    """Long values of the wrong shape, type or range, or out of order, are refused with one
    ValueError before anything is written, and leave no file: values above 65,535 or negative
    were cast to uint16 and written as other values, lengths that differ read past the values'
    end, a 2-D array failed in the compiled chunks with a numba traceback, and unsorted codes
    said 'the long values have none for its key'."""
    keys, values, meta = _contents(lion_chick_tb.path)
    codes = keys >> 19
    long = values >= 6
    records = writer.pack_records(keys, np.where(long, 255, values).astype(np.uint8), 19)
    lc, lv = codes[long], values[long]
    assert lc.shape[0] >= 2
    bad = {
        "big": (writer.LongValues(lc, lv.astype(np.int64) + 70_000), "a long value is out of range"),
        "negative": (writer.LongValues(lc, -lv.astype(np.int64)), "a long value is out of range"),
        "zero": (writer.LongValues(lc, np.zeros_like(lv)), "a long value is out of range"),
        "short": (writer.LongValues(lc, lv[:-1]), "two arrays of one length"),
        "2-D": (writer.LongValues(lc[:, None], lv[:, None]), "two arrays of one length"),
        "float": (writer.LongValues(lc + 0.5, lv), "codes must be integers"),
        "unsorted": (writer.LongValues(lc[::-1].copy(), lv[::-1].copy()), "must be strictly ascending"),
        "negative codes": (writer.LongValues(-lc, lv), "code is out of range"),
        "tuple of one": ((lc,), "must be a LongValues"),
    }
    for name, (longs, message) in bad.items():
        with pytest.raises(ValueError, match=message):
            writer.write_tablebase(tmp_path / "bad.h5", records, meta, longs=longs)
        assert os.listdir(tmp_path) == [], name
    writer.write_tablebase(tmp_path / "good.h5", records, meta, longs=writer.LongValues(list(lc), list(lv)))
    k, v, _ = _contents(tmp_path / "good.h5")
    assert np.array_equal(k, keys) and np.array_equal(v, values) and v.dtype == np.dtype("<u2")


def test_dtms_too_long_for_a_byte_take_two(tmp_path, monkeypatch, lion_chick_tb):
    """Positions of DTM 5 or more stand for the long ones (254 plies or more in real builds): the
    file then stores two-byte values, equal to the one-byte file's."""
    monkeypatch.setattr(retrograde, "LONG_DTM", 5)
    result = build_tablebase(tmp_path / "wide.h5", LION_CHICK, progress=False)
    keys, values, _ = _contents(result.path)
    want_keys, want_values, _ = _contents(lion_chick_tb.path)
    assert TablebaseFile(result.path).value_dtype == np.dtype("<u2")
    assert np.array_equal(keys, want_keys) and np.array_equal(values, want_values)
    with TablebaseFile(result.path) as f:  # a probe's reads, a value at a time, the last first
        for c in range(f.chunk_count(True)):
            source = f.value_source(c)
            codes = [f.value_code(c, source, j) for j in reversed(range(len(f.values_of_chunk(c))))]
            assert codes == f.read_values(c).tolist()[::-1]
    with open_tablebase(result.path) as tb:
        assert tb.probe_dtm(LION_CHICK) == 15
        assert [m.move for m in tb.principal_variation(LION_CHICK)][:2] == ["Lb4-a3", "Cb2xb3"]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 4096 * 3 + 5, (1 << 20) + 17])
def test_value_bytes_are_moved_in_place(n):
    """The analysis's value bytes leave its cells in place (their first half), against numpy's
    copy of the strided bytes; the cells' memory is used, so no second array is held."""
    rng = np.random.default_rng(n)
    cells = rng.integers(0, 1 << 16, n).astype(np.uint16)
    want = cells.view(np.uint8)[0::2].copy()
    out = retrograde.contiguous_values(retrograde.value_bytes(cells))
    assert out.flags.c_contiguous and np.shares_memory(out, cells) and np.array_equal(out, want)
    other = rng.integers(0, 256, 2 * n).astype(np.uint8)[::2]  # strided, but no cells: copied
    copied = retrograde.contiguous_values(other)
    assert np.array_equal(copied, other) and (n == 1 or not np.shares_memory(copied, other))  # (one byte: contiguous)


def test_the_counters_half_goes_back_to_the_system():
    """Once the value bytes are moved, the cells' second half leaves the process's resident
    memory (what lets a build's records count one byte a slot for the values, not three)."""
    cells = np.ones(64 << 20, np.uint16)  # 128 MiB, every page touched
    before = memory.resident_memory()
    values = retrograde.contiguous_values(retrograde.value_bytes(cells))
    assert before - memory.resident_memory() > 48 << 20, (before, memory.resident_memory())
    assert values.shape == (64 << 20,) and values[0] == 1 and values[-1] == 1


def test_an_analysis_that_does_not_fit_the_counts_found_says_by_how_much(tmp_path, small_tables, monkeypatch):
    """A start of unknown counts within a budget that its enumeration fits but whose analysis the
    positions found do not: one line that says how many were found, what the analysis needs and
    by how much to raise --max-memory (it said 'for a table ... before their count is known',
    with no figure to raise by, after the enumeration had counted them); nothing is left behind."""
    real = memory.Sizes.retrograde

    def retrograde(sizes, nonterminal, spilled=False):  # (an analysis bigger than the enumeration: as a 4x4 start's)
        return 1_000_000 if nonterminal == 11_711 else real(sizes, nonterminal, spilled)

    monkeypatch.setattr(memory.Sizes, "retrograde", retrograde)
    with pytest.raises(memory.InsufficientMemoryError) as refused:
        build_tablebase(tmp_path / "small.h5", LION_CHICK, progress=False, max_memory=memory.BASE_MEMORY + 800_000,
                        work_dir=tmp_path / "work", spill=True)
    assert str(refused.value) == (
        "the retrograde analysis of the 11,711 non-terminal positions found needs at least 328,657 KiB of memory "
        "(the table, a value and a counter byte a position, its buffers and 320 MiB for the interpreter and the "
        "kernels, its lists spilled to disk), but the budget is 328,461 KiB (--max-memory); free some memory or raise "
        "--max-memory "
        "by 196 KiB at least"), str(refused.value)  # (in KiB: both are 321 MiB; 195.3 KiB missing, said rounded up)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
