"""The worker's per-message logic without Kafka: dead letters, and recovery from its store."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from events.codec import encode
from events.models import InputEvent
from tests import builders
from tests.strategies import run_logs
from worker.processor import Processor, Source

SOURCE = Source("events", 0, 7)


def published(processor: Processor, lines: list[bytes]) -> list[bytes]:
    return [item.value for line in lines for item in processor.handle(b"run", line, SOURCE) if item.stream == "summary"]


@given(run_logs(), st.data())
def test_a_worker_restarted_on_its_store_ends_with_the_same_summary(log: list[InputEvent], data: st.DataObject) -> None:
    """A crash keeps the store as of some event k (each event writes one record) and the
    committed offset at some j <= k: the new worker restores and gets j.. again."""
    lines = [encode(event) for event in log]
    k = data.draw(st.integers(0, len(lines)))
    j = data.draw(st.integers(0, k))
    store: dict[bytes, bytes] = {}
    before = published(Processor(store=store), lines[:k])
    after = published(Processor(store=store), lines[j:])
    reference = published(Processor(), lines)
    assert (before + after)[-1:] == reference[-1:]  # the latest summary, as a compacted topic keeps it
    assert len(set(before + after)) == len(reference)  # no revision lost, none invented


def test_bad_messages_become_dead_letters_with_their_coordinates() -> None:
    processor = Processor()
    [dead] = processor.handle(b"run", b"{nope", SOURCE)
    assert dead.stream == "deadletter"
    assert dead.value == b"{nope"
    headers = dict(dead.headers)
    assert headers["evalstream.reason"] == b"not-json"
    assert (headers["evalstream.source.topic"], headers["evalstream.source.offset"]) == (b"events", b"7")
    [mismatch] = processor.handle(b"other", encode(builders.closed("run")), SOURCE)
    assert dict(mismatch.headers)["evalstream.reason"] == b"key-mismatch"
