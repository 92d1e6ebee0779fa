"""`evalstream gate --live BASELINE CANDIDATE`: decide while the candidate runs.

The baseline is its latest summary (the summaries topic, or `--from-file`). The candidate is
folded from the events topic as it lands, with the worker's own step (`projections.step`,
what `replay --from-topic` uses: the records keyed by the candidate's run id, in offset
order, the offset as the position), from the start of the topic, so a gate started late
catches up first. The events topic, not the worker's progress: progress carries no per-task
attempts. After each applied event, `projections.analysis.gate.live` pairs the attempts it added
with the baseline's and updates each key's anytime-valid confidence sequence (`projections.analysis.gate.sequence`: the
predictable plug-in empirical-Bernstein CS of Waudby-Smith and Ramdas 2024, after Howard et
al. 2021), which stays valid however often it is looked at; a line is printed per look.

Each look says its key's state (`projections.analysis.gate.decision` on the sequence: PASS, WARN,
INCONCLUSIVE, BLOCK). It exits as soon as it can, with the fixed gate's codes:
- 3 (BLOCK) once a key's confidence sequence lies wholly below -threshold;
- 0 (PASS), or WARN's once every key's lies wholly above -threshold (a drop beyond it ruled
  out) and some key's below 0 (a real drop within it);
- at the candidate's close, the worst key's state: 0 for PASS, and for WARN and INCONCLUSIVE
  (a key whose sequence still holds 0 and -threshold) unless `--fail-on` names them (4, 5);
- 1 environment (no broker, no events or summaries topic, no baseline summary in the topic,
  nothing decided by `--timeout`), 2 usage (as `gate`: a bad flag, an unreadable file, a
  `--key` the baseline has no pass@k of).
Each decision line says which, when (UTC, and the candidate's trials so far), and after how
many paired tasks; `--on-decision` and `--webhook` act on it (`worker.commands.gate_actions`).
It reads with no consumer group and writes nothing to Kafka.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson

from projections.analysis.compare import NotComparable
from projections.analysis.gate.decision import BLOCK, INCONCLUSIVE, WARN
from projections.analysis.gate.live import LiveGate, Look, live_gate
from projections.fold.run import RunState
from projections.held import Held
from projections.packed.trial_ids import count
from projections.step import step
from worker.commands.gate import Options, load_summaries
from worker.commands.gate_actions import Actions, act
from worker.failure import ENVIRONMENT, CommandError, topic_missing
from worker.settings import Settings
from worker.topic_reader import topic_reader


def run_live(
    baseline: str,
    candidate: str,
    *,
    from_file: str | None,
    settings: Settings,
    options: Options,
    timeout: float | None = None,
    actions: Actions | None = None,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """The command: load the baseline, follow the candidate until a decision, act on it, return
    its exit code."""
    options.check()
    if actions is not None:
        actions.check()
    if options.report is not None or options.report_format not in (None, "json"):
        raise CommandError(
            "the reports (--report, --format junit or markdown) are of the fixed gate's comparison; "
            "gate --live prints its looks and decision, as JSON lines with --format json"
        )
    if options.max_regressions is not None:
        raise CommandError("--max-regressions counts verdicts at the close: use it without --live")
    if timeout is not None and not timeout > 0:
        raise CommandError(f"--timeout is in seconds, > 0; got {timeout:g}")
    summary = load_summaries([baseline], from_file=from_file, settings=settings)[baseline]
    try:
        gate = live_gate(summary, options.keys, options.threshold)
    except NotComparable as error:
        raise CommandError(str(error)) from None

    async def decide_and_act() -> int:
        decided = await follow(settings, baseline, candidate, gate, options, timeout=timeout, out=out, err=err)
        if actions:
            await act(actions, decided.record, decided.text, decided.code, err)
        return decided.code

    return asyncio.run(decide_and_act())


async def follow(
    settings: Settings,
    baseline: str,
    candidate: str,
    gate: LiveGate,
    options: Options,
    *,
    timeout: float | None,
    out: TextIO,
    err: TextIO,
) -> Decided:
    """Fold the candidate's records of the events topic, every partition from its start (a run
    lives in one, in offset order; the others' records are skipped by key), until a decision."""
    consumer = await topic_reader(settings, settings.events_topic, wait=0)
    if consumer is None:
        raise topic_missing(settings.events_topic, settings.bootstrap, "--events-topic")
    held = Held(RunState(candidate))
    run = held.run
    trials = Trials(run)
    wanted = candidate.encode()
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    try:
        while deadline is None or loop.time() < deadline:
            for partition, records in (await consumer.getmany(timeout_ms=500)).items():
                for record in records:
                    if record.key != wanted:
                        continue
                    stepped = step(
                        record.value or b"", lambda _: held, position=record.offset, keyed=True, key=record.key
                    )
                    if stepped.rejected is not None:
                        where = f"{partition.topic}[{partition.partition}]@{record.offset}"
                        err.write(f"{where}: {stepped.rejected.code}: {stepped.rejected.detail}\n")
                        continue
                    if not stepped.applied:
                        continue
                    trials.update(stepped.task_id)
                    for look in gate.after(run, stepped.task_id):
                        _print_look(look, trials, options, out)
                    decision = gate.decision(run.closed)
                    if decision is not None:
                        return _decided(decision, gate, trials, options, out, baseline=baseline)
    finally:
        await consumer.stop()
    raise CommandError(
        f"no decision on {candidate!r} after {timeout:g} s ({trials.describe()}, "
        f"{_tasks(_paired(gate))}): the run is still open or nothing of it has been published; "
        "wait longer (--timeout) or check the run id",
        ENVIRONMENT,
    )


