"""The shared encoding layer: keys, the hash table, position text forms."""

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import naive
from conftest import VARIANTS, jitted, plain
from dobutsu_tb.encoding.hashtable import HashTable, HashTableFullError
from dobutsu_tb.tablebase.game.game import game_of
from dobutsu_tb.tablebase.game.position import GOTE, SENTE, Position, PositionError
from dobutsu_tb.tablebase.game.variant import get_variant

# --- keys ----------------------------------------------------------------------------------

GAME = game_of()


def _arrays(states):
    return [s[0] for s in states], [s[1] for s in states]


@st.composite
def positions(draw, variant="dobutsu"):
    seed = draw(st.integers(0, 2**32 - 1))
    game = naive.load_game(variant)
    pieces = [x for x, n in game.army.items() if x != game.royal for _ in range(n)]
    material = draw(st.lists(st.sampled_from(pieces), max_size=len(pieces)).filter(
        lambda m: all(m.count(p) <= game.army[p] for p in set(m))))
    npos = naive.random_position(random.Random(seed), game, tuple(material))
    return Position.from_text(npos.text(), get_variant(variant))


def test_start_key_bits_by_hand():
    # a1 g:1011 b1 l:1101 c1 e:1001 a2 -:0 b2 c:11101 c2 0 a3 0 b3 C:11100 c3 0
    # a4 E:1000 b4 L:1100 c4 G:1010, then six empty hand counts 000000.
    bits = "1011" "1101" "1001" "0" "11101" "0" "0" "11100" "0" "1000" "1100" "1010" "000000"
    assert GAME.encode(*_arrays([Position.start().state()]), fold_mirror=False)[0] == int(bits, 2) << (63 - len(bits))


def test_5x3_start_key_bits_by_hand():
    # The standard start with an empty rank 3 (three more 0 bits): a key of 47 bits at most.
    bits = "1011" "1101" "1001" "0" "11101" "0" "000" "0" "11100" "0" "1000" "1100" "1010" "000000"
    game = game_of(get_variant("dobutsu-5x3"))
    assert game.layout["MAX_KEY_BITS"] == 47
    start = Position.start(game.variant)
    assert game.encode(*_arrays([start.state()]), fold_mirror=False)[0] == int(bits, 2) << (63 - len(bits))


@pytest.mark.parametrize("variant", VARIANTS)
@given(data=st.data())
@settings(max_examples=100, deadline=None)
def test_key_round_trip(variant, data):
    pos = data.draw(positions(variant))
    game = pos.game
    state = pos.state()
    key = game.encode(*_arrays([state]), fold_mirror=False)[0]
    assert 0 < key < 2**63
    assert key & ((1 << (63 - game.layout["MAX_KEY_BITS"])) - 1) == 0
    boards, hands = game.decode([key])
    assert (int(boards[0]), int(hands[0])) == state
    assert Position.from_key(int(pos.key()), pos.variant).key() == pos.key()


@pytest.mark.parametrize("variant", VARIANTS)
@given(data=st.data())
@settings(max_examples=100, deadline=None)
def test_canonical_key_ignores_mirror_and_orientation(variant, data):
    pos = data.draw(positions(variant))
    k = pos.key()
    assert pos.mirror().key() == k
    assert k == min(pos.game.encode(*_arrays([pos.state(), pos.mirror().state()]), fold_mirror=False))
    # The same position seen from the other side, with the other side to move, is the same
    # normalised position.
    flipped = Position.from_state(pos.state(), 1 - pos.turn, pos.variant)
    assert flipped.key() == k
    assert Position.from_state(pos.state(), pos.turn, pos.variant) == pos


@given(positions())
@settings(max_examples=200, deadline=None)
def test_flip_and_mirror_are_involutions(pos):
    b, h = pos.state()
    for k in (jitted(GAME), plain(GAME)):
        assert tuple(map(int, k.flip_state(*k.flip_state(b, h)))) == (b, h)
        assert tuple(map(int, k.mirror_state(*k.mirror_state(b, h)))) == (b, h)


