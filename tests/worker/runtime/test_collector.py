"""The worker's garbage-collector policy: full collections made rare, never turned off."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from worker.runtime.collector import FULL_EVERY, quiet_collector


@pytest.fixture
def restored() -> Iterator[None]:
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
        gc.enable()


class Node:
    other: Node | None = None


def test_full_collections_are_rare_young_ones_unchanged(restored: None) -> None:
    young, middle, _ = gc.get_threshold()
    quiet_collector()
    assert gc.get_threshold() == (young, middle, FULL_EVERY)
    assert gc.get_freeze_count() > 0  # what existed at start no longer takes part


def test_a_cycle_made_after_is_still_reclaimed_by_the_collections_the_worker_makes(restored: None) -> None:
    """No explicit collection: the cycle must go in the young collections that allocations
    set off, as in the worker (a policy that turned them off, or froze it, would keep it)."""
    young, _, _ = gc.get_threshold()
    quiet_collector()
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    assert gone() is not None  # a cycle: reference counting alone cannot free it
    allocated: list[list[None]] = []
    while gone() is not None and len(allocated) < 100 * young:
        allocated.append([])  # each a tracked container: they count towards a young collection
    assert gone() is None, f"still there after {len(allocated)} allocations"
