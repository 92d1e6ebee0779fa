"""`evalstream gate BASELINE CANDIDATE`: fail a CI job when a change made the agent worse.

Reads the two runs' latest summaries (from the summaries topic, or a file of summaries such as
`evalstream replay` prints: the highest revision of each run), compares them with
`projections.analysis.compare` and prints a table (or `--json`).

Each key gets a decision (`projections.analysis.gate.decision`: PASS, WARN, INCONCLUSIVE or BLOCK, on the
exact sign-flip interval below 20 paired tasks and Student's t from 20 on), the gate the worst.

Exit codes. The project's commands use 1 for an environment that is not there and 2 for bad
usage or input (`worker.failure`); each decision has a code of its own, so that a CI job can
tell "the candidate is worse" from "the gate could not run":
- 0: PASS; also WARN and INCONCLUSIVE, unless `--fail-on` names them;
- 1: the broker cannot be reached, the summaries topic does not exist, or a run has no summary
  in it yet (not closed, or not yet folded: trying again later can pass);
- 2: bad usage or input: an unreadable or invalid file, a run the file has no summary of, a
  `--key` the runs do not share, no pass@k key or no measured task in common (nothing to gate on);
- 3: BLOCK: some compared key's 95% interval lies wholly below -threshold, or has more
  regressions than `--max-regressions`;
- 4: WARN, with `--fail-on warn`: a real drop within the tolerance;
- 5: INCONCLUSIVE, with `--fail-on inconclusive`: some key's interval holds both 0 and
  -threshold.

Beside each key's interval, its power figure (`projections.analysis.gate.power`): how many paired tasks
would resolve a difference of `--threshold` (when above 0), else of the observed difference's
size, at 80% power, and how many more than those compared that is. Reports for CI
(`--format json|junit|markdown`, to stdout or, beside the table, to `--report PATH`):
`worker.commands.gate_report`.

`--live` (`worker.commands.gate_live`) decides while the candidate runs instead.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO

from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from events.clients.kafka import TopicMissing
from events.codec import decode_output, output_problem
from events.latest import Latest, revision, seq
from events.outputs import RunProgress, RunSummary
from projections.analysis.compare import Comparison, KeyComparison, NotComparable, PassAt, compare
from projections.analysis.gate.decision import BLOCK, INCONCLUSIVE, PASS, WARN, decide_key, worst
from projections.analysis.gate.power import Power, power
from worker.commands.clients import summary_subscriber
from worker.commands.gate_report import SHOWN_CHANGES, GateReport, as_json, junit, markdown, to_decide
from worker.commands.replay import route_key
from worker.failure import ENVIRONMENT, USAGE, CommandError, opened, topic_missing
from worker.settings import Settings

PASSED, FAILED = 0, 3
CODES = {PASS: PASSED, BLOCK: FAILED, WARN: 4, INCONCLUSIVE: 5}
"""Each decision's exit code; WARN's and INCONCLUSIVE's only when `--fail-on` names them."""
FORMATS = {"json": as_json, "junit": junit, "markdown": markdown}
EXTENSIONS = {".json": "json", ".xml": "junit", ".md": "markdown"}


@dataclass(frozen=True)
class Options:
    keys: Sequence[str] | None = None
    threshold: float = 0.0
    max_regressions: int | None = None
    as_json: bool = False
    fail_on: frozenset[str] = frozenset()
    """Of WARN and INCONCLUSIVE: those that exit with their own code rather than 0."""
    report_format: str | None = None
    """json, junit or markdown: printed instead of the table, or written to `report`."""
    report: str | None = None
    """A file the report goes to, while the table prints."""

    def exit_code(self, decision: str) -> int:
        return CODES[decision] if decision in (PASS, BLOCK) or decision in self.fail_on else PASSED

    @property
    def written_format(self) -> str | None:
        """The format of what goes to `report` (or to stdout without one); None: the table."""
        if self.as_json:
            return "json"
        if self.report_format is not None or self.report is None:
            return self.report_format
        return EXTENSIONS.get(Path(self.report).suffix.lower())

    @property
    def effect(self) -> float | None:
        """The size of difference power is figured for: the threshold when above 0, else None
        (the observed size)."""
        return self.threshold if self.threshold > 0 else None

    def check(self) -> None:
        if not self.threshold >= 0:  # NaN too: it would never fail
            raise CommandError(f"--threshold is the drop tolerated, >= 0; got {self.threshold:g}")
        if self.report is not None and self.written_format is None:
            raise CommandError(
                f"--report {self.report}: say its --format (json, junit or markdown), or name it .json, .xml or .md"
            )
        if self.max_regressions is not None and self.max_regressions < 0:
            raise CommandError(f"--max-regressions is a count, >= 0; got {self.max_regressions}")


