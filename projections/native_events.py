"""How events reach a run of the native fold (`projections.kernels.native_fold`), for replay
(`projections.native_replay`) and the worker (`projections.native_step`): the reader of
messages from their bytes (`fold_reader`), and a decoded event applied through its model
(`native_apply`), a run.started with the declarations the Python fold reads
(`declaration_args`), and the wording of a refused second run.started (`refused_started`).
"""

from __future__ import annotations

from typing import Any, Final

from events.codec import MAX_EVENT_BYTES
from events.models import EVENT_ID_MAX, NAME_MAX, RUN_ID_MAX, InputEvent, RunStarted
from events.nonfinite import NONFINITE_STRINGS
from projections.fold.declarations import Declarations, Key
from projections.fold.run import moment_of, started_twice
from projections.kernels import native_fold

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


def refused_started(run_id: str, run: Any) -> str:
    """Why a second run.started of the `NativeRun` `run` was refused, as the Python fold says it."""
    return started_twice(run_id, run.header()["started_event_id"])


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
