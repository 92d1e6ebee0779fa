"""The native fold's state (`projections/native/src/fold`) against the Python fold's, event by
event: a task's (`projections.fold.task.TaskState`) score by score, with the same packed
records, output names and spilled cells, trial ids, keys with their (n, c), run-wide tallies
and attempt lists; a run's (`projections.fold.run.RunState`), with every event's outcome and
the whole state after it; and the run's summary (`NativeRun.summary_bytes`), byte for byte
`projections.assembly.summary.summary_bytes` of the Python state after every event."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from random import Random
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from events.codec import decode, encode
from events.models import InputEvent, RunStarted, ScoreEmitted
from events.synthetic import synthetic_run
from projections import native_events
from projections.assembly.summary import summary_bytes
from projections.fold import run as run_module
from projections.fold.declarations import Key
from projections.fold.key_tallies import KeyTally
from projections.fold.run import RunState
from projections.fold.task import TaskState
from projections.native_events import native_apply
from projections.native_replay import NativeReplayer
from projections.packed.trial_ids import listed
from projections.replayer import Replayer
from tests import builders
from tests.native import kernels
from tests.projections.test_kernels import same
from tests.strategies import KINDS, LARGEST, graded_runs, mixed_logs, run_logs, weights
from tests.strategies import values as run_values

EXAMPLES = Path(__file__).parents[2] / "docs" / "spec" / "examples"
EVENT: TypeAdapter[InputEvent] = TypeAdapter(InputEvent)
METRICS = ("reward", "steps", "judge")
OUTPUTS = tuple(f"o{index}" for index in range(11))  # more than records.DENSE (8): spilled cells too
KEYS = [(metric, output) for metric in METRICS for output in OUTPUTS]

values = st.one_of(
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, 0.5, 1e308]),
    st.sampled_from(["pass", "Infinity", "-Infinity", "NaN"]),
    st.none(),
)


@st.composite
def scores(draw: st.DrawFn) -> dict[str, Any]:
    status = draw(st.sampled_from(["completed", "partial", "failed"]))
    body: dict[str, Any] = {
        "schema_version": 1,
        "type": "score.emitted",
        "event_id": "e",
        "run_id": "r",
        "task_id": "t",
        "trial_id": draw(st.sampled_from(["a", "b", "c", "d", "e\0f", "ü"])),
        "metric_type": draw(st.sampled_from(METRICS)),
        "status": status,
    }
    if status == "failed":
        body["failure"] = draw(st.sampled_from(["trial", "metric"]))
    else:
        names = draw(st.lists(st.sampled_from(OUTPUTS), unique=True, max_size=6))
        body["outputs"] = [{"name": name, "value": draw(values)} for name in names]
    return body


@st.composite
def declarations(draw: st.DrawFn) -> tuple[list[Key], list[Key], list[Key]] | None:
    """None (no declaration), or (attempt keys in order, excluded keys, every declared key)."""
    if draw(st.booleans()):
        return None
    declared = draw(st.lists(st.sampled_from(KEYS), unique=True, max_size=8))
    excluded = [key for key in declared if draw(st.booleans())]
    return [key for key in declared if key not in excluded], excluded, declared


def python_rekey(task: TaskState, declared: tuple[list[Key], list[Key], list[Key]] | None) -> None:
    """`TaskState.rekey` with a declaration of those keys (`Declarations` made by hand)."""
    if declared is None:
        task.rekey(None)
        return
    attempt_keys, excluded, every = declared
    made = SimpleNamespace(
        attempt_keys=tuple(attempt_keys), excluded=frozenset(excluded), kinds=dict.fromkeys(every, "continuous")
    )
    task.rekey(SimpleNamespace(tasks={task.task_id: made}))  # type: ignore[arg-type]


def counts(tally: KeyTally) -> tuple[int, ...]:
    verdicts = tally.verdicts
    return verdicts["solved"], verdicts["flaky"], verdicts["failed"], tally.unmeasured, tally.pending, tally.moves


def assert_same(task: TaskState, native: Any, eligible: dict[Key, KeyTally]) -> None:
    held = [(name, columns.packed, list(columns.names), columns.spilled) for name, columns in task.metrics()]
    assert native.metrics() == held
    assert native.trials() == listed(task.trials)
    assert native.first_score() == task.first_score
    assert native.tallies() == list(task.tallies())
    assert native.eligible() == [(key, counts(tally)) for key, tally in sorted(eligible.items())]
    for metric, columns in task.metrics():
        for output in (*columns.names, "never"):
            assert same(native.attempts(metric, output), columns.read().attempts(output))


@settings(max_examples=300)
@given(st.lists(scores(), max_size=40), st.lists(st.sampled_from(KEYS), unique=True), declarations(), st.data())
def test_scores_and_a_rekey_give_the_python_fold_s_task_byte_for_byte(
    bodies: list[dict[str, Any]],
    eligible_keys: list[Key],
    declared: tuple[list[Key], list[Key], list[Key]] | None,
    data: st.DataObject,
) -> None:
    task = TaskState("t")
    native = kernels().NativeTask("t", eligible_keys)
    eligible = {key: KeyTally() for key in eligible_keys}
    rekey_at = data.draw(st.integers(0, len(bodies)), label="rekey before score")
    for at, body in enumerate(bodies):
        if at == rekey_at:
            python_rekey(task, declared)
            native.rekey(declared)
        event = EVENT.validate_python(body)
        assert isinstance(event, ScoreEmitted)
        seq = 10 * at + 3
        task.record_score(event, seq, eligible)
        outputs = [(output.name, output.value) for output in event.outputs]
        native.record_score(
            event.trial_id, event.metric_type, event.status, getattr(event, "failure", None), outputs, seq
        )
        assert_same(task, native, eligible)
    python_rekey(task, declared)
    native.rekey(declared)
    assert_same(task, native, eligible)


@st.composite
def logs_with_repeats(draw: st.DrawFn, output_values: st.SearchStrategy[Any] = run_values) -> list[InputEvent]:
    """A run's log (`tests.strategies.run_logs`) with events given again: the same event (a
    redelivery), or the same with another id (a second run.started, refused; a second
    run.closed, ignored; a score or trial again, perhaps after the close: a late event)."""
    events = draw(run_logs(output_values=output_values))
    for number in range(draw(st.integers(0, 6))):
        again = draw(st.sampled_from(events))
        if draw(st.booleans()):
            again = again.model_copy(update={"event_id": f"again-{number}"})
        events.insert(draw(st.integers(0, len(events))), again)
    return events


def assert_same_run(run: RunState, native: Any) -> None:
    header = native.header()
    assert {name: getattr(run, name) for name in header} == header
    assert native.passk() == [(key, counts(tally)) for key, tally in sorted(run.passk.items())]
    held = [
        (
            task.task_id,
            task.first_score,
            listed(task.trials),
            [(name, columns.packed, list(columns.names), columns.spilled) for name, columns in task.metrics()],
            list(task.tallies()),
            sorted(task.excluded),
            task.events,
            task.trial_positions,
            task.first_at,
            task.last_at,
            task.failed_trials,
        )
        for task in run.tasks.values()
    ]
    assert native.tasks() == held


def log_positions(kind: str, count: int, rng: Random) -> list[int | None]:
    """The positions `count` events are applied at: the fold's own (None: replay), a
    source's offsets (the worker), or out of arrival order (a run restored in parts)."""
    if kind == "offsets":
        return [3 * number + 7 for number in range(count)]
    if kind == "restored":
        return rng.sample(range(3 * count + 1), count)
    return [None] * count