def summaries_from_file(stream: BinaryIO, name: str, run_ids: Sequence[str]) -> dict[str, RunSummary]:
    """The highest revision of each of `run_ids` among the summaries in `stream`; lines of
    other runs are skipped unread, `run.progress` lines too."""
    return outputs_from_file(stream, name, run_ids)[0]


def outputs_from_file(
    stream: BinaryIO, name: str, run_ids: Sequence[str]
) -> tuple[dict[str, RunSummary], dict[str, RunProgress]]:
    """The highest revision of each of `run_ids` among the summaries in `stream` (each must
    have one), and the latest progress of those that have one; lines of other runs are
    skipped unread."""
    wanted = {run_id.encode() for run_id in run_ids}
    others: set[str] = set()
    latest: Latest[RunSummary] = Latest(revision)
    progress: Latest[RunProgress] = Latest(seq)
    for number, line in enumerate(stream, 1):
        if not line.strip():
            continue
        key = route_key(line)
        if key not in wanted:
            others.add(key.decode(errors="replace"))
            continue
        try:
            record = decode_output(line)
        except ValidationError as error:
            raise CommandError(
                f"{name} line {number}: not a run.summary record: {output_problem(error)}; "
                "pass the summaries `evalstream replay` or `evalstream summaries` prints"
            ) from None
        if isinstance(record, RunSummary):
            latest.offer(record)
        else:
            progress.offer(record)
    _all_found(latest, run_ids, f"{name} (runs it names: {_some(others - {''})})", USAGE)
    return dict(latest), dict(progress)


async def summaries_from_topic(settings: Settings, run_ids: Sequence[str]) -> dict[str, RunSummary]:
    """Each of `run_ids`' latest summary in the summaries topic, read to its end."""
    subscriber = summary_subscriber(settings, run_ids=run_ids)
    try:
        await subscriber.start()
    except TopicMissing:
        raise topic_missing(
            settings.summaries_topic, settings.bootstrap, "--summaries-topic", "gate on a file with --from-file"
        ) from None
    try:
        latest = await subscriber.latest()
    finally:
        await subscriber.stop()
    _all_found(latest, run_ids, f"topic {settings.summaries_topic!r} at {settings.bootstrap}", ENVIRONMENT)
    return latest


def _all_found(found: Mapping[str, RunSummary], run_ids: Sequence[str], where: str, code: int) -> None:
    missing = [run_id for run_id in dict.fromkeys(run_ids) if run_id not in found]
    if missing:
        runs = " and ".join(repr(run_id) for run_id in missing)
        raise CommandError(
            f"no summary of run {runs} in {where}; a run has one once its run.closed is applied: "
            "check the run id, or that the run has closed",
            code,
        )


def _some(names: Iterable[str], shown: int = 10) -> str:
    ordered = sorted(names)
    if not ordered:
        return "none"
    listed = ", ".join(ordered[:shown])
    return listed + (f" and {len(ordered) - shown} more" if len(ordered) > shown else "")