def test_decode_rejects_invalid_key():
    with pytest.raises(ValueError, match="not a valid position key"):
        GAME.decode([(1 << 62) | (1 << 20) | 12345 << 19])
    with pytest.raises(PositionError, match="not the key of a dobutsu position"):
        Position.from_key((1 << 62) | (1 << 20) | 12345 << 19)
    key = Position.start().key()
    assert Position.from_key(np.int64(key)).key() == key  # a numpy integer is a key
    for bad in (key + 0.5, float(key), str(key), None, False):  # int() would have read the first two
        with pytest.raises(PositionError, match="a key is an integer"):
            Position.from_key(bad)
    with pytest.raises(PositionError, match="0x0 is not the key of a dobutsu position"):
        Position.from_key(0)  # an empty board (it said "Sente has 0 lions on the board")


def test_encode_rejects_invalid_state():
    with pytest.raises(ValueError, match="invalid packed state"):
        GAME.encode([6], [0])  # nibble 6 is no piece
    with pytest.raises(ValueError, match="one-dimensional"):
        GAME.encode([[1]], [[0]])


# --- hash table ----------------------------------------------------------------------------


@pytest.mark.parametrize("shards", [1, 2, 3])
def test_hash_table_matches_python_set(shards):
    rng = np.random.default_rng(shards)
    keys = rng.integers(1, 1 << 40, 50_000) << 19
    keys = np.concatenate([keys, keys[:1000]])  # duplicates
    table = HashTable(100, n_shards=shards)  # grows several times
    slots, new = table.insert(keys)
    assert len(table) == len(set(keys.tolist()))
    assert new.sum() == len(table)
    assert np.array_equal(table.table[table.lookup(keys)], keys)
    assert set(table.keys().tolist()) == set(keys.tolist())
    missing = rng.integers(1, 1 << 40, 1000) << 19
    missing = missing[~np.isin(missing, keys)]
    assert (table.lookup(missing) == -1).all()
    assert int(keys[0]) in table and int(missing[0]) not in table
    assert np.array_equal(table.occupied(), np.flatnonzero(table.table))


def test_hash_table_grow_returns_slot_map():
    table = HashTable(10)
    keys = np.arange(1, 9, dtype=np.int64) << 19
    slots, _ = table.insert(keys)
    remap = table.grow(1000)
    assert np.array_equal(table.table[remap[slots]], keys)
    assert table.capacity > 1000


def test_hash_table_errors():
    with pytest.raises(ValueError, match="positive"):
        HashTable(10).insert([0])
    with pytest.raises(ValueError, match="load factor"):
        HashTable(10, load_factor=1.5)
    table = HashTable(10)
    with pytest.raises(HashTableFullError, match="cannot grow: hash table is full"):
        table.grow(1 << 40)


# --- position text forms -------------------------------------------------------------------


@given(positions())
@settings(max_examples=200, deadline=None)
def test_text_forms_round_trip(pos):
    assert Position.from_text(pos.text()) == pos
    assert Position.from_fen(pos.fen()) == pos
    assert eval(repr(pos)) == pos


@pytest.mark.parametrize("text, message", [
    ("gl\u00b2/1c1/1C1/ELG[-] w 0 1", "unknown piece letter '\u00b2'"),  # str.isdigit() is true for '²'
    ("gle/1c1/1C1/EL\u0662[-] w 0 1", "unknown piece letter"),  # an Arabic-Indic two
    ("S/gle/-c-/-C-/ELG/", "the hand field is empty"),
    ("S/gle/-c-/-C-/ELG/-x", "the hand field '-x' mixes '-' with pieces"),
    ("S/g\u0131e/-c-/-C-/ELG/-", "unknown piece letter"),  # a dotless i, upper-cased to I
    ("S/gle/-c-/-C-/ELG/-" + " " * 200, "at most 100 characters"),
])
def test_position_text_is_read_strictly(text, message):
    with pytest.raises(PositionError, match=message):
        Position.from_fen(text) if "[" in text else Position.from_text(text)


def test_start_position_forms():
    start = Position.start()
    assert start.text() == "S/gle/-c-/-C-/ELG/-"
    assert start.fen() == "gle/1c1/1C1/ELG[-] w 0 1"
    assert start.turn == SENTE


SEED_DIAGRAM = """
H:0 Z:0 K:0
 .  . *L
 H *H  .
 .  .  L
 .  .  .
H:0 Z:0 K:0
"""