@settings(max_examples=300)
@given(logs_with_repeats(), st.sampled_from(["folded", "offsets", "restored"]), st.randoms(use_true_random=False))
def test_a_run_s_log_gives_the_python_fold_s_state_event_by_event(
    events: list[InputEvent], positions: str, rng: Random
) -> None:
    """Every event's outcome, and after it the whole state: header, counts, tallies and every
    task, with the fold's own positions (replay), a source's offsets (the worker), or
    positions out of arrival order (a run restored in parts, some newer than others)."""
    places = log_positions(positions, len(events), rng)
    run = RunState("run")
    native = kernels().NativeRun("run")
    for event, position in zip(events, places, strict=True):
        assert native_apply(native, event, position) == run_module.apply(run, event, position).outcome.value
        assert_same_run(run, native)


def assert_same_bytes(got: bytes, expected: bytes) -> None:
    """The native fold's output is the Python fold's, else where they first differ: an output
    is kilobytes."""
    if got != expected:
        at = next((at for at, pair in enumerate(zip(got, expected, strict=False)) if pair[0] != pair[1]), len(got))
        start = max(at - 80, 0)
        raise AssertionError(f"at byte {at}: native {got[start : at + 80]!r}, python {expected[start : at + 80]!r}")


def assert_same_summary(run: RunState, native: Any) -> None:
    """The native run's summary bytes are the Python fold's (built from its state alone)."""
    assert_same_bytes(native.summary_bytes(), summary_bytes(run))


