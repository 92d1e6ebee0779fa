"""Poison messages through the worker's per-message logic, no broker: each is dead-lettered
with its reason code and source offset, and the run it was aimed at ends exactly as if it had
never been sent."""

from __future__ import annotations

import orjson
import pytest

from events.codec import MAX_EVENT_BYTES
from events.synthetic import synthetic_run
from projections.assembly.summary import summary
from projections.native_state import NativeState
from tests.faults.poison import KINDS, OVERSIZED_BYTES, STATEFUL, Poison, poison, poisons
from worker.runtime.outputs import Publish
from worker.runtime.processor import Processor, Record

RUN = "run-poisoned"
TOPIC = "events"
PARTITION = 3
VALID: list[bytes] = [orjson.dumps(event) for event in synthetic_run(RUN, tasks=3, attempts=2, seed=7)]
"""A small closed run: run.started first, run.closed last."""

POSITIONS = {"first": 0, "after-start": 1, "mid-run": len(VALID) // 2, "after-close": len(VALID)}
"""Where the poison goes in the log: its offset."""

Handled = list[tuple[int, list[Publish]]]


def feed(messages: list[tuple[bytes | None, bytes]]) -> tuple[Processor, Handled]:
    """Each message through one processor at offsets 0.., with what each one published."""
    processor = Processor(topic=TOPIC, progress_interval=0.2)
    handled = [
        (offset, processor.handle(PARTITION, [Record(offset, key, value)], 0.0))
        for offset, (key, value) in enumerate(messages)
    ]
    return processor, handled


def valid_messages() -> list[tuple[bytes | None, bytes]]:
    return [(RUN.encode(), value) for value in VALID]


def final_summary(processor: Processor) -> bytes:
    held = processor.cache.get(RUN)
    assert held is not None
    if isinstance(held.run, NativeState):
        return bytes(held.run.native.summary_bytes())
    return orjson.dumps(summary(held.run))


def dead_letters(handled: Handled) -> list[tuple[int, Publish]]:
    return [(offset, item) for offset, items in handled for item in items if item.stream == "deadletter"]


@pytest.fixture(scope="module")
def reference() -> bytes:
    """The summary of the run without poison."""
    processor, handled = feed(valid_messages())
    assert dead_letters(handled) == []
    return final_summary(processor)


@pytest.mark.parametrize(
    ("kind", "position"),
    [(kind, position) for kind in KINDS for position in POSITIONS if not (kind in STATEFUL and position == "first")],
)
def test_a_poison_is_dead_lettered_and_changes_nothing(kind: str, position: str, reference: bytes) -> None:
    """Before, during and after the run (stateful kinds only once it started): the poison alone
    gives a dead letter, a copy with its reason and coordinates, and the summary is untouched
    (an applied poison would add an attempt; one after close would add a revision)."""
    bad = poison(kind, RUN, 42)
    offset = POSITIONS[position]
    messages = valid_messages()
    messages.insert(offset, (bad.key, bad.value))
    processor, handled = feed(messages)

    [(dead_offset, dead)] = dead_letters(handled)
    assert dead_offset == offset
    assert handled[offset][1] == [dead]  # no progress or summary from the poison
    assert (dead.key, dead.value) == (bad.key, bad.value)
    headers = dict(dead.headers)
    assert headers["evalstream.reason"] == bad.reason.encode(), headers["evalstream.detail"]
    assert headers["evalstream.source.topic"] == TOPIC.encode()
    assert headers["evalstream.source.partition"] == str(PARTITION).encode()
    assert headers["evalstream.source.offset"] == str(offset).encode()
    assert final_summary(processor) == reference


def test_a_second_run_started_sent_first_takes_the_real_ones_place() -> None:
    """Why STATEFUL kinds go after the run's run.started: the worker refuses whichever
    run.started comes second, so a poison sent first would be the declaration."""
    [bad] = [poison(kind, RUN, 0) for kind in STATEFUL]
    _, handled = feed([(bad.key, bad.value), *valid_messages()])
    [(offset, dead)] = dead_letters(handled)
    assert (offset, dead.value) == (1, VALID[0])
    assert dict(dead.headers)["evalstream.reason"] == b"refused"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_poisons_cover_every_kind(seed: int) -> None:
    batch = poisons(RUN, 200, seed)
    assert len(batch) == 200
    assert {item.kind for item in batch} == set(KINDS)
    assert all(item.reason == poison(item.kind, RUN, 0).reason for item in batch)


def test_poisons_are_deterministic_and_seeded() -> None:
    def kinds(batch: list[Poison]) -> list[str]:
        return [item.kind for item in batch]

    assert poisons(RUN, 60, 5) == poisons(RUN, 60, 5)
    assert kinds(poisons(RUN, 60, 5)) != kinds(poisons(RUN, 60, 6))
    assert kinds(poisons(RUN, 10, 5)) == kinds(poisons(RUN, 60, 5))[:10]


def test_each_poison_has_its_own_event_id() -> None:
    """A second event with an applied event_id is a redelivery, dropped without a dead letter:
    every poison that carries an event id has one of its own, `poison:<kind>:<index>`."""
    batch = poisons(RUN, 2 * len(KINDS), 0)
    with_ids = [(index, item) for index, item in enumerate(batch) if b'"event_id":"' in item.value]
    # (utf-16's is there, in UTF-16; the event id of an event_id of the wrong type is a number)
    without = {"binary-garbage", "empty-value", "utf-16", "wrong-type:trial.finished:event_id"}
    assert {item.kind for item in batch} - {item.kind for _, item in with_ids} == without
    for index, item in with_ids:
        assert f'"event_id":"poison:{item.kind}:{index}"'.encode() in item.value


def test_the_oversized_poison_is_over_the_decoder_limit_and_within_the_topic_limit() -> None:
    """The events topic takes MAX_EVENT_BYTES + 1024: the broker accepts it, the worker must refuse it."""
    value = poison("oversized", RUN, 0).value
    assert len(value) == OVERSIZED_BYTES
    assert MAX_EVENT_BYTES < len(value) < MAX_EVENT_BYTES + 1024
