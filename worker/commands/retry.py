"""`evalstream retry RUN_ID`: the tasks a harness must run again, as JSON lines.

Reads the run's latest summary (the summaries topic, or `--from-file` as `gate` reads it) and
prints, per task that lacks attempts (`projections.analysis.retry`), one line:
`{"run_id", "task_id", "lacks", "attempts_per_task", "dead_trials", "not_retried", "keys": {key:
{"measured", "dead", "lacks", "not_retried"}}}`; a harness runs `lacks` more trials of
`task_id`. Trials the run's `not_retried` label names (Harbor's retry rule) are not counted as
lacking. A line on stderr says how
many tasks and attempts that is, and where attempts_per_task came from.

attempts_per_task is not in the summary (EVENTS.md's `run.summary` has no such field), so it
is, in this order: `--attempts-per-task N`; else the run's latest `run.progress`
(`trials.expected / tasks.declared`: expected is attempts_per_task x declared tasks when the
run's `run.started` gave one), from the progress topic or the same file (`evalstream replay
--progress` prints progress lines); else the command refuses (exit 2) and says to pass the flag,
rather than guess a number of attempts a harness would then run.
"""

from __future__ import annotations

import asyncio
import sys
from typing import TextIO

import orjson

from events import not_retried
from events.clients.kafka import TopicMissing
from events.outputs import RunProgress, RunSummary
from projections.analysis.retry import retries
from worker.commands.clients import progress_subscriber
from worker.commands.gate import outputs_from_file, summaries_from_topic
from worker.failure import CommandError, opened
from worker.settings import Settings


def run(
    run_id: str,
    *,
    from_file: str | None,
    attempts_per_task: int | None,
    settings: Settings,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    if attempts_per_task is not None and attempts_per_task < 1:
        raise CommandError(f"--attempts-per-task is a count, >= 1; got {attempts_per_task}")
    progress: RunProgress | None = None
    if from_file is None:
        summary = asyncio.run(summaries_from_topic(settings, [run_id]))[run_id]
        if attempts_per_task is None:
            progress = asyncio.run(_latest_progress(settings, run_id))
        where = f"topic {settings.progress_topic!r} at {settings.bootstrap}"
    else:
        name = "stdin" if from_file == "-" else from_file
        with opened(from_file, "a summaries JSONL file (what `evalstream replay` prints)") as stream:
            try:
                summaries, progresses = outputs_from_file(stream, name, [run_id])
            except OSError as error:
                raise CommandError(f"reading {name} failed: {error}") from None
        summary, progress = summaries[run_id], progresses.get(run_id)
        where = name
    if attempts_per_task is not None:
        per_task, source = attempts_per_task, "--attempts-per-task"
    else:
        per_task, source = _from_progress(summary, progress, where), f"its run.progress in {where}"
    try:
        found = retries(summary, per_task)
    except ValueError as error:
        raise CommandError(f"run {run_id!r}: {error}; fix or drop the label where the run is produced") from None
    for retry in found:
        line = {"run_id": run_id, "task_id": retry.task_id, "lacks": retry.lacks, "attempts_per_task": per_task}
        line |= {"dead_trials": retry.dead_trials, "not_retried": retry.not_retried, "keys": retry.keys}
        out.write(orjson.dumps(line).decode() + "\n")
    missing = sum(retry.lacks for retry in found)
    tasks = "1 task lacks" if len(found) == 1 else f"{len(found)} tasks lack"
    settled = sum(map(len, not_retried.decode(summary.labels).values()))
    kept = f"; {settled} unmeasured trials its harness would not retry (label not_retried) left out" if settled else ""
    err.write(
        f"retry: run {run_id!r} (revision {summary.revision}): {tasks} {missing} attempt{'' if missing == 1 else 's'} "
        f"(attempts_per_task {per_task}, from {source}){kept}\n"
    )
    return 0


def _from_progress(summary: RunSummary, progress: RunProgress | None, where: str) -> int:
    if progress is not None and progress.trials.expected is not None and progress.tasks.declared:
        per_task, rest = divmod(progress.trials.expected, progress.tasks.declared)
        if per_task >= 1 and not rest:
            return per_task
    said = "no run.progress of it" if progress is None else "a run.progress without expected trials"
    raise CommandError(
        f"attempts_per_task of run {summary.run_id!r} is unknown: its summary does not carry it, and {where} has "
        f"{said} (its run.started gave none, or the progress is not kept); pass --attempts-per-task N"
    )


async def _latest_progress(settings: Settings, run_id: str) -> RunProgress | None:
    subscriber = progress_subscriber(settings, run_ids=[run_id])
    try:
        await subscriber.start()
    except TopicMissing:
        return None
    try:
        return (await subscriber.latest()).get(run_id)
    finally:
        await subscriber.stop()