ORDERED_VALUES = st.sampled_from([LARGEST, -LARGEST, 1e308, -1e308, 1.0, 0.5, 3.0, 1e-16, -1e-16, 0.1, math.nan, True])
"""Values whose sums differ with the order they are added in (1e308 + 1e308 - 1e308 is
Infinity, 1e308 - 1e308 + 1e308 is 1e308): a summary that adds in another order than the
reference's shows it."""


@settings(max_examples=150)
@given(
    st.one_of(logs_with_repeats(), logs_with_repeats(ORDERED_VALUES)),
    st.sampled_from(["folded", "offsets", "restored"]),
    st.randoms(use_true_random=False),
)
def test_every_revision_s_summary_is_the_python_fold_s_byte_for_byte(
    events: list[InputEvent], positions: str, rng: Random
) -> None:
    """After every event, applied or not (open runs too: closed_reason null, revision 1),
    `NativeRun.summary_bytes` is `summary_bytes` of the Python fold's state: every part of the
    summary, with redeliveries, late run.started and events after the close, and positions
    of replay, of a source, or out of arrival order."""
    run = RunState("run")
    native = kernels().NativeRun("run")
    for event, position in zip(events, log_positions(positions, len(events), rng), strict=True):
        native_apply(native, event, position)
        run_module.apply(run, event, position)
        assert_same_summary(run, native)


SIGNED_VALUES = st.sampled_from([0.0, -0.0, math.nan, 1.0, -1.0, math.inf, -math.inf, 1e308])
"""Values a view's `all` and `any` reducers and an aggregate's sort tell apart by order alone
(min(0.0, -0.0) is 0.0, min(-0.0, 0.0) is -0.0; a NaN first stays)."""


@st.composite
def order_sensitive_logs(draw: st.DrawFn) -> list[InputEvent]:
    """A closed run of tasks declaring `reward.score` and a view of it, whose scores land
    interleaved across tasks with values whose sums depend on their order: the metric's in run
    log order, the view's and pass@k's in summary task order, each differ from the other."""
    tasks = [f"t{number}" for number in range(draw(st.integers(1, 4)))]
    reducer = draw(st.sampled_from(["single", "all", "any", "mean", "weighted"]))
    signals = [{"metric": "reward", "output": output, "weight": draw(weights)} for output in ("score", "extra")]
    view = {"name": "v", "reducer": reducer, "signals": signals}
    declared = draw(st.permutations(tasks))
    specs = [builders.task_spec(task, {"reward.score": "continuous"}, [view]) for task in declared]
    events: list[InputEvent] = [builders.started("run", specs)]
    for number in range(draw(st.integers(2, 14))):
        task = draw(st.sampled_from(tasks))
        outputs = {"score": draw(st.one_of(ORDERED_VALUES, SIGNED_VALUES)), "extra": draw(SIGNED_VALUES)}
        events.append(builders.score(task, f"{task}-{number}", "reward", outputs))
    events.insert(draw(st.integers(0, len(events))), builders.closed("run"))
    return events


