"""A part's log positions as the bytes the store holds: appended in order, counted after a position."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from projections.packed.positions import NONE, appended, count_after


@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=20), st.integers(-(2**63), 2**63 - 1))
def test_positions_are_little_endian_in_order_and_counted_after_a_position(at: list[int], position: int) -> None:
    held = NONE
    for value in at:
        held = appended(held, value)
    assert held == struct.pack(f"<{len(at)}q", *at)
    assert count_after(held, position) == sum(1 for value in at if value > position)