def test_seed_diagram():
    pos = Position.from_diagram(SEED_DIAGRAM, turn=GOTE)
    assert pos.text() == "G/--l/Cc-/--L/---/-"
    # The seed's diagram after Lb4-c3 Cb2xb3 Lc3xb3: a chick in each hand.
    hands = Position.from_diagram("H:1 Z:0 K:0\n . *L  .\n .  .  .\n .  L  .\n .  .  .\nH:1 Z:0 K:0", GOTE)
    assert hands.text() == "G/-l-/---/-L-/---/Cc"
    assert hands.hands == (1, 0, 0, 1, 0, 0)


@pytest.mark.parametrize("text,message", [
    ("S/gle/-c-/-C-/ELG", "expected 6 fields"),
    ("X/gle/-c-/-C-/ELG/-", "side to move must be"),
    ("S/gle/-c-/-C-/EL/-", "rank 4 must have 3 cells"),
    ("S/gle/-c-/-C-/EGG/-", "Sente has 0 lions"),
    ("S/gle/-c-/-C-/ELL/-", "Sente has 2 lions"),
    ("S/gle/-c-/-C-/ELG/C", "3 chicks"),
    ("S/gle/-c-/-C-/ELG/L", "cannot be in hand"),
    ("S/gle/-c-/-C-/ELG/R", "cannot be in hand"),
    ("S/gle/-x-/-C-/ELG/-", "unknown piece letter"),
    ("S/gle/Ec-/-C-/ELG/-", "3 elephants"),
])
def test_position_errors(text, message):
    with pytest.raises(PositionError, match=message):
        Position.from_text(text)


def test_diagram_errors():
    with pytest.raises(PositionError, match="6 non-blank lines"):
        Position.from_diagram("H:0 Z:0 K:0")
    with pytest.raises(PositionError, match="unknown piece"):
        Position.from_diagram(SEED_DIAGRAM.replace("*H", "*Q"))
    with pytest.raises(PositionError, match="hand line"):
        Position.from_diagram(SEED_DIAGRAM.replace("H:0 Z:0 K:0", "H:0", 1))


# --- wide bit sets ---------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 255), max_size=80), st.lists(st.integers(0, 255), max_size=40))
def test_wide_bit_sets_match_python_sets(adds, removes):
    """The wide_* helpers over 4 words agree with a Python set; popcount_word and
    lowest_bit_word agree with int arithmetic on every word."""
    from dobutsu_tb.encoding import bits

    m = np.zeros((2, 4), np.int64)
    expected = set()
    for x in adds:
        bits.wide_add(m, 1, x)
        expected.add(x)
    for x in removes:
        bits.wide_remove(m, 1, x)
        expected.discard(x)
    assert {x for x in range(256) if bits.wide_has(m, 1, x)} == expected
    assert bits.wide_count(m, 1) == len(expected) and bits.wide_empty(m, 1) == (not expected)
    assert bits.wide_empty(m, 0)
    bits.wide_copy(m, 1, m, 0)
    assert (m[0] == m[1]).all()
    for w in range(4):
        word = int(m[1, w]) & ((1 << 64) - 1)
        assert bits.popcount_word(m[1, w]) == bin(word).count("1")
        if word:
            assert bits.lowest_bit_word(m[1, w]) == (word & -word).bit_length() - 1


# --- sorting -------------------------------------------------------------------------------


def _runs(n, cuts):
    return np.array([0, *sorted(c % (n + 1) for c in cuts), n], np.int64)


@pytest.fixture(params=["radix", "numpy"])
def sort_method(request, monkeypatch):
    """Each of encoding.sorting's two ways, whichever this host's timing would pick."""
    from dobutsu_tb.encoding import sorting

    monkeypatch.setattr(sorting, "METHOD", request.param)
    return request.param


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=st.lists(st.integers(-2**63, 2**63 - 1), max_size=400), cuts=st.lists(st.integers(0, 10**6), max_size=4),
       low_bits=st.sampled_from([0, 8, 40, 56]))
