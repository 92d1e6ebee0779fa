"""The redelivery index: an event is new unless its whole 128-bit fingerprint is kept,
whatever the index's `hi` halves share."""

from __future__ import annotations

import random
import struct
from hashlib import blake2b

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.applied import (
    NARROW_KEYS,
    PAIR,
    AppliedEvents,
    Keys,
    KeySet,
    _key,
    digest_of_id,
    fingerprint,
    his,
    holds,
    pair_count,
    pairs_with,
    with_pair,
)
from projections.run import Outcome, RunState, apply, rederive
from tests.builders import score
from tests.native import native

HI = 0x1234_5678_9ABC_DEF1


def kept(*pairs: tuple[int, int]) -> bytes:
    return b"".join(PAIR.pack(hi, lo) for hi, lo in pairs)


class Part:
    """A part's kept fingerprints, as a task holds them: made anew by each event."""

    def __init__(self) -> None:
        self.pairs = kept()

    def keep(self, hi: int, lo: int) -> None:
        self.pairs = with_pair(self.pairs, hi, lo)

    def add_to(self, index: AppliedEvents, hi: int, lo: int) -> bool:
        return index.add(hi, lo, self.pairs, lambda: [self.pairs])

    def contained(self, index: AppliedEvents, hi: int, lo: int) -> bool:
        return index.contains(hi, lo, self.pairs, lambda: [self.pairs])


def test_kept_pairs_are_little_endian_in_order() -> None:
    pairs = with_pair(with_pair(kept(), HI, 2), 3, 2**64 - 1)
    assert pairs == struct.pack("<QQQQ", HI, 2, 3, 2**64 - 1)
    assert pair_count(pairs) == 2
    assert list(his(pairs)) == [HI, 3]


@given(
    st.binary(max_size=64).map(lambda data: data[: len(data) // 16 * 16]),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**64 - 1),
)
def test_the_compiled_append_of_a_pair_is_the_python_one(pairs: bytes, hi: int, lo: int) -> None:
    assert with_pair is native().with_pair
    assert with_pair(pairs, hi, lo) == pairs_with(pairs, hi, lo) == pairs + struct.pack("<QQ", hi, lo)


def test_fingerprints_sharing_hi_are_distinct_events() -> None:
    index, own = AppliedEvents(), Part()
    assert own.add_to(index, HI, 1)
    own.keep(HI, 1)
    assert own.add_to(index, HI, 2)
    own.keep(HI, 2)
    assert not own.add_to(index, HI, 1)
    assert not own.add_to(index, HI, 2)
    assert own.add_to(index, HI, 3)


def test_a_pair_kept_by_another_part_of_the_run_is_found() -> None:
    elsewhere = kept((HI, 7))
    index = AppliedEvents.of_kept(lambda: [elsewhere], 1)
    assert index.contains(HI, 7, kept(), lambda: [kept(), elsewhere])
    assert not index.add(HI, 7, kept(), lambda: [kept(), elsewhere])
    assert not index.contains(HI, 8, kept(), lambda: [elsewhere])


def test_a_pair_is_matched_only_at_a_pair_boundary() -> None:
    # (lo of one pair, hi of the next) spells the needle's bytes without being a kept pair.
    assert not holds(kept((1, HI), (5, 9)), HI, 5)
    assert holds(kept((1, HI), (HI, 5)), HI, 5)


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), max_size=60))
def test_the_index_says_new_exactly_for_pairs_not_kept(pairs: list[tuple[int, int]]) -> None:
    """Few distinct `hi` halves, so nearly every probe meets candidates; growth included."""
    index, own, seen = AppliedEvents(), Part(), set()
    for small_hi, lo in pairs:
        hi = small_hi << 1 | 1
        assert own.add_to(index, hi, lo) is ((hi, lo) not in seen)
        if (hi, lo) not in seen:
            own.keep(hi, lo)
            seen.add((hi, lo))


@given(st.sets(st.integers(0, 2**63 - 1).map(lambda half: half << 1 | 1), min_size=1, max_size=300))
def test_an_index_that_grew_still_finds_every_pair(halves: set[int]) -> None:
    """Full-width (odd, as `fingerprint` makes them) `hi` halves through several growths of a
    table sized for 4: every kept pair is found after, and a pair not kept is not."""
    index, own = AppliedEvents(), Part()
    for hi in halves:
        assert own.add_to(index, hi, 0)
        own.keep(hi, 0)
    assert len(index) == len(halves)
    for hi in halves:
        assert own.contained(index, hi, 0)
        assert not own.contained(index, hi, 1)


def test_a_redelivery_naming_another_task_is_found_and_a_rebuilt_index_agrees() -> None:
    run = RunState("r")
    first = score("t1", "trial-1", "reward", {"score": 1.0}, run_id="r", event_id="e-1")
    assert apply(run, first).outcome is Outcome.APPLIED
    moved = score("t2", "trial-1", "reward", {"score": 1.0}, run_id="r", event_id="e-1")
    assert apply(run, moved).outcome is Outcome.REDELIVERY
    rederive(run)
    assert apply(run, first).outcome is Outcome.REDELIVERY
    assert apply(run, moved).outcome is Outcome.REDELIVERY
    other = score("t2", "trial-2", "reward", {"score": 0.0}, run_id="r", event_id="e-2")
    assert apply(run, other).outcome is Outcome.APPLIED


