"""A run stored in parts and restored is the same run: same summary now, same after more events."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from events.codec import encode_payload
from events.models import InputEvent
from projections.progress import progress
from projections.run import RunState, apply
from projections.storage import header_to_bytes, restore, task_from_bytes, task_to_bytes
from projections.summary import summary
from tests.builders import fold
from tests.strategies import run_logs


def stored_and_restored(run: RunState) -> RunState:
    """Through bytes, as a store keeps it: a declared task nothing arrived for has no record."""
    blobs = {task_id: task_to_bytes(task) for task_id, task in run.tasks.items() if task.touched}
    return restore(run.run_id, header_to_bytes(run), [task_from_bytes(t, b) for t, b in blobs.items()])


@given(run_logs(), st.data())
def test_a_restored_run_continues_exactly_like_the_original(log: list[InputEvent], data: st.DataObject) -> None:
    split = data.draw(st.integers(0, len(log)))
    original = fold(log[:split])
    restored = stored_and_restored(original)
    assert header_to_bytes(restored) == header_to_bytes(original)
    assert progress(restored, 1) == progress(original, 1)
    for event in [*log[split:], *data.draw(st.lists(st.sampled_from(log), max_size=5))]:
        assert apply(restored, event).outcome == apply(original, event).outcome  # redeliveries included
    assert encode_payload(summary(restored)) == encode_payload(summary(original))
    assert progress(restored, 2) == progress(original, 2)
