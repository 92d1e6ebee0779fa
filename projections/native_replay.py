"""What each line of an event log makes `evalstream replay` write, through the native fold
(`projections.kernels.native_fold`): `Replayer`'s outputs, byte for byte, progress included
(tests/projections/test_native_fold.py and test_native_progress.py hold the two to each other).

A line of a common type that the native reader is certain of is applied to its run from its
bytes; any other line is decoded in Python (`projections.step.checked`, the same rejections as
`Replayer`'s) and its event applied to the native run: a run.started with the declarations the
Python fold reads (`Declarations.of`), any other through its model.

The native apply checks everything before it changes a run, so a step has nothing to roll back;
a failure inside it is a bug (a panic), and replay stops on it rather than go on with a run no
log gives (as it stops when `Replayer` cannot put a run back: `projections.step.RollbackFailed`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Protocol

from events.codec import MAX_EVENT_BYTES
from events.models import EVENT_ID_MAX, NAME_MAX, RUN_ID_MAX, InputEvent, RunStarted
from events.nonfinite import NONFINITE_STRINGS
from projections.closed_caches import CLOSED_CACHES_BYTES
from projections.fold.declarations import Declarations, Key
from projections.fold.run import moment_of, started_twice
from projections.kernels import native_fold
from projections.replayer import STDOUT, Output, Replayer, ReplayStats, message_of, rejected
from projections.step import Stepped, checked

NATIVE: Final = native_fold()
"""The native fold's module (None: not built; `Replayer` alone replays)."""


def native_apply(run: Any, event: InputEvent, position: int | None, declarations: Declarations | None = None) -> str:
    """Apply a decoded `event` to the `NativeRun` `run`: its outcome's name. A run.started
    goes with its declarations as the Python fold reads them (`declarations`, read here when
    not given; `declaration_args`); any other event through its model."""
    moment = moment_of(event)
    if not isinstance(event, RunStarted):
        outcome: str = run.apply(event, moment, position)
        return outcome
    if declarations is None:
        declarations = Declarations.of(event)
    started: str = run.apply_started(event.event_id, declaration_args(declarations), moment, position)
    return started


ViewArgs = tuple[str, str, list[tuple[str, str, float]]]
"""A view: its name, its reducer, its signals' (metric, output, weight) in order."""
TaskArgs = tuple[str, tuple[list[Key], list[Key], list[Key]], list[ViewArgs]]
"""A declared task: its id, its keys (attempt keys in order, excluded, every declared key), its views."""
DeclarationArgs = tuple[
    list[TaskArgs],
    list[Key],
    int | None,
    list[tuple[str, str]],
    str,
    bytes,
]
"""A run.started's declarations as `NativeRun` takes them: the declared tasks in order, the
eligible keys, the plan, the labels in order, the Harbor rules, and the run.started as kept
(`Declarations.started`, which the run header stores)."""


def declaration_args(declarations: Declarations) -> DeclarationArgs:
    """`declarations` (the Python fold's reading of a run.started) as `NativeRun` takes them."""
    tasks: list[TaskArgs] = [
        (
            task_id,
            (list(declared.attempt_keys), sorted(declared.excluded), list(declared.kinds)),
            [
                (view.name, view.reducer, [(signal.metric, signal.output, signal.weight) for signal in view.signals])
                for view in declared.views
            ],
        )
        for task_id, declared in declarations.tasks.items()
    ]
    return (
        tasks,
        sorted(declarations.eligible),
        declarations.attempts_per_task,
        list(declarations.labels.items()),
        declarations.harbor_rules,
        declarations.started,
    )


def fold_reader() -> Any:
    """The native fold's reader of messages, with the contract's bounds (those the recogniser
    is given, `events.compiled`)."""
    assert NATIVE is not None, "the native fold is not built"
    return NATIVE.FoldReader(EVENT_ID_MAX, RUN_ID_MAX, NAME_MAX, list(NONFINITE_STRINGS.items()), MAX_EVENT_BYTES)


