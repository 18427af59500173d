"""The compact hash tables of the encoding layer against Python sets."""

import numpy as np
import pytest

from dobutsu_tb.encoding import compact, compact_layout, compact_set

BITS, SHIFT = 44, 19


def random_keys(n, seed=0, dup=0.3):
    rng = np.random.default_rng(seed)
    codes = rng.integers(1, 1 << BITS, n, dtype=np.int64)
    # cluster some codes so that home slots collide, and repeat some keys
    codes[: n // 4] = (codes[: n // 4] & ~0xFFFF) | 1
    keys = codes << SHIFT
    return np.concatenate([keys, rng.choice(keys, int(n * dup))])


def test_hash_is_a_bijection_on_codes():
    layout = compact_layout.make_layout(BITS, SHIFT, 20, 2)
    keys = random_keys(5000)
    for k in keys[:2000]:
        h = compact_layout.key_hash(k, layout)
        assert 0 <= h < 1 << BITS
        assert compact_layout.hash_key(h, layout) == k
    hashes = {int(compact_layout.key_hash(k, layout)) for k in keys}
    assert len(hashes) == len(set(keys.tolist()))


@pytest.mark.parametrize("shards", [1, 2, 4])
def test_table_holds_exactly_the_inserted_keys(shards):
    keys = random_keys(20000, seed=shards)
    table = compact.CompactTable(1000, BITS, SHIFT, n_shards=shards)  # forces several grows
    slots, new = table.insert(keys)
    distinct = set(keys.tolist())
    assert len(table) == len(distinct) == int(new.sum())
    assert sorted(table.keys().tolist()) == sorted(distinct)
    # each key sits in its slot, the slot gives the key back, absent keys are absent
    for k, s in zip(keys[:3000], slots[:3000]):
        assert s >= 0 and compact.table_key_at(table.slots, table.layout, s) == k
    absent = random_keys(2000, seed=99, dup=0)
    absent = absent[~np.isin(absent, keys)]
    assert (table.lookup(absent) == -1).all()
    assert (table.lookup(keys) == slots).all()


@pytest.mark.parametrize("capacity,shards,bits", [(3 << 16, 1, 34), (5 << 14, 2, 34), (100_000 // 4096 * 4096, 4, 34),
                                                  (3 << 16, 2, 50), (1 << 17, 2, 34)])
def test_a_dense_table_holds_exactly_the_inserted_keys(capacity, shards, bits):
    """A table of any number of slots a shard (short codes, for displacement fields wide enough
    for 85 %; the 50-bit codes take uint64 slots): filled to 85 %, every key in its slot, the slot
    giving back the key, the home slot where its probe starts, absent keys absent."""
    rng = np.random.default_rng(capacity + shards)
    codes = np.unique(rng.integers(1, 1 << bits, int(capacity * 0.85), dtype=np.int64))
    shift = 63 - bits - 1
    keys = codes << shift
    table = compact.CompactTable(1, bits, shift, 0.95, shards, capacity=capacity)
    layout = table.layout
    assert table.capacity == capacity
    dense = capacity // shards & (capacity // shards - 1) != 0
    assert (layout[compact_layout.L_TAG_BITS] == layout[compact_layout.L_R] + 1) == dense
    assert compact.is_dense(table.slots) == dense
    slots, new = (np.concatenate(parts) for parts in zip(*(table.insert(keys[i:i + 1000])
                                                          for i in range(0, keys.size, 1000))))
    assert table.capacity == capacity and new.all() and len(table) == keys.size  # it did not grow
    assert len(np.unique(slots)) == keys.size
    assert sorted(table.keys().tolist()) == sorted(keys.tolist())
    assert (table.keys_at(slots) == keys).all()
    hashes = table.hashes(keys)
    homes = np.array([compact.table_home(table.slots, layout, h) for h in hashes[:5000]])
    per = capacity // shards
    assert ((homes // per) == np.array([compact_layout.shard_of(h, layout) for h in hashes[:5000]])).all()
    assert ((slots[:5000] - homes) % per < 5000).all()  # probing starts at home, wraps in the shard
    absent = (np.unique(rng.integers(1, 1 << bits, 5000, dtype=np.int64)) << shift)
    absent = absent[~np.isin(absent, keys)]
    assert (table.lookup(absent) == -1).all()
    remap = table.grow(2 * keys.size)
    assert (remap[slots] == table.lookup(keys)).all() and table.capacity & (table.capacity - 1) == 0


def test_dense_table_sizes():
    assert compact.dense_table_slots(1_000_000, 0.85, 2, BITS) == 1_179_648  # 2 x 144 x 4096
    assert compact.table_nbytes(1_000_000, BITS, 0.85, 2, dense=True) == 4 * 1_179_648
    assert compact.table_nbytes(1_000_000, BITS, 0.75, 2) == 4 << 21
    with pytest.raises(ValueError):
        compact_layout.make_table_layout(BITS, SHIFT, 3 << 32, 1)


def test_table_grows_when_displacements_overflow():
    # 2**16 slots with 28-bit remainders leave 4 bits of displacement: runs overflow early.
    table = compact.CompactTable(10, BITS, SHIFT, slot_bits=16)
    keys = random_keys(40000, seed=3, dup=0)
    table.insert(keys)
    assert table.capacity > 1 << 16
    assert sorted(table.keys().tolist()) == sorted(set(keys.tolist()))


def test_grow_remaps_slots():
    keys = random_keys(3000, seed=4, dup=0)
    table = compact.CompactTable(4000, BITS, SHIFT, n_shards=2)
    before, _ = table.insert(keys)
    remap = table.grow(100000)
    assert (remap[before] == table.lookup(keys)).all()


@pytest.mark.parametrize("shards", [1, 2, 4])
def test_set_counts_distinct_keys(shards):
    keys = random_keys(30000, seed=10 + shards)
    s = compact_set.CompactSet(500, BITS, SHIFT, n_shards=shards)  # grows several times
    added = s.add(keys)
    assert len(s) == len(set(keys.tolist())) == int(added.sum())
    assert int(s.add(keys).sum()) == 0  # all present now
    more = random_keys(5000, seed=77, dup=0)
    fresh = len(set(more.tolist()) - set(keys.tolist()))
    assert int(s.add(more).sum()) == fresh and len(s) == len(set(keys.tolist()) | set(more.tolist()))


def test_set_entry_width_follows_the_remainder():
    # 147 M keys (the standard game's terminal positions) at 85 %: 2**23 buckets of 21 entries
    # (a power of two a shard: 21 remainder bits and 3 of displacement, 3 bytes), 512 MiB
    s = compact_set.CompactSet(147_000_000, BITS, SHIFT, load_factor=0.85, n_shards=2)
    assert s.entry_bytes == 3 and s.buckets == 2**23 and s.capacity == 21 * 2**23
    assert s.nbytes == 2**29 + 2 * 2**20 * 8  # and a stash of 2**20 slots a shard
    assert s.buf.ctypes.data % 64 == 0  # buckets on cache lines
    # 100 M keys at 75 %: 6.3 M buckets, not a power of two: a preimage bit, 21 remainder bits and
    # 3 of displacement would take 4 bytes (15 a bucket, more bytes than 2**23 buckets of 3), so
    # the displacement takes 2 bits (up to 3 buckets on; 21 % fewer bytes)
    s = compact_set.CompactSet(100_000_000, BITS, SHIFT, load_factor=0.75)
    assert (s.buckets, s.entry_bytes, s.disp_bits) == (6_349_312, 3, compact_set.SET_DISP_BITS_SHORT)
    # half the 5x3 game's terminal positions (two partitions): 3.3 GiB, not 4.1 (2**26 buckets)
    assert compact_set.set_geometry(958_977_116, 0.85, 2, 47) == (53_724_672, compact_set.SET_DISP_BITS_SHORT)
    assert compact_set.set_geometry(1_917_954_233, 0.85, 2, 47) == (107_448_832, compact_set.SET_DISP_BITS)
    assert compact_set.CompactSet(1000, BITS, SHIFT).entry_bytes == 5  # 2**12 buckets: 32 + 3 bits


@pytest.mark.parametrize("buckets,shards", [(1 << 12, 1), (3 << 11, 1), (5 << 10, 2), (100_000 // 21, 4),
                                            (7 << 9, 4)])
def test_a_set_of_any_size_gives_back_its_hashes(buckets, shards):
    """Sets of any number of buckets (a power of two a shard or not) hold every key once and
    give back exactly the hashes added, from each entry's bucket, displacement, preimage bit and
    remainder; full to 93 %, so that many keys land past their home bucket."""
    buckets -= buckets % shards
    disp_bits = compact_set.SET_DISP_BITS_SHORT if buckets % 3 == 0 else compact_set.SET_DISP_BITS
    layout = compact_layout.make_set_layout(BITS, SHIFT, buckets, shards, disp_bits)
    s = compact_set.CompactSet(1, BITS, SHIFT, load_factor=0.95, n_shards=shards)
    s.disp_bits = disp_bits
    s._allocate(buckets)
    assert (s.layout == layout).all() and s.buckets == buckets
    keys = np.unique(random_keys(int(0.93 * s.capacity), seed=buckets + shards, dup=0))
    hashes = compact_layout.hash_keys(keys, s.layout)
    out = np.zeros(len(hashes), np.int64)
    assert compact_set._set_add_many(s.buf, s.layout, shards, s.counts, hashes, out) == 0  # all fitted
    assert out.sum() == len(keys) == len(s)
    assert compact_set._set_add_many(s.buf, s.layout, shards, s.counts, hashes[::7], out[::7]) == 0
    assert out[::7].sum() == 0 and len(s) == len(keys)
    assert sorted(s.hashes().tolist()) == sorted(hashes.tolist())


def _one_home(layout):
    """``reach + 1`` hashes that share one home (t = 5), where ``reach`` is what its buckets up to
    the largest displacement and the stash hold (consecutive hashes fill the stash in order)."""
    reach = (int(layout[compact_layout.L_DISP_MAX]) + 1) * int(layout[compact_layout.L_BUCKET_ENTRIES])
    reach += int(layout[compact_layout.L_STASH])
    return reach, (np.int64(5) << int(layout[compact_layout.L_R])) + np.arange(1, reach + 2, dtype=np.int64)


def test_a_full_stash_asks_to_grow():
    """Keys that all share a home fill its buckets, then the stash; the next one finds no room
    (-1, nothing changed), and the set grows and keeps them all."""
    s = compact_set.CompactSet(1, BITS, SHIFT, n_shards=1)
    reach, hashes = _one_home(s.layout)
    out = np.zeros(len(hashes), np.int64)
    assert compact_set._set_add_many(s.buf, s.layout, 1, s.counts, hashes[:-1], out[:-1]) == 0
    assert out[:-1].sum() == reach == len(s)
    assert compact_set.set_add(s.buf, s.layout, int(hashes[-1])) == -1
    assert compact_set.set_add(s.buf, s.layout, int(hashes[7])) == 0
    assert s.add_hashes(hashes)[-1] == 1 and len(s) == reach + 1
    assert sorted(s.hashes().tolist()) == hashes.tolist()


def test_keys_added_before_the_set_grew_count_as_new():
    """One batch whose last key finds no room: the set grows and adds the batch again, and
    every key of it still counts as new (the first attempt added all but the last)."""
    s = compact_set.CompactSet(1, BITS, SHIFT, n_shards=1)
    reach, hashes = _one_home(s.layout)
    new = s.add_hashes(np.concatenate([hashes, hashes[:3]]))
    assert s.buckets > 4096 and len(s) == reach + 1  # it grew
    assert new[:-3].tolist() == [1] * (reach + 1) and new[-3:].tolist() == [0, 0, 0]


def test_a_set_that_cannot_grow_is_unchanged(monkeypatch):
    """Growth that fails (no memory; or no more hash bits) leaves the set as it was."""
    s = compact_set.CompactSet(1000, 20, SHIFT, n_shards=2)
    keys = random_keys(5000, seed=3) & ((1 << (20 + SHIFT)) - 1)
    keys = keys[keys != 0]
    s.add(keys)
    before = (s.buckets, len(s), sorted(s.hashes().tolist()))

    def no_memory(buckets, disp_bits):
        raise MemoryError
    with monkeypatch.context() as m:
        m.setattr(s, "_empty", no_memory)
        with pytest.raises(MemoryError):
            s.grow(10**6)
    assert (s.buckets, len(s), sorted(s.hashes().tolist())) == before
    with monkeypatch.context() as m:
        m.setattr(compact_set, "_set_rehash", lambda *args: 1)  # never fits: doubles up to the limit
        with pytest.raises(compact_set.CompactTableFullError):
            s.grow(10**5)
    assert (s.buckets, len(s), sorted(s.hashes().tolist())) == before
    assert s.add(keys).sum() == 0


@pytest.mark.parametrize("expected,width", [(200_000, 2), (900_000, 1)])
def test_short_hashes_make_narrow_entries_sized_as_such(expected, width):
    """20-bit codes leave few remainder bits: entries of 2 bytes (31 a bucket) or 1 (63), and the
    set is sized by those counts, not as if 21 fitted a bucket; every key is held and given back."""
    s = compact_set.CompactSet(expected, 20, 0, load_factor=0.85)
    assert s.entry_bytes == width and s.capacity == s.buckets * (63 // width)
    # never more buckets than 2-byte entries need (not 21 a bucket; 1-byte entries need a power
    # of two, which may still be fewer bytes)
    assert s.buckets < 1.1 * max(expected / 0.85 / 31, compact_set.MIN_SET_BUCKETS)
    keys = np.random.default_rng(width).choice(np.arange(1, 1 << 20), expected, replace=False)
    assert s.add(keys).sum() == expected == len(s)
    assert sorted(s.hashes().tolist()) == sorted(compact_layout.hash_keys(keys, s.layout).tolist())


def test_a_set_grows_from_any_size():
    s = compact_set.CompactSet(70_000, BITS, SHIFT, load_factor=0.85, n_shards=2)
    assert s.capacity & (s.capacity - 1)  # not a power of two
    keys = random_keys(400_000, seed=12)
    s.add(keys)
    want = set(compact_layout.hash_keys(keys, s.layout).tolist())
    assert len(s) == len(want) and set(s.hashes().tolist()) == want and s.capacity >= len(want) / 0.85


def test_bad_keys_are_refused():
    table = compact.CompactTable(10, BITS, SHIFT)
    with pytest.raises(ValueError):
        table.insert([12345])  # not a multiple of 2**19
    with pytest.raises(ValueError):
        table.insert([0])


def test_fletcher32_matches_hdf5(tmp_path):
    """Our Fletcher-32 is the one HDF5's filter stores (chunks of every length parity)."""
    import h5py

    from dobutsu_tb.encoding.checksums import checksums

    rng = np.random.default_rng(5)
    with h5py.File(tmp_path / "f.h5", "w") as f:
        for k, n in enumerate((1, 2, 3, 359, 360, 361, 720, 4099, 20000)):
            data = rng.integers(0, 256, n).astype(np.uint8)
            if k % 3 == 0:
                data[:] = 255  # long runs of 0xFFFF words: the 32-bit sums wrap around
            f.create_dataset(f"d{k}", data=data, chunks=(n,), fletcher32=True)
    with h5py.File(tmp_path / "f.h5", "r") as f:
        chunks = [f[name].id.read_direct_chunk((0,))[1] for name in sorted(f)]
    ours = checksums([c[:-4] for c in chunks])
    assert [int.from_bytes(c[-4:], "little") for c in chunks] == ours.tolist()


def test_find_bytes_equals_a_plain_scan():
    from dobutsu_tb.encoding.bits import find_bytes

    rng = np.random.default_rng(0)
    for trial in range(400):
        size = int(rng.integers(0, 300 if trial < 200 else 3000))
        data = rng.integers(0, 4, size).astype(np.uint8)
        if trial % 2:  # sparse: whole cache lines without a match
            data[rng.random(size) < (0.9 if trial < 200 else 0.998)] = 0
        if trial % 5 == 0:  # the enumeration's byte, 255 (a pattern of all ones), and 128 (only a top bit)
            data[data == 3] = 255 if trial % 10 else 128
            value = 255 if trial % 10 else 128
        else:
            value = int(rng.integers(0, 4))
        start, cap = int(rng.integers(0, size + 1)), int(rng.integers(1, 50))
        out, got, pos = np.empty(cap, np.int64), [], start
        while True:
            n, pos = find_bytes(data, value, pos, out)
            got += out[:n].tolist()
            if n == 0:
                break
        assert got == [i for i in range(start, size) if data[i] == value]
