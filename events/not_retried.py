"""The `not_retried` label: a run's trials that its harness would not run again.

`run.summary` carries a trial's error only as its first type in `harbor.exception_stats`, and a
trial whose score failed as a metric not at all in the attempts, so a summary cannot tell which
of a task's unmeasured trials its harness would retry. A producer that knows says so in the run's
labels (EVENTS.md: a flat string-to-string map, carried into the summary unchanged): the label
`not_retried` is a JSON object `{task_id: [trial_id, ...]}` of the trials left unmeasured (dead,
or a score that failed as a metric) that the harness would not retry. The Harbor importer writes
it by Harbor's retry rule; `evalstream retry` reads it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

LABEL = "not_retried"


def encode(trials: Mapping[str, Sequence[str]]) -> str:
    """The label's value: tasks and their trials in the order given."""
    return json.dumps({task: list(names) for task, names in trials.items()}, separators=(",", ":"))


def decode(labels: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """The trials not retried by task; `{}` without the label. Raises `ValueError` naming what
    is wrong when the label is not such an object."""
    text = labels.get(LABEL)
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"label {LABEL!r} is not JSON ({error.msg}): {text[:80]!r}") from None
    if not isinstance(value, dict) or not all(
        isinstance(names, list) and all(isinstance(name, str) for name in names) for names in value.values()
    ):
        raise ValueError(f"label {LABEL!r} is not an object of task ids to lists of trial ids: {text[:80]!r}")
    return {task: tuple(names) for task, names in value.items()}
