"""Every field of the v1 input events given a value of a wrong type, one field a message: the
"wrong-type:..." kinds of `tests.faults.poison`.

Each `WrongType` names the event, the field's path in it, the wrong value and the dead-letter
reason it must get. The values are the plausible mistakes: a number where a name goes, a
number written as a string, an object where a list goes, a record written as the array of its
values (`"usage": [1, 2, 0.5]`), a list where a record goes.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Final, Literal

Event = Literal["trial.finished", "score.emitted", "run.started", "run.closed"]
Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class WrongType:
    event: Event
    path: Path
    value: Any
    reason: str = "invalid-field"

    @property
    def kind(self) -> str:
        return f"wrong-type:{self.event}:{'.'.join(str(part) for part in self.path)}"


def _all(event: Event, value: Any, *paths: Path) -> list[WrongType]:
    return [WrongType(event, path, value) for path in paths]


TASK: Final[Path] = ("tasks", 0)
METRIC: Final[Path] = (*TASK, "metrics", 0)
VIEW: Final[Path] = (*TASK, "views", 0)
SIGNAL: Final[Path] = (*VIEW, "signals", 0)

FIELDS: Final[tuple[WrongType, ...]] = (
    WrongType("trial.finished", ("schema_version",), "1", "schema-version"),
    WrongType("trial.finished", ("type",), 12, "unknown-type"),
    *_all("trial.finished", 12, ("event_id",), ("run_id",), ("occurred_at",), ("task_id",), ("trial_id",)),
    *_all("trial.finished", 12, ("status",), ("error", "type"), ("error", "message")),
    WrongType("trial.finished", ("usage", "input_tokens"), "1200"),
    WrongType("trial.finished", ("error",), ["Timeout", "took too long"]),
    WrongType("trial.finished", ("usage",), [1200, 300, 0.5]),
    WrongType("trial.finished", ("usage", "output_tokens"), 1.5),
    WrongType("trial.finished", ("usage", "cost_usd"), "0.5"),
    *_all("score.emitted", 12, ("task_id",), ("trial_id",), ("metric_type",), ("status",), ("failure",)),
    WrongType("score.emitted", ("outputs",), {"score": 0.5}),
    WrongType("score.emitted", ("outputs", 0), ["score", 0.5]),
    WrongType("score.emitted", ("outputs", 0, "name"), 12),
    WrongType("score.emitted", ("outputs", 0, "value"), [0.5]),
    WrongType("score.emitted", ("error",), "Timeout"),
    WrongType("run.started", ("tasks",), {"task-00000": {}}),
    WrongType("run.started", TASK, ["task-00000"]),
    *_all("run.started", 12, (*TASK, "task_id"), (*METRIC, "metric_type"), (*VIEW, "name"), (*VIEW, "reducer")),
    *_all("run.started", 12, (*METRIC, "outputs", 0, "name"), (*METRIC, "outputs", 0, "kind")),
    *_all("run.started", 12, (*SIGNAL, "metric"), (*SIGNAL, "output")),
    WrongType("run.started", (*TASK, "metrics"), "reward"),
    WrongType("run.started", (*METRIC, "outputs"), {"score": "continuous"}),
    WrongType("run.started", (*TASK, "views"), 12),
    WrongType("run.started", (*VIEW, "signals"), {"metric": "reward"}),
    WrongType("run.started", (*SIGNAL, "weight"), "1.0"),
    WrongType("run.started", ("attempts_per_task",), "3"),
    WrongType("run.started", ("labels",), "suite"),
    WrongType("run.started", ("harbor_rules",), 0.26),
    WrongType("run.closed", ("reason",), 12),
)
"""One wrong value for every field, the nested ones too, of each input type (the envelope's on
trial.finished)."""


def given(body: dict[str, Any], wrong: WrongType) -> dict[str, Any]:
    """A copy of `body` with `wrong.value` at `wrong.path`."""
    changed = copy.deepcopy(body)
    container: Any = changed
    for part in wrong.path[:-1]:
        container = container[part]
    container[wrong.path[-1]] = wrong.value
    return changed