@settings(max_examples=100)
@given(order_sensitive_logs(), st.sampled_from(["folded", "restored"]), st.randoms(use_true_random=False))
def test_sums_add_in_the_reference_s_order(events: list[InputEvent], positions: str, rng: Random) -> None:
    run = RunState("run")
    native = kernels().NativeRun("run")
    for event, position in zip(events, log_positions(positions, len(events), rng), strict=True):
        native_apply(native, event, position)
        run_module.apply(run, event, position)
        assert_same_summary(run, native)


@st.composite
def wide_logs(draw: st.DrawFn) -> list[InputEvent]:
    """A closed run whose metrics carry more output names than a record has slots for
    (`records.DENSE`): spilled cells in every figure, declared of every kind or not at all,
    with views over them."""
    tasks = ["t", "u"]
    specs = []
    for task in tasks:
        kinds = {f"{m}.{o}": draw(st.sampled_from(KINDS)) for m, o in draw(st.lists(st.sampled_from(KEYS), max_size=6))}
        signals = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3))
        reducer = draw(st.sampled_from(["single", "all", "any", "mean", "weighted"]))
        view = {"name": "wide", "reducer": reducer, "signals": [{"metric": m, "output": o} for m, o in signals]}
        specs.append(builders.task_spec(task, kinds, [view]))
    events: list[InputEvent] = [builders.started("run", specs, harbor_rules=draw(st.sampled_from(["0.25", "0.26"])))]
    for number, drawn in enumerate(draw(st.lists(scores(), max_size=30))):
        body = {**drawn, "run_id": "run", "event_id": f"w-{number}", "task_id": draw(st.sampled_from(tasks))}
        events.append(EVENT.validate_python(body))
    events.insert(draw(st.integers(1, len(events))), builders.closed("run"))
    return events


@settings(max_examples=60)
@given(st.one_of(wide_logs(), graded_runs()))
def test_wide_metrics_and_many_attempts_give_the_python_fold_s_summary(events: list[InputEvent]) -> None:
    """Spilled output cells (`wide_logs`), and tasks of up to 8 attempts (`graded_runs`: pass@k
    and pass^k up to k = 8, Harbor's ks 2, 4, 5 and 8, its 0.25 and 0.26 rules)."""
    run = RunState("run")
    native = kernels().NativeRun("run")
    for event in events:
        native_apply(native, event, None)
        run_module.apply(run, event)
        assert_same_summary(run, native)


names = st.text(st.characters(codec="utf-8"), min_size=1, max_size=6)
"""Ids and names of any characters but lone surrogates (which no JSON text holds): quotes,
backslashes, control characters, DEL, non-ASCII."""


@st.composite
def logs_of_any_names(draw: st.DrawFn) -> list[InputEvent]:
    """A closed run whose ids, names, labels and error types are any text."""
    run_id = draw(names)
    tasks = draw(st.lists(names, min_size=1, max_size=3, unique=True))
    # The task spec's key is "<metric>.<output>", split at its first dot: a metric has none.
    metric, output = draw(names.filter(lambda name: "." not in name)), draw(names)
    trials = draw(st.lists(names, min_size=1, max_size=3, unique=True))
    labels = draw(st.dictionaries(names, names, max_size=3))
    view = {"name": draw(names), "reducer": "mean", "signals": [{"metric": metric, "output": output}]}
    specs = [builders.task_spec(task, {f"{metric}.{output}": "continuous"}, [view]) for task in tasks]
    events: list[InputEvent] = [builders.started(run_id, specs, labels=labels)]
    for _ in range(draw(st.integers(1, 12))):
        task, trial = draw(st.sampled_from(tasks)), draw(st.sampled_from(trials))
        if draw(st.booleans()):
            value = draw(st.sampled_from([0.0, 1.0, 0.5, 1e-7, 123456789.0, None, draw(names)]))
            events.append(builders.score(task, trial, metric, {output: value, draw(names): 1}, run_id=run_id))
        else:
            events.append(builders.trial(task, trial, "failed", error_type=draw(names), run_id=run_id))
    return [*events, builders.closed(run_id)]


