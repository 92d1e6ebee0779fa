"""The native fold's `run.progress` (`NativeRun.progress_bytes`, `projections/native/src/fold/
progress.rs`) against the Python fold's, byte for byte: `events.codec.encode_payload` of
`projections.assembly.progress.progress` of the Python state after every event, with the
elapsed time given and without (the span of the events' `occurred_at`); and replay with
progress through the native fold (`NativeReplayer`) against `Replayer`."""

from __future__ import annotations

from random import Random
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events.codec import decode, encode, encode_payload
from events.models import InputEvent
from projections.assembly.progress import progress
from projections.fold import run as run_module
from projections.fold.run import RunState
from projections.native_events import native_apply
from projections.native_replay import NativeReplayer, replayer
from tests import builders
from tests.native import kernels
from tests.projections.test_native_fold import (
    EXAMPLES,
    assert_runs_of_lines_write_what_replayer_writes,
    assert_same_bytes,
    log_positions,
    logs_of_any_names,
    logs_with_repeats,
    wide_logs,
)
from tests.strategies import graded_runs, run_logs

timestamps = st.builds(
    lambda second, milli, zone: f"2026-12-06T10:{second // 60:02d}:{second % 60:02d}.{milli:03d}{zone}",
    st.integers(0, 3599),
    st.integers(0, 999),
    st.sampled_from(["Z", "+01:00", "-05:30"]),
)
"""`occurred_at`s within a few hours of one another, in any order: the span's ends."""

elapsed_times = st.one_of(st.none(), st.floats(), st.sampled_from([0.0, -0.0, -1.0, 0.25, 0.75, 1.25, 0.125, 3600.0]))
"""An elapsed time as a caller gives it (None: the span), NaN and the infinities too, and
halves that `round(..., 1)` takes to the even side."""


def at_moment(event: InputEvent, at: str | None) -> InputEvent:
    """`event` decoded from its message with `occurred_at` `at` (None: `event` as it is)."""
    return event if at is None else decode(orjson.dumps({**orjson.loads(encode(event)), "occurred_at": at}))


@st.composite
def timed(draw: st.DrawFn, logs: st.SearchStrategy[list[InputEvent]]) -> list[InputEvent]:
    """A log of `logs` whose events now and then carry an `occurred_at`."""
    return [at_moment(event, draw(st.one_of(st.none(), timestamps))) for event in draw(logs)]


def assert_same_progress(run: RunState, native: Any, seq: int, elapsed: float | None) -> None:
    """The native run's progress number `seq` is the Python fold's, encoded as the worker and
    replay encode it; `elapsed` None is left out of the native call, as a caller leaves it."""
    got = native.progress_bytes(seq) if elapsed is None else native.progress_bytes(seq, elapsed)
    assert_same_bytes(got, encode_payload(progress(run, seq, elapsed)))


def assert_progress_after_every_event(
    events: list[InputEvent], elapsed: list[float | None], places: list[int | None] | None = None
) -> None:
    """After every event of `events` (applied or not), the progress with the span and with
    each of `elapsed` is the Python fold's (`run_logs(late=True)` may give no event at all)."""
    run_id = events[0].run_id if events else "run"
    run, native = RunState(run_id), kernels().NativeRun(run_id)
    for seq, (event, position) in enumerate(zip(events, places or [None] * len(events), strict=True), start=1):
        native_apply(native, event, position)
        run_module.apply(run, event, position)
        for given_elapsed in [None, *elapsed]:
            assert_same_progress(run, native, seq, given_elapsed)


@settings(max_examples=200)
@given(
    timed(st.one_of(logs_with_repeats(), run_logs(late=True, shared_trials=True))),
    st.lists(elapsed_times, max_size=2),
    st.sampled_from(["folded", "offsets", "restored"]),
    st.randoms(use_true_random=False),
)
def test_every_event_s_progress_is_the_python_fold_s_byte_for_byte(
    events: list[InputEvent], elapsed: list[float | None], positions: str, rng: Random
) -> None:
    """Open runs and closed ones (events after the close, a second close, none), runs without a
    run.started and runs whose run.started comes late, declared tasks nothing has arrived for
    (pending), excluded keys, views, NaN and infinite values, redeliveries, dead trials and
    failed metrics, events with an `occurred_at` and without, at replay's positions, a
    source's offsets and positions out of arrival order: the span, the ETA, percent done,
    verdicts, pass@k and statistics."""
    assert_progress_after_every_event(events, elapsed, log_positions(positions, len(events), rng))


@settings(max_examples=60)
@given(st.one_of(wide_logs(), graded_runs(), logs_of_any_names()), st.lists(elapsed_times, max_size=1))
def test_wide_many_attempt_and_any_text_runs_give_the_python_fold_s_progress(
    events: list[InputEvent], elapsed: list[float | None]
) -> None:
    """Spilled output cells (`wide_logs`), tasks of up to 8 attempts (pass@k and pass^k up to
    k = 8: `graded_runs`), and ids, key names and labels of any text, escaped as orjson does."""
    assert_progress_after_every_event(events, elapsed)