def test_sort_runs_is_numpys_sort_run_by_run(sort_method, items, cuts, low_bits):
    """encoding.sorting.sort_runs (the build's sort) against np.sort: int64 with its sign, uint64
    up to the top bit, and items alike in their high bits or low bits (a key range's records, a
    window's keys above their slots), run by run."""
    from dobutsu_tb.encoding.sorting import sort_runs

    signed = np.array(items, np.int64)
    if low_bits:  # items differing only in a few middle bits, the rest alike (runs of equal digits)
        signed = (signed >> np.int64(64 - low_bits)) << np.int64(9)
    for a in (signed, signed.view(np.uint64)):
        starts = _runs(a.shape[0], cuts)
        want = a.copy()
        for r in range(starts.shape[0] - 1):
            want[starts[r]:starts[r + 1]].sort()
        got = a.copy()
        sort_runs(got, starts)
        assert np.array_equal(got, want)


def test_sort_runs_on_big_runs_and_its_errors(sort_method, monkeypatch):
    """Runs long enough for both of the radix sort's ways (a bucket buffer of 2**12 items: the
    American flag sort above it, the least significant digit first below), with many repeats;
    and one-line errors for what it cannot sort."""
    from dobutsu_tb.encoding import sorting
    from dobutsu_tb.encoding.sorting import even_starts, sort_runs

    monkeypatch.setattr(sorting, "_LSD_ITEMS", 1 << 12)
    rng = np.random.default_rng(7)
    a = np.concatenate([rng.integers(0, 2**62, 1 << 18), rng.integers(0, 1000, 1 << 18),
                        (rng.integers(0, 2**20, 1 << 17) << 32) | 5]).astype(np.int64)
    starts = even_starts(a.shape[0], 3)
    assert starts.tolist() == [0, 218454, 436908, 655360]
    want = np.concatenate([np.sort(a[starts[r]:starts[r + 1]]) for r in range(3)])
    sort_runs(a, starts)
    assert np.array_equal(a, want)
    with pytest.raises(ValueError, match="int64 or uint64"):
        sort_runs(np.zeros(4, np.int32), [0, 4])
    with pytest.raises(ValueError, match="int64 or uint64"):
        sort_runs(np.zeros(8, np.int64)[::2], [0, 4])
    with pytest.raises(ValueError, match="ascend from 0 to 4"):
        sort_runs(np.zeros(4, np.int64), [0, 3, 2, 4])
    with pytest.raises(ValueError, match="ascend from 0 to 4"):
        sort_runs(np.zeros(4, np.int64), [0, 3])
    with pytest.raises(ValueError, match="int64 or uint64"):
        sort_runs([3, 2, 1], [0, 3])
    with pytest.raises(ValueError, match="must be integers, not float64"):
        sort_runs(np.zeros(4, np.int64), [0.0, 2.5, 4.0])


@settings(max_examples=200, deadline=None)
@given(items=st.lists(st.integers(-2**63, 2**63 - 1), max_size=60), probes=st.lists(st.integers(-2**63, 2**63 - 1),
       max_size=10), repeat=st.integers(1, 3))
def test_lower_bound_is_numpys_searchsorted(items, probes, repeat):
    """encoding.sorting.lower_bound (the kernels' binary search) against np.searchsorted on the
    left: repeated items, probes below, between, on and above them, and an empty array."""
    from dobutsu_tb.encoding.sorting import lower_bound

    a = np.sort(np.repeat(np.array(items, np.int64), repeat))
    for x in [*probes, *items, -2**63, 2**63 - 1]:
        assert lower_bound(a, np.int64(x)) == np.searchsorted(a, np.int64(x))


def test_the_sort_method_is_the_faster_one(monkeypatch):
    """sort_method times numpy's sort and the radix sort once, on the same keys, and keeps the
    faster for the process."""
    from dobutsu_tb.encoding import sorting

    monkeypatch.setattr(sorting, "METHOD", None)
    numpy_s, radix_s = sorting._time_sorts(1 << 12)
    assert numpy_s > 0 and radix_s > 0
    for times, want in (((2.0, 1.0), "radix"), ((1.0, 2.0), "numpy")):
        monkeypatch.setattr(sorting, "METHOD", None)
        monkeypatch.setattr(sorting, "_time_sorts", lambda times=times: times)
        assert sorting.sort_method() == want and sorting.sort_method() == want
