"""`evalstream history`: a task's verdict and pass rate in each run of a label set, oldest first,
and the tasks whose verdict changed between those runs: what the dashboard's `/task` page
shows, from the same function (`projections.analysis.history`).

Runs come from the summaries topic (each run's latest revision, in the order their summaries
were published: the Kafka timestamp, as on the dashboard) or from a file of summaries such as
`evalstream replay` prints (each run's highest revision, in the order of the file).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import BinaryIO, TextIO

import orjson
from pydantic import ValidationError

from events.codec import decode_output, output_problem
from events.outputs import RunSummary
from projections.analysis.history import History, RunTasks, history, run_tasks
from worker.failure import ENVIRONMENT, CommandError, opened, topic_missing
from worker.settings import Settings
from worker.topic_reader import topic_reader

SHOWN_FLIPS = 40
"""Rows of changed tasks the text lists; --json lists every one."""


def labels_of(values: Sequence[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for value in values:
        name, sign, wanted = value.partition("=")
        if not sign or not name:
            raise CommandError(f"--label {value!r} is not NAME=VALUE; write e.g. --label benchmark=swe-lite")
        found[name] = wanted
    return found


def runs_from_file(stream: BinaryIO, name: str) -> list[RunTasks]:
    """Each run's highest revision in `stream`, placed in time by its line."""
    latest: dict[str, tuple[int, RunTasks]] = {}
    for number, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            record = decode_output(line)
        except ValidationError as error:
            raise CommandError(
                f"{name} line {number}: not an output record: {output_problem(error)}; "
                "pass the summaries `evalstream replay` or `evalstream summaries` prints"
            ) from None
        if isinstance(record, RunSummary):
            _offer(latest, record, float(number))
    return [tasks for _, tasks in latest.values()]


async def runs_from_topic(settings: Settings) -> list[RunTasks]:
    """Each run's latest summary on the summaries topic, read to its end as it is now."""
    consumer = await topic_reader(settings, settings.summaries_topic, wait=0)
    if consumer is None:
        raise topic_missing(
            settings.summaries_topic, settings.bootstrap, "--summaries-topic", "read a file with --from-file"
        )
    latest: dict[str, tuple[int, RunTasks]] = {}
    try:
        ends = await consumer.end_offsets(list(consumer.assignment()))
        for partition, end in ends.items():
            while await consumer.position(partition) < end:
                for record in (await consumer.getmany(partition, timeout_ms=500)).get(partition, []):
                    if record.value is None:
                        if record.key is not None:
                            latest.pop(record.key.decode(errors="replace"), None)  # a tombstone
                        continue
                    try:
                        summary = RunSummary.model_validate_json(record.value)
                    except ValidationError:
                        continue  # not a summary: the dashboard skips it too
                    _offer(latest, summary, record.timestamp / 1000)
    finally:
        await consumer.stop()
    return [tasks for _, tasks in latest.values()]


def _offer(latest: dict[str, tuple[int, RunTasks]], summary: RunSummary, at: float) -> None:
    held = latest.get(summary.run_id)
    if held is None or held[0] < summary.revision:
        latest[summary.run_id] = (summary.revision, run_tasks(summary, at))


def report(runs: list[RunTasks], labels: dict[str, str], task_id: str | None, *, as_json: bool, out: TextIO) -> int:
    shown = history(runs, labels, task_id)
    said = " ".join(f"{name}={value}" for name, value in labels.items()) or "(every run)"
    if not shown.runs:
        raise CommandError(f"no run with the labels {said} has a summary; check --label", ENVIRONMENT)
    if task_id is not None and not any(run.outcomes for run in shown.task):
        raise CommandError(
            f"no run with the labels {said} has a task {task_id!r}; the changed tasks: "
            f"evalstream history {' '.join(f'--label {n}={v}' for n, v in labels.items())}".rstrip(),
            ENVIRONMENT,
        )
    if as_json:
        out.write(orjson.dumps(asdict(shown), option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    _print(shown, said, out)
    return 0


def _safe(text: str) -> str:
    """`text` with what a terminal would act on (escape sequences, carriage returns) shown
    as escapes: run and task ids come from whoever published the events."""
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _print(shown: History, said: str, out: TextIO) -> None:
    said = _safe(said)
    if shown.task_id is not None:
        print(f"task {shown.task_id!r} in the {len(shown.runs)} runs of {said}, oldest first:", file=out)
        for run in shown.task:
            if not run.outcomes:
                print(f"  {_safe(run.run_id)}: no such task", file=out)
            for key, outcome in run.outcomes.items():
                rate = "-" if outcome.pass_rate is None else f"{outcome.pass_rate:.3f}"
                counts = f"{rate} ({outcome.passed}/{outcome.attempts})"
                print(f"  {_safe(run.run_id)}  {_safe(key)}  {outcome.verdict:<10}  {counts}", file=out)
    if not shown.flips:
        print(f"no task changed its verdict between the {len(shown.runs)} runs of {said}", file=out)
        return
    print(f"tasks whose verdict changed between the {len(shown.runs)} runs of {said}:", file=out)
    print("  changes/measured  task  key  first changed in  verdict now", file=out)
    for flip in shown.flips[:SHOWN_FLIPS]:
        print(
            f"  {flip.changes}/{flip.measured}  {_safe(flip.task_id)}  {_safe(flip.key)}  "
            f"{_safe(flip.first_changed_in)}  {flip.last_verdict}",
            file=out,
        )
    if len(shown.flips) > SHOWN_FLIPS:
        print(f"  and {len(shown.flips) - SHOWN_FLIPS} more (--json lists every one)", file=out)


def run(labels: Sequence[str], task_id: str | None, *, from_file: str | None, settings: Settings, as_json: bool) -> int:
    wanted = labels_of(labels)
    if from_file is not None:
        with opened(from_file, "a file of summaries (as `evalstream replay` prints)") as stream:
            runs = runs_from_file(stream, "stdin" if from_file == "-" else from_file)
    else:
        runs = asyncio.run(runs_from_topic(settings))
    return report(runs, wanted, task_id, as_json=as_json, out=sys.stdout)
