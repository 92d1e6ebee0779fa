"""What `run.started` declares, in the shape the fold asks questions of.

A run without `run.started` has no declarations ("no specs"): every task then keeps
keys by rule 2 of SEMANTICS.md section 1 alone, and no key is eligible for pass@k.

Memory is per task, and a run may declare tens of thousands of tasks, most of them alike:
tasks (of one run or of several) that declare the same metrics and views share one
`TaskDeclaration`, and the run.started itself is kept compressed.
"""

from __future__ import annotations

import math
import sys
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from events.codec import encode
from events.models import DEFAULT_HARBOR_RULES, HarborRules, Reducer, RunStarted, Signal, TaskSpec, ViewSpec
from projections.figures.reducers import Reduce, reducer_of
from projections.packed.sharing import shared

Key = tuple[str, str]
"""(metric_type, output name); written `metric_type.output` on the wire."""

ATTEMPT_KINDS: Final = frozenset({"continuous", "discrete", "boolean"})
"""Declared kinds that always get an attempt list (rule 1); label and model never do (rule 3)."""
PASSK_KINDS: Final = frozenset({"continuous", "boolean"})
COMPRESSED_FROM: Final = 4096
"""Encoded run.started of at least this many bytes are kept compressed. Below, compressing
saves less than a KB and costs more than the rest of the run.started's step (deflate sets
up ~260 KB of state each time)."""


def key_name(key: Key) -> str:
    return f"{key[0]}.{key[1]}"


@dataclass(frozen=True, slots=True)
class DeclaredView:
    """A view as the fold reads it, made once per declaration: plain fields where a
    `ViewSpec`'s each cost an attribute lookup of a pydantic model."""

    name: str
    signals: tuple[Key, ...]
    """Its signals' (metric_type, output) keys, in declaration order."""
    reduce: Reduce


@dataclass(frozen=True, slots=True)
class TaskDeclaration:
    """What one task declares; shared by every task that declares the same (`_declared`)."""

    kinds: Mapping[Key, str]
    views: tuple[ViewSpec, ...]
    read_views: tuple[DeclaredView, ...]
    """`views` as the fold reads them, in the same order."""
    attempt_keys: tuple[Key, ...]
    """The keys declared of a kind that always gets an attempt list, in declaration order."""
    excluded: frozenset[Key]
    """The keys declared label or model: never an attempt list, whatever the values."""


@dataclass(frozen=True, slots=True)
class Declarations:
    tasks: dict[str, TaskDeclaration]
    labels: dict[str, str]
    attempts_per_task: int | None
    harbor_rules: HarborRules
    """The run's `harbor_rules`, the default where its run.started names none."""
    eligible: frozenset[Key]
    """Keys some task declares continuous or boolean: the pass@k keys."""
    outputs: dict[str, frozenset[str]]
    """Per metric_type, the output names any task declares (of any kind)."""
    started: bytes
    """The run.started they were made of, as encoded, zlib-compressed from `COMPRESSED_FROM`
    bytes on: a big run's is MBs of task specs that repeat (~1/100 compressed), and only a
    write of the run header reads it."""

    def started_wire(self) -> bytes:
        """The run.started as encoded (what the run header stores)."""
        return started_wire(self.started)

    @classmethod
    def of(cls, event: RunStarted, wire: bytes | None = None) -> Declarations:
        """`event`'s declarations; `wire` is its encoding if the caller has it (a restore
        keeps the bytes it read, whichever version of `encode` wrote them)."""
        tasks = {spec.task_id: _declaration_of(spec) for spec in event.tasks}
        encoded = encode(event) if wire is None else wire
        distinct = {id(declared): declared for declared in tasks.values()}.values()
        outputs: dict[str, set[str]] = {}
        for declared in distinct:
            for metric_type, name in declared.kinds:
                outputs.setdefault(metric_type, set()).add(name)
        eligible = frozenset(key for task in distinct for key, kind in task.kinds.items() if kind in PASSK_KINDS)
        return cls(
            tasks=tasks,
            labels=dict(event.labels),
            attempts_per_task=event.attempts_per_task,
            harbor_rules=event.harbor_rules or DEFAULT_HARBOR_RULES,
            # Sets shared across runs: runs of one harness declare the same keys and outputs,
            # and a set costs ~200 bytes a run.
            eligible=shared(eligible),
            outputs={metric: shared(frozenset(names)) for metric, names in outputs.items()},
            # Level 1: task specs repeat, so it packs them about as small as level 6 does, in half the time.
            started=zlib.compress(encoded, 1) if len(encoded) >= COMPRESSED_FROM else encoded,
        )


def started_wire(kept: bytes) -> bytes:
    """The run.started as encoded, of its bytes as `Declarations.started` keeps them (either
    fold's: the native fold keeps the same)."""
    # An encoded event is a JSON object; a zlib stream never starts with its "{".
    return kept if kept[:1] == b"{" else zlib.decompress(kept)


def _declaration_of(spec: TaskSpec) -> TaskDeclaration:
    kinds = tuple(
        ((sys.intern(metric.metric_type), sys.intern(out.name)), out.kind)
        for metric in spec.metrics
        for out in metric.outputs
    )
    return _declared(kinds, tuple(_view_key(view) for view in spec.views))


ViewKey = tuple[str, Reducer, tuple[tuple[str, str, float, float], ...]]
"""A view as (name, reducer, its signals as (metric, output, weight, weight's sign)):
hashable where the model holds lists, and apart where equal models differ on the wire (a
weight of 0.0 and one of -0.0)."""


def _view_key(view: ViewSpec) -> ViewKey:
    signals = tuple(
        (signal.metric, signal.output, signal.weight, math.copysign(1.0, signal.weight)) for signal in view.signals
    )
    return view.name, view.reducer, signals


@lru_cache(maxsize=1024)
def _declared(kinds: tuple[tuple[Key, str], ...], views: tuple[ViewKey, ...]) -> TaskDeclaration:
    """One declaration per distinct (kinds, views), built from the key itself, so that the
    tasks sharing it keep no part of their own run.started alive."""
    specs = tuple(
        ViewSpec(
            name=name,
            reducer=reducer,
            signals=[Signal(metric=metric, output=output, weight=weight) for metric, output, weight, _ in signals],
        )
        for name, reducer, signals in views
    )
    read_views = tuple(
        DeclaredView(
            sys.intern(view.name),
            tuple((sys.intern(signal.metric), sys.intern(signal.output)) for signal in view.signals),
            reducer_of(view),
        )
        for view in specs
    )
    attempt_keys = shared(tuple(key for key, kind in kinds if kind in ATTEMPT_KINDS))
    excluded = shared(frozenset(key for key, kind in kinds if kind not in ATTEMPT_KINDS))
    return TaskDeclaration(dict(kinds), specs, read_views, attempt_keys, excluded)