@settings(max_examples=60)
@given(logs_of_any_names())
def test_any_text_is_escaped_as_orjson_escapes_it(events: list[InputEvent]) -> None:
    run = RunState(events[0].run_id)
    native = kernels().NativeRun(events[0].run_id)
    for event in events:
        native_apply(native, event, None)
        run_module.apply(run, event)
    assert_same_summary(run, native)


def test_the_contract_s_example_log_gives_the_python_fold_s_summaries() -> None:
    """docs/spec/examples/mixed-runs.jsonl, several runs interleaved: each run's events folded
    in log order, every revision's bytes compared (and the last one's to the example's)."""
    runs: dict[str, tuple[RunState, Any]] = {}
    lines = (EXAMPLES / "mixed-runs.jsonl").read_bytes().splitlines()
    revisions = 0
    for line in lines:
        event = decode(line)
        run, native = runs.setdefault(event.run_id, (RunState(event.run_id), kernels().NativeRun(event.run_id)))
        outcome = native_apply(native, event, None)
        assert outcome == run_module.apply(run, event).outcome.value
        if run.closed and outcome == "applied":
            assert_same_summary(run, native)
            revisions += 1
    assert len(runs) > 1
    assert revisions >= len(runs)
    expected = [orjson.loads(line) for line in (EXAMPLES / "mixed-runs.expected.jsonl").read_bytes().splitlines()]
    latest = {record["run_id"]: record for record in expected if record.get("type") == "run.summary"}
    for run_id, (_, native) in runs.items():
        if run_id in latest:
            summary = orjson.loads(native.summary_bytes())
            assert {field: summary[field] for field in latest[run_id]} == latest[run_id]


@settings(max_examples=2000)
@given(st.floats())
def test_a_float_s_python_repr_is_python_s(value: float) -> None:
    assert kernels().float_repr(value) == repr(value)


def test_a_float_s_python_repr_at_the_layout_s_edges() -> None:
    for value in (1e-4, 1e-5, 9.999e-5, 1e15, 1e16, 9999999999999998.0, 1.5e16, 5e-324, -0.0, 0.0, 1e155, 1e308):
        assert kernels().float_repr(value) == repr(value)


def fold_reader() -> Any:
    """The replayer's reader of messages (`projections.native_events.fold_reader`); the test
    fails, saying what to do, where the native fold is not built."""
    kernels()
    return native_events.fold_reader()


@settings(max_examples=200)
@given(logs_with_repeats(), st.booleans())
def test_messages_read_from_their_bytes_give_what_their_decoded_events_give(
    events: list[InputEvent], offsets: bool
) -> None:
    """A message the native reader takes is applied as its decoded event is; one it leaves
    (a run.started, a timestamp of an uncommon form) is decoded and applied through the model."""
    reader = fold_reader()
    runs: dict[str, Any] = {}
    run = RunState("run")
    taken = 0
    for number, event in enumerate(events):
        position = 3 * number + 7 if offsets else None
        raw = encode(event)
        read = reader.apply(runs, raw, position)
        decoded = decode(raw)
        want = run_module.apply(run, decoded, position).outcome.value
        if read is None:
            native = runs.setdefault("run", kernels().NativeRun("run"))
            assert native_apply(native, decoded, position) == want
        else:
            taken += 1
            assert read == ("run", want)
        assert_same_run(run, runs["run"])
    assert taken >= sum(1 for event in events if not isinstance(event, RunStarted))


ODD_LINES = [b"", b"\n", b"  \r\n", b"\x0b\x0c\t\n", b"not json\n", b'{"type":"score.emitted"}\n', b"[1, 2]\r\n"]
"""Lines no event is: blank ones (each whitespace `bytes.isspace` knows), and lines replay
rejects."""


