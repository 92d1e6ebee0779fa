"""Keyed messages (the events topic's) through the native fold against the Python fold, message
by message, on logs of many runs with hostile lines and wrong keys: the worker's step
(`projections.native_step.NativeStepper` against `projections.step.step`: the same
rejections, outcomes, changed tasks and summary revisions, byte for byte) and replay of the
topic (`NativeReplayer.apply_keyed` against `Replayer.apply_keyed`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.assembly.contributions import SummaryCache
from projections.assembly.summary import summary_bytes
from projections.fold.run import RunState
from projections.held import FoldState
from projections.native_replay import NativeReplayer
from projections.native_state import NativeState
from projections.native_step import NativeStepper
from projections.replayer import Replayer
from projections.step import Stepped, step
from tests.strategies import mixed_logs

HOSTILE = [b"", b"not json", b"[1, 2]", b'{"type":"score.emitted"}', b'{"schema_version":1}', "é".encode()]


@dataclass(eq=False)
class Held:
    run: FoldState
    summaries: SummaryCache | None = None


def seen(stepped: Stepped) -> tuple[object, ...]:
    run = stepped.run
    rejected = stepped.rejected
    return (
        None if run is None else run.run_id,
        stepped.outcome,
        None if rejected is None else (rejected.code, rejected.detail),
        stepped.task_id,
        stepped.summary,
        None if stepped.summary is None or run is None else run.revision,
    )


def key_of(value: bytes) -> bytes | None:
    try:
        run_id = orjson.loads(value).get("run_id")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return run_id.encode() if isinstance(run_id, str) else None


@settings(max_examples=150)
@given(
    mixed_logs(late=True),
    st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(HOSTILE)), max_size=5),
    st.lists(st.integers(0, 10_000), max_size=4),
)
def test_the_native_step_gives_the_python_step_s_outcomes_and_summaries(
    log: bytes, hostile: list[tuple[int, bytes]], rekeyed: list[int]
) -> None:
    messages = log.splitlines()
    for place, line in hostile:
        messages.insert(place % (len(messages) + 1), line)
    keys = [key_of(value) for value in messages]
    for place in rekeyed:  # keyed for another run, or not keyed at all
        at = place % len(keys)
        keys[at] = None if place % 2 else b"another-run"
    python: dict[str, Held] = {}
    native: dict[str, Held] = {}
    stepper = NativeStepper()
    for offset, (value, key) in enumerate(zip(messages, keys, strict=True)):
        want = step(
            value,
            lambda run_id: python.setdefault(run_id, Held(RunState(run_id))),
            position=offset,
            keyed=True,
            key=key,
        )
        got = stepper.step(
            value, lambda run_id: native.setdefault(run_id, Held(NativeState(run_id))), position=offset, key=key
        )
        assert seen(got) == seen(want), (offset, value, key)
    assert python.keys() == native.keys()
    assert {run_id: _native(held).summary_bytes() for run_id, held in native.items()} == {
        run_id: _summary(held) for run_id, held in python.items()
    }


def _native(held: Held) -> Any:
    assert isinstance(held.run, NativeState)
    return held.run.native


def _summary(held: Held) -> bytes:
    assert isinstance(held.run, RunState)
    return summary_bytes(held.run, SummaryCache())


@settings(max_examples=100)
@given(
    mixed_logs(late=True),
    st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(HOSTILE)), max_size=5),
    st.lists(st.integers(0, 10_000), max_size=4),
    st.sampled_from([None, 1, 3]),
)
def test_the_topic_replayed_natively_writes_what_the_python_fold_writes(
    log: bytes, hostile: list[tuple[int, bytes]], rekeyed: list[int], progress_every: int | None
) -> None:
    """`evalstream replay --from-topic`'s fold: each keyed message at its offset, through
    `NativeReplayer.apply_keyed` and `Replayer.apply_keyed`, writes the same rejections (named
    by `where`), progress and summaries, with the same stats."""
    messages = log.splitlines()
    for place, line in hostile:
        messages.insert(place % (len(messages) + 1), line)
    keys = [key_of(value) for value in messages]
    for place in rekeyed:
        keys[place % len(keys)] = None if place % 2 else b"another-run"
    native, python = NativeReplayer(progress_every), Replayer(progress_every)
    for offset, (value, key) in enumerate(zip(messages, keys, strict=True), start=5):
        where = f"events[0]@{offset}"
        assert native.apply_keyed(offset, value, where, key) == python.apply_keyed(offset, value, where, key)
    assert native.finish() == python.finish()