@given(st.text(min_size=1, max_size=200))
def test_a_fingerprint_is_the_ids_128_bit_blake2b(event_id: str) -> None:
    """What the stored form keeps: the halves of BLAKE2b-128 of the id's UTF-8, hi made odd,
    computed in compiled code (`fingerprint`) and by the Python reference alike."""
    hi, lo = struct.unpack("<QQ", blake2b(event_id.encode(), digest_size=16).digest())
    assert fingerprint(event_id) == digest_of_id(event_id) == (hi | 1, lo)


def test_the_fingerprint_is_computed_in_compiled_code_where_it_is_built() -> None:
    assert fingerprint is native().event_fingerprint
    with pytest.raises(UnicodeEncodeError):
        fingerprint("\ud800")  # not UTF-8: refused as the reference refuses it
    with pytest.raises(UnicodeEncodeError):
        digest_of_id("\ud800")


def native_keys() -> type:
    table: type = native().KeyTable
    return table


Operation = tuple[str, int]
HALVES = st.one_of(st.integers(0, 63), st.integers(0, 2**64 - 1))
"""A few `hi` halves, whose keys collide, and any 64-bit one."""
OPERATIONS = st.lists(
    st.tuples(st.sampled_from(["add", "put", "holds"]), HALVES) | st.tuples(st.just("reserve"), st.integers(0, 300)),
    max_size=200,
)


def run_on(table: KeySet, operations: list[Operation]) -> list[object]:
    said: list[object] = []
    for name, argument in operations:
        said.append((getattr(table, name)(argument), len(table), table.width))
    return said


@given(st.integers(0, 100), st.booleans(), OPERATIONS)
def test_the_compiled_key_table_does_what_the_python_one_does(
    capacity: int, wide: bool, operations: list[Operation]
) -> None:
    """Same answers, sizes and widths (so the same `table_bytes`) for any operations,
    growth included, narrow or wide."""
    native_table = native_keys()(capacity, wide)
    assert native_table.wide is wide
    assert run_on(native_table, operations) == run_on(Keys(capacity, wide), operations)


@given(st.booleans(), OPERATIONS)
def test_the_python_key_table_is_a_set_of_keys_with_puts_counted(wide: bool, operations: list[Operation]) -> None:
    """`add` places a key not held, `put` places one anyway, `holds` says whether any slot
    has it; the table holds what it was given at a load of at most 3/4."""
    table, placed = Keys(4, wide), []
    for name, hi in operations:
        key = _key(hi, wide)
        if name == "add":
            new = key not in placed
            assert table.add(hi) is new
            if new:
                placed.append(key)
        elif name == "put":
            table.put(hi)
            placed.append(key)
        elif name == "holds":
            assert table.holds(hi) is (key in placed)
        else:
            table.reserve(hi)
        assert len(table) == len(placed) <= table.width * 3 // 4


def test_a_narrow_key_is_the_top_31_bits_and_a_wide_one_the_whole_half() -> None:
    assert _key(HI, False) == HI >> 33 | 1 < 2**31
    assert _key(HI, True) == HI
    assert _key(2, True) == 3  # never 0, an empty slot


def test_past_the_narrow_keys_the_index_widens_and_still_finds_every_pair() -> None:
    """A run that grows past `NARROW_KEYS` events gets 8-byte keys, built again from what
    its parts keep (an event's part and the header here); every pair is still found, and
    its new events are new."""
    task, header = Part(), Part()
    everything = lambda: [header.pairs, task.pairs]  # noqa: E731
    halves = random.Random(5).sample(range(1, 2**63), NARROW_KEYS + 10)
    header.keep(halves[0] << 1 | 1, 0)
    index = AppliedEvents.of_kept(everything, 1)
    for half in halves[1:]:
        hi = half << 1 | 1
        assert index.add(hi, 7, task.pairs, everything)
        task.keep(hi, 7)
    assert index._keys.wide
    assert len(index) == len(halves)
    assert index.table_bytes == 8 * index._keys.width
    assert not index.add(halves[0] << 1 | 1, 0, task.pairs, everything)  # the header's
    for half in halves[1 :: len(halves) // 50]:
        assert not index.add(half << 1 | 1, 7, task.pairs, everything)
    assert index.add(halves[1] << 1 | 1, 8, task.pairs, everything)


def test_a_run_planned_past_the_narrow_keys_is_indexed_wide_from_its_start() -> None:
    small, big = AppliedEvents(), AppliedEvents()
    small.reserve(NARROW_KEYS, list)
    big.reserve(NARROW_KEYS + 1, list)
    assert (small._keys.wide, big._keys.wide) == (False, True)
    assert (small.table_bytes, big.table_bytes) == (4 * small._keys.width, 8 * big._keys.width)
    assert not AppliedEvents(NARROW_KEYS)._keys.wide
    assert AppliedEvents(NARROW_KEYS + 1)._keys.wide


def test_the_index_is_the_compiled_table_where_it_is_built() -> None:
    assert isinstance(AppliedEvents()._keys, native_keys())