@settings(max_examples=100)
@given(
    mixed_logs(late=True),
    st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(ODD_LINES)), max_size=6),
    st.lists(st.integers(1, 9), min_size=1),
    st.booleans(),
    st.sampled_from([None, 0, 1, 3]),
)
def test_lines_replayed_in_runs_write_what_each_line_replayed_alone_writes(
    log: bytes, odd: list[tuple[int, bytes]], sizes: list[int], crlf: bool, progress_every: int | None
) -> None:
    """`NativeReplayer.feed_lines` over runs of lines of any length (the native reader's loop,
    stopping at each line left to Python) writes what `Replayer` writes of each line alone, in
    the same order and with the same stats: progress (every `progress_every` applied events of
    a run and at its close; None and 0, none), summaries, rejections and blank lines skipped."""
    lines = log.splitlines(keepends=True)
    if crlf:
        lines = [line.rstrip(b"\n") + b"\r\n" for line in lines]
    for place, line in odd:
        lines.insert(place % (len(lines) + 1), line)
    assert_runs_of_lines_write_what_replayer_writes(NativeReplayer(progress_every), lines, sizes, progress_every)


def assert_runs_of_lines_write_what_replayer_writes(
    native: NativeReplayer, lines: list[bytes], sizes: list[int], progress_every: int | None
) -> None:
    """`native.feed_lines` over runs of `sizes` lines in turn writes what `Replayer` writes of
    each line alone, in the same order, and ends with the same stats."""
    python = Replayer(progress_every)
    expected = [output for number, line in enumerate(lines, 1) for output in python.feed(number, line)]
    written, at = [], 0
    for size in itertools.cycle(sizes):
        if at >= len(lines):
            break
        written.extend(native.feed_lines(at + 1, lines[at : at + size]))
        at += size
    assert written == expected
    assert native.finish() == python.finish()


@pytest.mark.parametrize("progress_every", [None, 1, 5])
def test_the_native_replayer_writes_what_replay_writes(progress_every: int | None) -> None:
    """The contract's example log, line by line: `NativeReplayer` writes the progress,
    summaries (and rejections) `Replayer` writes, byte for byte."""
    native, python = NativeReplayer(progress_every), Replayer(progress_every)
    lines = (EXAMPLES / "mixed-runs.jsonl").read_bytes().splitlines(keepends=True)
    written, progressed = 0, 0
    for number, line in enumerate(lines, start=1):
        outputs = native.feed(number, line)
        assert outputs == python.feed(number, line)
        written += len(outputs)
        progressed += sum(b'"type":"run.progress"' in output for _, _, output in outputs)
    assert written >= 12
    if progress_every == 1:  # one after every applied event
        assert progressed == python.stats.applied
    assert bool(progressed) == bool(progress_every)
    assert native.finish() == python.stats


@pytest.mark.parametrize("started", [True, False], ids=["sized-by-its-run.started", "grown-without-one"])
def test_a_run_past_65_536_events_finds_the_redeliveries_the_python_fold_finds(started: bool) -> None:
    """A run of 66,001 events indexes them with 8-byte keys (`fold/applied.rs`): made so by a
    run.started that plans that many, or rebuilt so as the index grows past 65,536 keys, from
    the fingerprints kept so far. Redeliveries right after their event and long after it are
    told apart from new events as the Python fold tells them, and the summaries are its."""
    made = [orjson.dumps(event) for event in synthetic_run("wide", tasks=3300, attempts=4, seed=5)]
    if not started:
        made = made[1:]
    rng = Random(11)
    lines = [repeat for line in made for repeat in ([line, line] if rng.random() < 0.01 else [line])]
    lines += rng.sample(made, 300)
    native, python = NativeReplayer(), Replayer()
    for number, line in enumerate(lines, start=1):
        assert native.feed(number, line) == python.feed(number, line)
    assert native.finish() == python.stats
    assert python.stats.applied == len(made) > 65_536
    assert python.stats.redeliveries == len(lines) - len(made)