@dataclass
class Decided:
    """A decision as printed: its exit code, its record (the JSON line) and its sentence."""

    code: int
    record: dict[str, Any]
    text: str


class Trials:
    """The candidate's trials so far, kept per event in O(1): per task, the more of its
    trial.finished events and its scored trial ids (a harness may send either alone)."""

    def __init__(self, run: RunState) -> None:
        self.run = run
        self.per_task: dict[str, int] = {}
        self.total = 0

    def update(self, task_id: str | None) -> None:
        task = self.run.tasks.get(task_id) if task_id is not None else None
        if task is not None:
            now = max(task.trials_completed + task.trials_failed, count(task.trials))
            self.total += now - self.per_task.get(task.task_id, 0)
            self.per_task[task.task_id] = now

    def describe(self) -> str:
        """Against those expected, when the run's run.started says."""
        run = self.run
        per_task = run.declarations.attempts_per_task if run.declarations else None
        expected = per_task * len(run.declarations.tasks) if per_task and run.declarations else 0
        if expected:
            return f"{self.total} of {expected} candidate trials ({100 * self.total / expected:.0f}%)"
        return f"{self.total} candidate trials"


def _tasks(paired: int) -> str:
    return f"{paired} paired task{'' if paired == 1 else 's'}"


def _paired(gate: LiveGate) -> int:
    return max((len(tasks) for tasks in gate.paired.values()), default=0)


def _interval(look: Look) -> str:
    return f"[{look.interval[0]:+.4f}, {look.interval[1]:+.4f}]"


def _print_look(look: Look, trials: Trials, options: Options, out: TextIO) -> None:
    if options.as_json:
        record = {"type": "look", **look.record(), "trials": trials.total}
        out.write(orjson.dumps(record).decode() + "\n")
    else:
        mean = "" if look.mean is None else f"mean diff {look.mean:+.4f}, "
        pairs = f"{look.pairs} attempt{'' if look.pairs == 1 else 's'} paired"
        out.write(
            f"{look.key}: {_tasks(look.paired)}, {pairs}, {mean}95% CS {_interval(look)}, {look.decision.upper()}; "
            f"{trials.describe()}\n"
        )
    out.flush()


def _decided(decision: str, gate: LiveGate, trials: Trials, options: Options, out: TextIO, *, baseline: str) -> Decided:
    run = trials.run
    at = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    looks = [gate.look(key) for key in sorted(gate.sequences)]
    floor = 0.0 - options.threshold
    code = options.exit_code(decision)
    why = looks
    if decision == BLOCK:
        why = [look for look in looks if look.decision == BLOCK]
        what = f"regression beyond {floor:g} established on {', '.join(look.key for look in why)}"
    elif decision == INCONCLUSIVE:
        what = f"candidate closed ({run.closed_reason}): a drop beyond {floor:g} neither established nor ruled out"
    elif decision == WARN:
        what = f"regression beyond {floor:g} ruled out, and a real drop within it"
    else:
        what = f"regression beyond {floor:g} ruled out"
    notes = [
        f"{look.key}: no task paired (the candidate measured none the baseline did)"
        for look in looks
        if look.paired == 0 and run.closed
    ]
    record: dict[str, Any] = {
        "type": "decision",
        "decision": decision,
        "passed": decision != BLOCK,
        "reason": what,
        "at": at,
        "trials": trials.total,
        "closed": run.closed,
        "threshold": options.threshold,
        "keys": [look.record() for look in looks],
        "notes": notes,
        "baseline": baseline,
        "candidate": run.run_id,
    }
    figures = "; ".join(f"{look.key}: {_tasks(look.paired)}, 95% CS {_interval(look)}" for look in why)
    verdict = {BLOCK: "gate FAILED", INCONCLUSIVE: "gate INCONCLUSIVE", WARN: "gate passed with a WARNING"}.get(
        decision, "gate passed"
    )
    text = f"{verdict}: {what} at {at}, after {trials.describe()}: {figures}"
    if options.as_json:
        out.write(orjson.dumps(record).decode() + "\n")
    else:
        out.write("".join(f"note: {note}\n" for note in notes))
        out.write(text + "\n")
    out.flush()
    return Decided(code, record, text)
