"""What `run.started` declares, in the shape the fold asks questions of.

A run without `run.started` has no declarations ("no specs"): every task then keeps
keys by rule 2 of SEMANTICS.md section 1 alone, and no key is eligible for pass@k.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass

from events.models import RunStarted, ViewSpec

Key = tuple[str, str]
"""(metric_type, output name); written `metric_type.output` on the wire."""

ATTEMPT_KINDS = frozenset({"continuous", "discrete", "boolean"})
"""Declared kinds that always get an attempt list (rule 1); label and model never do (rule 3)."""
PASSK_KINDS = frozenset({"continuous", "boolean"})


def key_name(key: Key) -> str:
    return f"{key[0]}.{key[1]}"


@dataclass(frozen=True, slots=True)
class TaskDeclaration:
    task_id: str
    kinds: Mapping[Key, str]
    views: tuple[ViewSpec, ...]


@dataclass(frozen=True, slots=True)
class Declarations:
    tasks: dict[str, TaskDeclaration]
    labels: dict[str, str]
    attempts_per_task: int | None
    eligible: frozenset[Key]
    """Keys some task declares continuous or boolean: the pass@k keys."""
    outputs: dict[str, frozenset[str]]
    """Per metric_type, the output names any task declares (of any kind)."""

    @classmethod
    def of(cls, event: RunStarted) -> Declarations:
        tasks: dict[str, TaskDeclaration] = {}
        outputs: dict[str, set[str]] = {}
        # Most tasks of a run declare the same metrics: share one mapping between them
        # (memory is per task, and a run may declare tens of thousands).
        shared: dict[tuple[tuple[Key, str], ...], dict[Key, str]] = {}
        for spec in event.tasks:
            items = tuple(
                ((sys.intern(metric.metric_type), sys.intern(out.name)), out.kind)
                for metric in spec.metrics
                for out in metric.outputs
            )
            kinds = shared.setdefault(items, dict(items))
            tasks[spec.task_id] = TaskDeclaration(spec.task_id, kinds, tuple(spec.views))
            for metric_type, name in kinds:
                outputs.setdefault(metric_type, set()).add(name)
        eligible = frozenset(key for task in tasks.values() for key, kind in task.kinds.items() if kind in PASSK_KINDS)
        return cls(
            tasks=tasks,
            labels=dict(event.labels),
            attempts_per_task=event.attempts_per_task,
            eligible=eligible,
            outputs={metric: frozenset(names) for metric, names in outputs.items()},
        )
