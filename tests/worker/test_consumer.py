"""The consumer's fence: which messages the app may handle after a rewind."""

from __future__ import annotations

from faust.types import TP
from faust.types.tuples import ConsumerMessage

from worker.consumer import _ReadOffsets, fetched_after


def _message(fence: int | None) -> ConsumerMessage:
    message = ConsumerMessage("events", 0, 7, 0.0, 0, None, b"run", b"{}", None)
    if fence is not None:
        message.fence = fence  # type: ignore[attr-defined]
    return message


def test_a_message_is_fenced_in_only_when_fetched_after_the_seek_that_made_the_fence() -> None:
    assert fetched_after(_message(3), 3)
    assert fetched_after(_message(5), 3)  # later seeks (other partitions) do not matter
    assert not fetched_after(_message(2), 3)  # fetched before the rewind
    assert not fetched_after(_message(9), None)  # no rewind yet: nothing is handled
    assert not fetched_after(_message(None), 0)  # not from the fenced consumer


def test_fenced_topics_have_no_read_offset_for_faust_to_drop_by_and_others_keep_theirs() -> None:
    offsets = _ReadOffsets(frozenset({"events"}))
    offsets[TP("events", 0)] = 179
    offsets[TP("state-changelog", 0)] = 40
    assert offsets[TP("events", 0)] is None
    assert offsets[TP("state-changelog", 0)] == 40
    assert offsets[TP("state-changelog", 1)] is None  # faust's default for a partition not read yet