@pytest.mark.parametrize(
    ("attempts", "tasks", "finished", "elapsed", "shown"),
    [
        (100, 8, 1, 2.0, (0.12, 1598.0)),  # 0.125 percent: half way, to the even 0.12
        (4, 1, 1, 0.25, (25.0, 0.8)),  # 0.75 seconds: half way, to the even 0.8
        (2, 1, 1, 0.25, (50.0, 0.2)),  # 0.25 seconds: half way, to the even 0.2
        (3, 1, 1, 1.0, (33.33, 2.0)),
        (1, 3, 2, 1e308, (66.67, 5e307)),
    ],
)
def test_percent_done_and_the_eta_round_as_python_rounds(
    attempts: int, tasks: int, finished: int, elapsed: float, shown: tuple[float, float]
) -> None:
    """`round(x, 2)` and `round(x, 1)` to the bit, halves of the exact binary value to even."""
    specs = [builders.task_spec(f"t{number}", {"reward.score": "boolean"}) for number in range(tasks)]
    events: list[InputEvent] = [builders.started("run", specs, attempts_per_task=attempts)]
    events += [builders.trial("t0", f"t0-{number}", "completed") for number in range(finished)]
    run, native = RunState("run"), kernels().NativeRun("run")
    for event in events:
        native_apply(native, event, None)
        run_module.apply(run, event)
    assert_same_progress(run, native, 7, elapsed)
    figures = orjson.loads(native.progress_bytes(7, elapsed))
    assert (figures["trials"]["percent_done"], figures["eta_seconds"]) == shown


@pytest.mark.parametrize("closed", [False, True])
def test_two_keys_of_one_name_show_as_the_python_fold_shows_them(closed: bool) -> None:
    """`a.b` `c` and `a` `b.c` are both `a.b.c`: pass@k and statistics over the tasks of both,
    the verdicts of the later key in the run's key order, as the reference's dicts keep them."""
    outputs = [{"name": "c", "kind": "boolean"}]
    spec = {
        "task_id": "t",
        "metrics": [
            {"metric_type": "a.b", "outputs": outputs},
            {"metric_type": "a", "outputs": [{**outputs[0], "name": "b.c"}]},
        ],
        "views": [],
    }
    events: list[InputEvent] = [
        builders.started("run", [spec, builders.task_spec("u"), builders.task_spec("w", {"a.b.c": "boolean"})]),
        builders.score("t", "t-0", "a.b", {"c": 1.0}),
        builders.score("t", "t-1", "a", {"b.c": 0.0}),
        builders.score("u", "u-0", "a", {"b.c": 1.0}),
        *([builders.closed("run")] if closed else []),
    ]
    assert_progress_after_every_event(events, [60.0])
    run = RunState("run")
    for event in events:
        run_module.apply(run, event)
    shown = progress(run, 1)  # the case the comparison above goes through:
    assert shown["pass_at_k"]["a.b.c"]["1"]["count"] == 3  # t's both keys and u's
    assert shown["verdicts"] == {"a.b.c": {"solved": 1, "flaky": 0, "failed": 0, "unmeasured": 0, "pending": 0}}


def test_the_contract_s_example_log_gives_the_python_fold_s_progress() -> None:
    """docs/spec/examples/mixed-runs.jsonl, several runs interleaved: after each event applied
    to its run, its progress with the span and with an elapsed time."""
    runs: dict[str, tuple[RunState, Any]] = {}
    shown = 0
    for line in (EXAMPLES / "mixed-runs.jsonl").read_bytes().splitlines():
        event = decode(line)
        run, native = runs.setdefault(event.run_id, (RunState(event.run_id), kernels().NativeRun(event.run_id)))
        native_apply(native, event, None)
        if run_module.apply(run, event).outcome.value == "applied":
            for elapsed in (None, 90.0):
                assert_same_progress(run, native, run.event_count, elapsed)
            shown += 1
    assert len(runs) > 1
    assert shown > 600


@st.composite
def interleaved_logs(draw: st.DrawFn) -> list[bytes]:
    """Up to three runs (`run_logs`, late events and closes anywhere, `timed`) interleaved,
    as the lines of a file."""
    queues = [draw(timed(run_logs(late=True, run_id=f"run-{at}"))) for at in range(draw(st.integers(1, 3)))]
    lines = []
    while any(queues):
        queue = draw(st.sampled_from([queue for queue in queues if queue]))
        lines.append(encode(queue.pop(0)) + b"\n")
    return lines


@settings(max_examples=60)
@given(interleaved_logs(), st.integers(1, 4), st.lists(st.integers(1, 9), min_size=1))
def test_replay_with_progress_through_the_native_fold_writes_what_replayer_writes(
    lines: list[bytes], progress_every: int, sizes: list[int]
) -> None:
    """With `occurred_at`s the native reader reads from the bytes (the span, the ETA),
    `replayer(progress_every)` is the native fold, and its runs of lines of any length write
    `Replayer`'s progress lines and summaries, in the same order, with the same stats."""
    native = replayer(progress_every)
    assert isinstance(native, NativeReplayer)
    assert_runs_of_lines_write_what_replayer_writes(native, lines, sizes, progress_every)
