"""The redelivery index: an event is new unless its whole 128-bit fingerprint is kept,
whatever the index's `hi` halves share."""

from __future__ import annotations

import random
import struct

from hypothesis import given
from hypothesis import strategies as st

from projections.fold.redelivery import NARROW_KEYS, AppliedEvents
from projections.fold.run import Outcome, RunState, apply, rederive
from projections.kernels import with_pair
from projections.packed.fingerprints import PAIR, his, holds, pair_count
from tests.builders import score

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