class NativeReplayer:
    """Every run seen so far, held by the native fold, and what each line makes replay write."""

    def __init__(self, progress_every: int | None = None) -> None:
        """`progress_every`: a run's progress is written every that many applied events of
        it, and at its close, as `Replayer` writes it (None or 0: never)."""
        assert NATIVE is not None, "the native fold is not built"
        self._native = NATIVE
        self.progress_every = progress_every
        self.runs: dict[str, Any] = {}
        """Run id -> its `NativeRun`."""
        self.stats = ReplayStats()
        self._reader = fold_reader()

    def feed(self, number: int, line: bytes) -> Sequence[Output]:
        """What line `number` of a file makes replay write."""
        value = message_of(line)
        if value is None:
            return ()
        applied = self.apply(value)
        if isinstance(applied, Stepped):
            assert applied.rejected is not None
            return self._rejected(number, applied.rejected.code, applied.rejected.detail)
        run_id, outcome = applied
        if outcome == "refused":
            started = self.runs[run_id].header()["started_event_id"]
            return self._rejected(number, "refused", started_twice(run_id, started))
        if outcome != "applied":
            self.stats.redeliveries += outcome == "redelivery"
            self.stats.ignored += outcome == "ignored"
            return ()
        self.stats.applied += 1
        run = self.runs[run_id]
        closed = run.closed()
        if not closed and not self.progress_every:
            return ()
        outputs = []
        count = run.event_count()
        if self.progress_every and (closed or count % self.progress_every == 0):
            outputs.append((number, STDOUT, run.progress_bytes(count) + b"\n"))
        if closed:
            self.stats.summaries += 1
            outputs.append((number, STDOUT, run.summary_bytes() + b"\n"))
        return outputs

    def feed_lines(self, first: int, lines: list[bytes]) -> list[Output]:
        """What lines `first`, `first` + 1, ... of a file make replay write: those the native
        reader takes applied in one call, each other one as `feed` takes it."""
        outputs: list[Output] = []
        at = 0
        while at < len(lines):
            stop, written, counts = self._reader.replay_lines(self.runs, lines, at, self.progress_every)
            outputs.extend((first + index, STDOUT, output) for index, output in written)
            applied, redelivered, ignored, summaries = counts
            self.stats.applied += applied
            self.stats.redeliveries += redelivered
            self.stats.ignored += ignored
            self.stats.summaries += summaries
            if stop < len(lines):
                outputs.extend(self.feed(first + stop, lines[stop]))
            at = stop + 1
        return outputs

    def apply(self, value: bytes) -> tuple[str, str] | Stepped:
        """Apply message `value` (a line without its end) to its run, made when new: (its run
        id, the outcome's name), or the rejection of a message no run can take."""
        read: tuple[str, str] | None = self._reader.apply(self.runs, value, None)
        if read is not None:
            return read
        event = checked(value)
        if isinstance(event, Stepped):
            return event
        return event.run_id, self._apply(event)

    def _apply(self, event: InputEvent) -> str:
        run = self.runs.get(event.run_id)
        if run is None:
            run = self.runs[event.run_id] = self._native.NativeRun(event.run_id)
        return native_apply(run, event, None)

    def _rejected(self, number: int, code: str, detail: str) -> Sequence[Output]:
        self.stats.skipped += 1
        return [rejected(number, code, detail)]

    def finish(self) -> ReplayStats:
        # A run whose only events were refused has nothing applied: not a run.
        self.stats.open_runs = sum(1 for run in self.runs.values() if not run.closed() and run.event_count())
        return self.stats


class LineReplayer(Protocol):
    """What a replay of a file asks of the fold: the outputs of each line or run of lines,
    then the stats."""

    def feed(self, number: int, line: bytes) -> Sequence[Output]: ...

    def feed_lines(self, first: int, lines: list[bytes]) -> list[Output]: ...

    def finish(self) -> ReplayStats: ...


def replayer(
    progress_every: int | None = None, closed_caches_bytes: int = CLOSED_CACHES_BYTES, *, native: bool = True
) -> LineReplayer:
    """The fold a replay of a file goes through: the native one where it is built, unless
    `native` is False (a benchmark's baseline); else the Python fold (`closed_caches_bytes`
    bounds its closed runs' summary caches: the native fold keeps none)."""
    if native and NATIVE is not None:
        return NativeReplayer(progress_every)
    return Replayer(progress_every, closed_caches_bytes)