def judge(baseline: RunSummary, candidate: RunSummary, options: Options, out: TextIO) -> int:
    """Compare, print the table or JSON to `out`, and return the exit code."""
    try:
        comparison = compare(baseline, candidate, options.keys)
    except NotComparable as error:
        raise CommandError(str(error)) from None
    if not comparison.keys:
        raise CommandError(
            f"runs {baseline.run_id!r} and {candidate.run_id!r} share no pass@k key "
            f"(baseline: {_some(comparison.only_baseline_keys)}; candidate: {_some(comparison.only_candidate_keys)}); "
            "nothing to gate on"
        )
    if not any(key.tasks for key in comparison.keys):
        raise CommandError(
            f"runs {baseline.run_id!r} and {candidate.run_id!r} have no task measured in both "
            f"on {', '.join(key.key for key in comparison.keys)}; nothing to gate on: check the run ids"
        )
    decisions = tuple(decide_key(key, options.threshold, options.max_regressions) for key in comparison.keys)
    report = GateReport(
        baseline,
        candidate,
        comparison,
        decisions,
        worst([each.decision for each in decisions]),
        notes(comparison),
        options.threshold,
        options.max_regressions,
        {key.key: power(key, options.effect) for key in comparison.keys},
    )
    written = options.written_format
    if written is None or options.report is not None:
        render(report, report.notes + power_notes(comparison, options.effect), out, options.effect)
    if written is not None:
        text = FORMATS[written](report)
        if options.report is None:
            out.write(text)
        else:
            _write(options.report, text)
    return options.exit_code(report.decision)


