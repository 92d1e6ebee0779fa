"""The fold: one run's state and the function that applies an input event to it.

`apply` is the only way state changes. It is deterministic and does no I/O; it costs
O(size of the task the event names) (plus O(run) once, for a `run.started` that arrives
after other events of its run, since declarations change which keys every task has).

A run's state is its parts (the run header and one record per task, `projections.storage`)
and what `rederive` derives from them; an event changes the header or one task, and the
derived state with them.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final, cast, final

from events.models import MOMENT, InputEvent, RunClosed, RunStarted, ScoreEmitted, TrialFinished
from events.timestamps import epoch_seconds
from projections.fold.declarations import Declarations, Key
from projections.fold.key_tallies import KeyTally
from projections.fold.redelivery import AppliedEvents
from projections.fold.task import TaskState
from projections.kernels import fingerprint, with_pair
from projections.packed import positions
from projections.packed.fingerprints import NO_PAIRS, pair_count


class Outcome(enum.Enum):
    APPLIED = "applied"
    REDELIVERY = "redelivery"
    """An event_id the run already applied: nothing changes."""
    REFUSED = "refused"
    """Valid on its own but not for this run (a second run.started): dead-letter it."""
    IGNORED = "ignored"
    """A second run.closed: the run is already closed, nothing changes."""


@final
class Applied:
    """What applying one event did. A plain class with `Final` fields, made once per event:
    the compiled fold builds it natively (a NamedTuple's constructor is Python code)."""

    __slots__ = ("outcome", "reason", "task_id")

    def __init__(self, outcome: Outcome, reason: str = "", task_id: str | None = None) -> None:
        self.outcome: Final = outcome
        self.reason: Final = reason
        self.task_id: Final = task_id
        """The task whose state the event changed, if any."""


_REDELIVERY: Final = Applied(Outcome.REDELIVERY)
_APPLIED: Final = Applied(Outcome.APPLIED)


@dataclass(slots=True)
class RunState:
    run_id: str
    declarations: Declarations | None = None
    started_event_id: str | None = None
    closed_reason: str | None = None
    closed_position: int = -1
    """The log position of the applied run.closed (-1: open)."""
    after_close: int = 0
    """Applied events whose position is after the close's: the summary's revision counts
    them. Counted by position, not by arrival, so that a state restored in parts (some
    records newer than others) gives the revision a single pass over the log gives."""
    event_count: int = 0
    last_position: int | None = -1
    """The largest log position of the applied events (-1: none), kept as they apply: a
    run.closed at it has no event after it to count. None: not known (a restore or an undo
    rebuilt the run from its parts; finding it would cost a pass over the run, which only a
    close then pays)."""
    first_at: float | None = None
    last_at: float | None = None
    """Earliest and latest `occurred_at` (epoch seconds) of run.started / run.closed (a task
    keeps its own events'); `span` puts them together for progress's ETA."""
    applied: AppliedEvents = field(default_factory=AppliedEvents)
    run_events: bytes = NO_PAIRS
    """Fingerprints of the applied run.started / run.closed (a task keeps its own events'),
    `projections.packed.fingerprints.PAIR`s."""
    run_positions: bytes = positions.NONE
    """Their log positions, one per event (`projections.packed.positions`)."""
    tasks: dict[str, TaskState] = field(default_factory=dict)
    passk: dict[Key, KeyTally] = field(default_factory=dict)
    """One tally per pass@k-eligible key."""
    trials_completed: int = 0
    trials_failed: int = 0
    score_count: int = 0
    """Run-wide counts of the tasks' trials and scores, kept as events apply (progress reads
    them on every emission; `storage.restore` sums the tasks' own)."""

    def span(self) -> float | None:
        """Seconds between the earliest and the latest `occurred_at` of the applied events."""
        # A loop rather than min() and max() of lists: the compiled fold compares the floats
        # in C (a progress event asks for the span of its run).
        first, last = self.first_at, self.last_at
        for task in self.tasks.values():
            if task.first_at is not None and (first is None or task.first_at < first):
                first = task.first_at
            if task.last_at is not None and (last is None or task.last_at > last):
                last = task.last_at
        return None if first is None or last is None else last - first

    def fingerprints(self) -> Iterator[bytes]:
        """The kept fingerprints of every applied event: the run header's, then each task's."""
        yield self.run_events
        for task in self.tasks.values():
            yield task.events

    @property
    def closed(self) -> bool:
        return self.closed_reason is not None

    @property
    def revision(self) -> int:
        """1 for the summary at close, +1 for each event applied after it in log order."""
        return self.after_close + 1

    def applied_after(self, position: int) -> int:
        """The applied events whose log position is after `position`. O(run), but 0 at
        once for the position of the latest applied event (a run closed by its last event)."""
        if self.last_position is not None and position >= self.last_position:
            return 0
        count = positions.count_after(self.run_positions, position)
        for task in self.tasks.values():
            count += positions.count_after(task.trial_positions, position)
            rows = (row for _, columns in task.metrics() for row in columns.read().rows)
            count += sum(1 for _, _, at, *_ in rows if at > position)
        return count


def started_twice(run_id: str, started_event_id: str | None) -> str:
    """Why a second run.started is refused (the native fold's refusals are worded here too)."""
    return f"run {run_id!r} already started with event {started_event_id!r}; a run has one run.started"


def summary_due(run: RunState, applied: Applied) -> bool:
    """A new summary revision is published after every event applied to a closed run."""
    return run.closed and applied.outcome is Outcome.APPLIED


def apply(run: RunState, event: InputEvent, position: int | None = None) -> Applied:
    """Apply one event of this run (the caller routes by `event.run_id`).

    `position` is where the event stands in the run's log (the worker passes its source
    offset); it orders what the summary lists in log order across tasks (undeclared tasks by
    first score, failed trials). By default it is the count of events applied, the same
    order when the run is folded in one pass. A state restored in parts (some tasks' records
    newer than others) is not one pass: the events read again would count after the events
    of records that came later in the log."""
    kind = event.type  # not isinstance: pydantic's model classes make that a slow check
    if kind == "run.started" and run.started_event_id not in (None, event.event_id):
        return Applied(Outcome.REFUSED, started_twice(run.run_id, run.started_event_id))
    hi, lo = fingerprint(event.event_id)
    if kind == "run.closed" and run.closed and not run.applied.contains(hi, lo, run.run_events, run.fingerprints):
        return Applied(Outcome.IGNORED, f"run {run.run_id!r} is already closed")
    task_id = ""
    if kind in {"score.emitted", "trial.finished"}:
        task_id = cast("ScoreEmitted | TrialFinished", event).task_id
        task = run.tasks.get(task_id)
        own = NO_PAIRS if task is None else task.events
    else:
        own = run.run_events
    if not run.applied.add(hi, lo, own, run.fingerprints):
        return _REDELIVERY
    run.event_count += 1
    at = run.event_count if position is None else position
    if run.last_position is not None:
        run.last_position = max(run.last_position, at)
    if run.closed and at > run.closed_position:
        run.after_close += 1
    moment = moment_of(event)
    if kind == "score.emitted":
        return _score(run, _task(run, task_id), cast(ScoreEmitted, event), hi, lo, moment=moment, at=at)
    if kind == "trial.finished":
        return _trial(run, _task(run, task_id), cast(TrialFinished, event), hi, lo, moment=moment, at=at)
    _saw(run, moment)
    run.run_events = with_pair(run.run_events, hi, lo)
    run.run_positions = positions.appended(run.run_positions, at)
    if isinstance(event, RunStarted):
        _start(run, event)
    elif isinstance(event, RunClosed):
        run.closed_reason = event.reason
        run.closed_position = at
        run.after_close = run.applied_after(at)
    return _APPLIED


def moment_of(event: InputEvent) -> float | None:
    """`event.occurred_at` in epoch seconds (None: not given). Decoding read it and kept it on
    the event (`MOMENT`): an attribute read here, not a second parse of the text (nor a call
    out of the compiled fold into Python). An event built without validation (`model_construct`,
    a copy) has none kept: its timestamp is read here."""
    moment: float | None = getattr(event, MOMENT, None)
    if moment is None and event.occurred_at:
        return epoch_seconds(event.occurred_at)
    return moment


def _saw(holder: RunState | TaskState, moment: float | None) -> None:
    """Widen the holder's (first_at, last_at) to include `moment`."""
    if moment is not None:
        holder.first_at = moment if holder.first_at is None else min(holder.first_at, moment)
        holder.last_at = moment if holder.last_at is None else max(holder.last_at, moment)


def _task(run: RunState, task_id: str) -> TaskState:
    task = run.tasks.get(task_id)
    if task is None:
        task = run.tasks[task_id] = TaskState(task_id)
    # The event's fingerprint, kept next, touches it: a declared task is pending no more.
    if not task.touched and run.declarations and task_id in run.declarations.tasks:
        for key in task.kept_keys():
            if key in run.passk:
                run.passk[key].pending -= 1
    return task


def _score(
    run: RunState, task: TaskState, event: ScoreEmitted, hi: int, lo: int, *, moment: float | None, at: int
) -> Applied:
    task.events = with_pair(task.events, hi, lo)
    if moment is not None:
        _saw(task, moment)
    task.record_score(event, at, run.passk)
    run.score_count += 1
    return Applied(Outcome.APPLIED, "", task.task_id)


def _trial(
    run: RunState, task: TaskState, event: TrialFinished, hi: int, lo: int, *, moment: float | None, at: int
) -> Applied:
    task.events = with_pair(task.events, hi, lo)
    if moment is not None:
        _saw(task, moment)
    task.trial_positions = positions.appended(task.trial_positions, at)
    if event.status == "completed":
        run.trials_completed += 1
    else:
        run.trials_failed += 1
        error_type = (event.error.type if event.error else None) or "UnknownError"
        if task.failed_trials is None:
            task.failed_trials = []
        task.failed_trials.append((at, error_type, event.trial_id))
    return Applied(Outcome.APPLIED, "", task.task_id)


def _start(run: RunState, event: RunStarted) -> None:
    declarations = run.declarations = Declarations.of(event)
    run.started_event_id = event.event_id
    # Each planned trial brings a trial.finished and a score per declared metric, and the
    # run.closed one more; a run without attempts_per_task plans one trial a task at least. A
    # quarter more than planned: retries and extra scores go past a plan, and a table that
    # must grow rehashes whole (~1 s for a million events; from 8 slots up to a 40k-trial
    # run, 3% of its replay).
    per_trial = 1 + max((len({m for m, _ in task.kinds}) for task in declarations.tasks.values()), default=0)
    planned = len(declarations.tasks) * (event.attempts_per_task or 1) * per_trial + run.event_count + 1
    run.applied.reserve(planned * 5 // 4, run.fingerprints)
    for task_id in declarations.tasks:
        if task_id not in run.tasks:
            run.tasks[task_id] = TaskState(task_id)
    rekey_run(run)


def rekey_run(run: RunState) -> None:
    """Decide every task's keys and the pass@k tallies afresh from the columns: when
    declarations arrive, and when a run is restored from storage (O(run), once)."""
    declarations = run.declarations
    # A new dict, also when the keys are the same: what was derived from the tallies before
    # (a summary cache) tells by it that they were decided afresh.
    run.passk = {key: KeyTally() for key in sorted(declarations.eligible)} if declarations else {}
    for task in run.tasks.values():
        task.rekey(declarations)
        for key, n, c in task.tallies():
            tally = run.passk.get(key)
            if tally is not None:
                tally.add((n, c))
                tally.pending += not task.touched


def rederive(run: RunState) -> None:
    """Derive from the run's parts (header fields, tasks' columns and fingerprints) all the
    rest: the run-wide counts, the redelivery index, every task's keys and the pass@k
    tallies, the revision. O(run): when a run is restored, and when a failed step is undone."""
    tasks = run.tasks.values()
    run.trials_completed = sum(task.trials_completed for task in tasks)
    run.trials_failed = sum(task.trials_failed for task in tasks)
    run.score_count = sum(task.score_rows() for task in tasks)
    run.event_count = sum(pair_count(pairs) for pairs in run.fingerprints())
    run.applied = AppliedEvents.of_kept(run.fingerprints, run.event_count)
    rekey_run(run)
    run.last_position = None
    run.after_close = run.applied_after(run.closed_position) if run.closed else 0
