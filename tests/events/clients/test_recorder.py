"""RunRecorder: validation before sending, the one-call dead trial, and a real broker."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from events.clients.recorder import AsyncRunRecorder
from events.codec import decode, encode
from projections.run import Outcome, RunState, apply
from tests.builders import closed

TASKS = [{"task_id": "t", "metrics": [{"metric_type": "reward", "outputs": [{"name": "score", "kind": "continuous"}]}]}]


def record(
    calls: list[tuple[str, tuple[object, ...], dict[str, object]]], sent: list[tuple[bytes, bytes]] | None = None
) -> list[tuple[bytes, bytes]]:
    sent = [] if sent is None else sent

    async def send(key: bytes, value: bytes) -> None:
        sent.append((key, value))

    async def go() -> None:
        async with AsyncRunRecorder("run-1", send=send) as run:
            for name, args, kwargs in calls:
                await getattr(run, name)(*args, **kwargs)

    asyncio.run(go())
    return sent


def test_a_dead_trial_is_one_call_and_every_event_is_keyed_by_run_id() -> None:
    sent = record(
        [
            ("started", (TASKS,), {"attempts_per_task": 2, "labels": {"model": "m"}}),
            ("trial_died", ("t", "t-1"), {"metrics": ["reward", "steps"], "error_type": "SandboxTimeout"}),
            ("score", ("t", "t-2", "reward", {"score": 1.0}), {}),
            ("metric_failed", ("t", "t-2", "judge"), {"error_type": "JudgeTimeout"}),
            ("closed", (), {"reason": "cancelled"}),
        ]
    )
    events = [decode(value) for _, value in sent]
    assert {key for key, _ in sent} == {b"run-1"}
    assert [e.type for e in events] == [
        "run.started",
        "trial.finished",
        "score.emitted",
        "score.emitted",
        "score.emitted",
        "score.emitted",
        "run.closed",
    ]
    assert [getattr(e, "failure", None) for e in events[2:4]] == ["trial", "trial"]
    assert getattr(events[5], "failure", None) == "metric"
    assert len({e.event_id for e in events}) == len(events)


def test_every_event_is_stamped_when_it_is_sent() -> None:
    before = datetime.now(UTC)
    sent = record([("started", (TASKS,), {}), ("trial_finished", ("t", "t-1"), {}), ("closed", (), {})])
    after = datetime.now(UTC)
    stamps = [datetime.fromisoformat(str(decode(value).occurred_at)) for _, value in sent]
    assert all(before - timedelta(milliseconds=1) <= stamp <= after for stamp in stamps)
    assert stamps == sorted(stamps)


def test_a_caller_chosen_event_id_makes_a_retry_a_redelivery() -> None:
    """The two sends may differ in their `occurred_at` stamp (a millisecond apart): the
    event_id alone makes the second a redelivery (EVENTS.md)."""
    sent = record([("closed", (), {"event_id": "close-once"}), ("closed", (), {"event_id": "close-once"})])
    first, retried = (decode(value) for _, value in sent)
    assert sent[0][0] == sent[1][0]
    assert first.event_id == retried.event_id == "close-once"
    assert encode(first) == sent[0][1]
    run = RunState("run-1")
    assert [apply(run, event).outcome for event in (first, retried)] == [Outcome.APPLIED, Outcome.REDELIVERY]


def test_an_invalid_event_raises_in_the_harness_and_is_not_sent() -> None:
    sent: list[tuple[bytes, bytes]] = []
    with pytest.raises(ValidationError, match="must be a number, boolean, string or null"):
        record([("closed", (), {}), ("score", ("t", "t-1", "reward", {"score": [1, 2]}), {})], sent)
    with pytest.raises(ValidationError, match="reason"):
        record([("closed", ("finished",), {})], sent)
    assert [decode(value).type for _, value in sent] == ["run.closed"]


def test_an_event_built_elsewhere_is_sent_as_it_is_and_only_to_its_own_run() -> None:
    mine, theirs = closed(run_id="run-1", event_id="c-1"), closed(run_id="run-2", event_id="c-2")
    sent = record([("send", (mine,), {})])
    assert sent == [(b"run-1", encode(mine))]
    with pytest.raises(ValueError, match="is of run 'run-2', not of 'run-1'"):
        record([("send", (theirs,), {})])
