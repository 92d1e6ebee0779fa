"""A seeded synthetic eval: realistic v1 event logs for demos, benchmarks and tests.

One run declares `tasks` tasks, each with four metrics: `reward.score` (continuous),
`complete.passed` (boolean), `steps.count` (discrete) and `usage.prompt_tokens` (model).
Each task gets `attempts` trials. Every trial publishes `trial.finished` and one
`score.emitted` per metric. A trial dies with probability `trial_failure_rate` (then
each metric scores `failed`/`trial`); otherwise each metric breaks with probability
`metric_failure_rate` (`failed`/`metric`). A task has a hidden difficulty: a trial passes
(reward 1.0, passed true) with that task's probability, else its reward is one of 0,
0.25, 0.5, 0.75. Trials of all tasks are shuffled; the run ends with `run.closed`.
The same seed gives the same events, byte for byte.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

Event = dict[str, Any]

METRICS = (
    ("reward", "score", "continuous"),
    ("complete", "passed", "boolean"),
    ("steps", "count", "discrete"),
    ("usage", "prompt_tokens", "model"),
)


def synthetic_run(
    run_id: str,
    *,
    tasks: int = 20,
    attempts: int = 5,
    trial_failure_rate: float = 0.05,
    metric_failure_rate: float = 0.02,
    seed: int = 0,
) -> Iterator[Event]:
    """The events of one run, in publish order."""
    rng = random.Random(f"{seed}:{run_id}")
    counter = 0

    def envelope(kind: str) -> Event:
        nonlocal counter
        counter += 1
        return {"schema_version": 1, "type": kind, "event_id": f"{run_id}:{counter}", "run_id": run_id}

    task_ids = [f"task-{index:05d}" for index in range(tasks)]
    yield {
        **envelope("run.started"),
        "attempts_per_task": attempts,
        "labels": {"benchmark": "synthetic", "seed": str(seed)},
        "tasks": [
            {
                "task_id": task_id,
                "metrics": [
                    {"metric_type": metric, "outputs": [{"name": output, "kind": kind}]}
                    for metric, output, kind in METRICS
                ],
                "views": [
                    {
                        "name": "quality",
                        "reducer": "weighted",
                        "signals": [
                            {"metric": "reward", "output": "score", "weight": 2.0},
                            {"metric": "complete", "output": "passed", "weight": 1.0},
                        ],
                    }
                ],
            }
            for task_id in task_ids
        ],
    }
    difficulty = {task_id: rng.random() for task_id in task_ids}
    trials = [(task_id, attempt) for task_id in task_ids for attempt in range(attempts)]
    rng.shuffle(trials)
    for task_id, attempt in trials:
        yield from _trial(
            rng,
            envelope,
            task_id=task_id,
            trial_id=f"{task_id}__{attempt}",
            pass_rate=difficulty[task_id],
            trial_failure_rate=trial_failure_rate,
            metric_failure_rate=metric_failure_rate,
        )
    yield {**envelope("run.closed"), "reason": "completed"}


def _trial(
    rng: random.Random,
    envelope: Any,
    *,
    task_id: str,
    trial_id: str,
    pass_rate: float,
    trial_failure_rate: float,
    metric_failure_rate: float,
) -> Iterator[Event]:
    ids = {"task_id": task_id, "trial_id": trial_id}
    if rng.random() < trial_failure_rate:
        yield {
            **envelope("trial.finished"),
            **ids,
            "status": "failed",
            "error": {"type": "SandboxTimeout", "message": "no start"},
        }
        for metric, _, _ in METRICS:
            yield {
                **envelope("score.emitted"),
                **ids,
                "metric_type": metric,
                "status": "failed",
                "failure": "trial",
                "outputs": [],
            }
        return
    yield {**envelope("trial.finished"), **ids, "status": "completed"}
    passed = rng.random() < pass_rate
    values = {
        "reward": 1.0 if passed else rng.choice((0.0, 0.25, 0.5, 0.75)),
        "complete": passed,
        "steps": rng.randint(1, 40),
        "usage": rng.randint(500, 20_000),
    }
    for metric, output, _ in METRICS:
        if rng.random() < metric_failure_rate:
            yield {
                **envelope("score.emitted"),
                **ids,
                "metric_type": metric,
                "status": "failed",
                "failure": "metric",
                "outputs": [],
            }
        else:
            yield {
                **envelope("score.emitted"),
                **ids,
                "metric_type": metric,
                "status": "completed",
                "outputs": [{"name": output, "value": values[metric]}],
            }


def interleave(runs: list[Iterator[Event]], seed: int = 0) -> Iterator[Event]:
    """Merge several runs' events as a busy topic holds them: order within a run kept."""
    rng = random.Random(seed)
    live = list(runs)
    while live:
        source = rng.randrange(len(live))
        event = next(live[source], None)
        if event is None:
            live.pop(source)
        else:
            yield event