def _write(path: str, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as error:
        raise CommandError(f"cannot write the report to {path}: {error.strerror or error}") from None


def notes(comparison: Comparison) -> list[str]:
    """What the comparison left out, and why, in sentences."""
    said = []
    for side, keys in (("baseline", comparison.only_baseline_keys), ("candidate", comparison.only_candidate_keys)):
        if keys:
            said.append(f"keys only the {side} has, not compared: {_some(keys)}")
    for side, tasks in (("baseline", comparison.only_baseline_tasks), ("candidate", comparison.only_candidate_tasks)):
        if tasks:
            said.append(f"{_count(tasks, 'task')} only the {side} has, not compared: {_some(tasks, 5)}")
    if comparison.only_baseline_tasks or comparison.only_candidate_tasks:
        said.append("pass@k are each run's own figures, over its own tasks")
    for key in comparison.keys:
        if key.unmeasured:
            unmeasured = [task.task_id for task in key.unmeasured]
            said.append(
                f"{key.key}: {_count(unmeasured, 'shared task')} with no attempt in one run or both, "
                f"not compared: {_some(unmeasured, 5)}"
            )
        if key.interval is None:
            said.append(f"{key.key}: {_count(key.tasks, 'paired task')}, too few for an interval: no significance test")
    return said


def power_notes(comparison: Comparison, effect: float | None) -> list[str]:
    """Each key's power figure in a sentence."""
    said = []
    for key in comparison.keys:
        figures = power(key, effect)
        if figures is not None:
            said.append(
                f"{key.key}: {figures.tasks_needed} paired tasks would resolve a difference of {figures.effect:.4f} "
                f"at 80% power ({figures.more_tasks} more than the {len(key.tasks)} compared)"
            )
    return said


def _count(items: Sequence[object], noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


def render(report: GateReport, remarks: list[str], out: TextIO, effect: float | None) -> None:
    comparison = report.comparison
    console = Console(file=out, width=None if out.isatty() else 160, highlight=False)
    table = Table(
        title=escape(
            f"candidate {comparison.candidate} (rev {comparison.candidate_revision}) "
            f"vs baseline {comparison.baseline} (rev {comparison.baseline_revision})"
        )
    )
    columns = (
        "key", "tasks", "pass@1", "pass@k", "mean diff", "95% interval", "method", "80% power",
        "regr.", "fixes", "gate",
    )  # fmt: skip
    for column in columns:
        table.add_column(column, justify="left" if column in {"key", "pass@k", "method"} else "right", no_wrap=True)
    for key, decided in zip(comparison.keys, report.decisions, strict=True):
        table.add_row(
            escape(key.key),
            str(len(key.tasks)),
            _pass_at(key, 1),
            _pass_at(key, None),
            "" if key.mean_difference is None else f"{key.mean_difference:+.4f}",
            "" if decided.interval is None else escape(f"[{decided.interval[0]:+.4f}, {decided.interval[1]:+.4f}]"),
            decided.method or "",
            _power(power(key, effect)),
            str(len(key.regressions)),
            str(len(key.fixes)),
            decided.decision.upper(),
        )
    console.print(table)
    changes = _changes(comparison)
    if changes.row_count:
        console.print(changes)
    for remark in remarks:
        console.print(escape(f"note: {remark}"))
    console.print(escape(_verdict(report)), soft_wrap=True)  # one line, for a CI log to grep


def _verdict(report: GateReport) -> str:
    """The last line: the gate's decision and why."""
    if report.decision == BLOCK:
        return "gate FAILED: " + "; ".join(report.failures)
    if report.decision == PASS:
        return "gate passed"
    said = "; ".join(f"{each.key}: {to_decide(each)}" for each in report.decisions if each.decision == report.decision)
    if report.decision == WARN:
        return f"gate passed with a WARNING: {said}"
    return f"gate INCONCLUSIVE: {said}"


def _power(figures: Power | None) -> str:
    """`+M of N` (M more paired tasks, N in all, would resolve the difference at 80% power)."""
    return "" if figures is None else f"+{figures.more_tasks} of {figures.tasks_needed}"


def _pass_at(key: KeyComparison, k: int | None) -> str:
    """`baseline -> candidate` of pass@k (None: the largest k above 1 both runs have)."""
    base = {figure.k: figure for figure in key.baseline_pass_at}
    cand = {figure.k: figure for figure in key.candidate_pass_at}
    if k is None:
        shared = [n for n in base if n > 1 and n in cand]
        if not shared:
            return ""
        k = max(shared)
        return f"@{k} {_mean(base.get(k))} -> {_mean(cand.get(k))}"
    return f"{_mean(base.get(k))} -> {_mean(cand.get(k))}"


def _mean(figure: PassAt | None) -> str:
    return "-" if figure is None or figure.mean is None else f"{figure.mean:.3f}"


def _changes(comparison: Comparison) -> Table:
    table = Table(title="verdict changes")
    for column in ("key", "task", "verdict", "pass rate", "change"):
        table.add_column(column)
    for key in comparison.keys:
        rates = {task.task_id: task for task in key.tasks}
        for kind, changes in (("regression", key.regressions), ("fix", key.fixes)):
            for change in changes[:SHOWN_CHANGES]:
                task = rates[change.task_id]
                table.add_row(
                    escape(key.key),
                    escape(change.task_id),
                    f"{change.baseline} -> {change.candidate}",
                    f"{task.baseline:.2f} -> {task.candidate:.2f}",
                    kind,
                )
            if len(changes) > SHOWN_CHANGES:
                table.add_row(
                    escape(key.key), f"... {len(changes) - SHOWN_CHANGES} more (--json lists all)", "", "", kind
                )
    return table


def run(
    baseline: str,
    candidate: str,
    *,
    from_file: str | None,
    settings: Settings,
    options: Options,
    out: TextIO = sys.stdout,
) -> int:
    """The command: load both summaries, judge, and return the exit code (CommandError raised)."""
    options.check()  # before any reading: a typo in a flag is said at once
    found = load_summaries([baseline, candidate], from_file=from_file, settings=settings)
    return judge(found[baseline], found[candidate], options, out)


def load_summaries(run_ids: Sequence[str], *, from_file: str | None, settings: Settings) -> dict[str, RunSummary]:
    """Each of `run_ids`' latest summary, from the summaries topic or `from_file` (- for stdin)."""
    if from_file is None:
        return asyncio.run(summaries_from_topic(settings, run_ids))
    name = "stdin" if from_file == "-" else from_file
    with opened(from_file, "a summaries JSONL file (what `evalstream replay` prints)") as stream:
        try:
            return summaries_from_file(stream, name, run_ids)
        except OSError as error:
            raise CommandError(f"reading {name} failed: {error}") from None
