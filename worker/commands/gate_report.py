"""The fixed gate's reports for machines and CI views: JSON, JUnit XML and Markdown.

- JSON: `{decision, passed, failures, notes, threshold, max_regressions, power, decisions,
  comparison}`; `decisions` is `{key: {decision, method, interval, reason, tasks_to_decide,
  more_tasks}}` (`projections.analysis.gate.decision`), `comparison` the record `projections.analysis.compare`
  returns, field for field.
- JUnit: a `testsuite` per compared key, a `testcase` per (key, task) (classname the key,
  name the task id): a paired task whose verdict regressed is a `failure` (type "regression",
  its message the verdict and pass-rate change, its text both runs' attempts); a task not
  compared (unmeasured in a run, or only one run has it) is `skipped` with why; the others
  pass. The key's decision, reason, method and interval are the suite's `properties` and its
  `system-out`.
- Markdown, for a CI job summary: the decision, the table, each key's reason, the verdict
  changes and the notes.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from events.outputs import Attempt, RunSummary
from projections.analysis.compare import Comparison, KeyComparison, key_attempts
from projections.analysis.gate.decision import BLOCK, KeyDecision
from projections.analysis.gate.power import Power

SHOWN_CHANGES = 40
"""Rows of regressions (and of fixes) the table and Markdown list; the others list every one."""
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass(frozen=True)
class GateReport:
    baseline: RunSummary
    candidate: RunSummary
    comparison: Comparison
    decisions: tuple[KeyDecision, ...]
    """One per compared key, in the comparison's order."""
    decision: str
    notes: list[str]
    threshold: float
    max_regressions: int | None
    power: dict[str, Power | None]

    @property
    def failures(self) -> list[str]:
        return [f"{each.key}: {each.reason}" for each in self.decisions if each.decision == BLOCK]


def as_json(report: GateReport) -> str:
    record = {
        "decision": report.decision,
        "passed": report.decision != BLOCK,
        "failures": report.failures,
        "notes": report.notes,
        "threshold": report.threshold,
        "max_regressions": report.max_regressions,
        "power": report.power,
        "decisions": {
            each.key: {
                "decision": each.decision,
                "method": each.method,
                "interval": each.interval,
                "reason": each.reason,
                "tasks_to_decide": each.tasks_to_decide,
                "more_tasks": each.more_tasks,
                "attempts_to_decide": each.attempts_to_decide,
            }
            for each in report.decisions
        },
        "comparison": report.comparison,
    }
    return orjson.dumps(record, option=orjson.OPT_INDENT_2).decode() + "\n"


def junit(report: GateReport) -> str:
    root = ET.Element("testsuites", name=f"evalstream gate {_xml(report.comparison.candidate)}")
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    for key, decided in zip(report.comparison.keys, report.decisions, strict=True):
        suite = _suite(report, key, decided)
        root.append(suite)
        for name in totals:
            totals[name] += int(suite.get(name, "0"))
    root.attrib.update({name: str(count) for name, count in totals.items()} | {"errors": "0"})
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _suite(report: GateReport, key: KeyComparison, decided: KeyDecision) -> ET.Element:
    suite = ET.Element("testsuite", name=_xml(key.key))
    properties = ET.SubElement(suite, "properties")
    shown = {
        "decision": decided.decision,
        "reason": decided.reason,
        "method": decided.method or "",
        "interval": "" if decided.interval is None else f"{decided.interval[0]!r} {decided.interval[1]!r}",
        "mean_difference": "" if key.mean_difference is None else repr(key.mean_difference),
        "baseline": f"{report.comparison.baseline} (revision {report.comparison.baseline_revision})",
        "candidate": f"{report.comparison.candidate} (revision {report.comparison.candidate_revision})",
        "threshold": repr(report.threshold),
    }
    for name, value in shown.items():
        ET.SubElement(properties, "property", name=name, value=_xml(value))
    base, cand = key_attempts(report.baseline, key.key), key_attempts(report.candidate, key.key)
    regressed = {change.task_id: change for change in key.regressions}
    failures = skipped = 0
    for task in key.tasks:
        case = ET.SubElement(suite, "testcase", classname=_xml(key.key), name=_xml(task.task_id), time="0")
        change = regressed.get(task.task_id)
        if change is not None:
            failures += 1
            failure = ET.SubElement(
                case,
                "failure",
                type="regression",
                message=_xml(
                    f"{change.baseline} -> {change.candidate}: pass rate {task.baseline:.2f} -> {task.candidate:.2f}"
                ),
            )
            failure.text = _xml(
                f"baseline {report.comparison.baseline}: {_attempts(base[task.task_id])}\n"
                f"candidate {report.comparison.candidate}: {_attempts(cand[task.task_id])}"
            )
    for task_id, why in _not_compared(key):
        skipped += 1
        case = ET.SubElement(suite, "testcase", classname=_xml(key.key), name=_xml(task_id), time="0")
        ET.SubElement(case, "skipped", message=_xml(why))
    ET.SubElement(suite, "system-out").text = _xml(f"{decided.decision.upper()}: {decided.reason}")
    suite.attrib.update(
        tests=str(len(key.tasks) + skipped), failures=str(failures), skipped=str(skipped), errors="0", time="0"
    )
    return suite


def _not_compared(key: KeyComparison) -> list[tuple[str, str]]:
    found = [(task_id, "only the baseline has this task") for task_id in key.only_baseline]
    found += [(task_id, "only the candidate has this task") for task_id in key.only_candidate]
    for task in key.unmeasured:
        sides = " and ".join(
            side for side, empty in (("baseline", task.baseline), ("candidate", task.candidate)) if empty
        )
        found.append((task.task_id, f"no attempt in the {sides}"))
    return found


def _attempts(attempts: Sequence[Attempt]) -> str:
    return " ".join(f"{attempt.trial_id}={'null' if attempt.value is None else attempt.value}" for attempt in attempts)


def _xml(text: str) -> str:
    """`text` with what XML 1.0 cannot hold (control characters) written as escapes."""
    return _NOT_XML.sub(lambda found: repr(found.group())[1:-1], text)


def markdown(report: GateReport) -> str:
    comparison = report.comparison
    lines = [
        f"## evalstream gate: {report.decision.upper()}",
        "",
        f"candidate `{_code(comparison.candidate)}` (revision {comparison.candidate_revision}) against baseline "
        f"`{_code(comparison.baseline)}` (revision {comparison.baseline_revision}); "
        f"drop tolerated: {report.threshold:g}",
        "",
        "| key | paired tasks | pass@1 | mean diff | 95% interval | method | regressions | fixes | decision |",
        "|---|---:|---|---:|---|---|---:|---:|---|",
    ]
    for key, decided in zip(comparison.keys, report.decisions, strict=True):
        lines.append(
            "| "
            + " | ".join(
                (
                    _cell(key.key),
                    str(len(key.tasks)),
                    _pass_at_1(key),
                    "" if key.mean_difference is None else f"{key.mean_difference:+.4f}",
                    "" if decided.interval is None else f"[{decided.interval[0]:+.4f}, {decided.interval[1]:+.4f}]",
                    decided.method or "",
                    str(len(key.regressions)),
                    str(len(key.fixes)),
                    f"**{decided.decision.upper()}**",
                )
            )
            + " |"
        )
    lines.append("")
    for decided in report.decisions:
        lines.append(f"- **{_cell(decided.key)}**, {decided.decision.upper()}: {_cell(to_decide(decided))}")
    changes = [
        f"| {_cell(key.key)} | {_cell(change.task_id)} | {change.baseline} → {change.candidate} | {kind} |"
        for key in comparison.keys
        for kind, found in (("regression", key.regressions), ("fix", key.fixes))
        for change in found[:SHOWN_CHANGES]
    ]
    if changes:
        lines += ["", "### Verdict changes", "", "| key | task | verdict | change |", "|---|---|---|---|", *changes]
    if report.notes:
        lines += ["", "### Notes", "", *(f"- {_cell(note)}" for note in report.notes)]
    return "\n".join(lines) + "\n"


def to_decide(decided: KeyDecision) -> str:
    """A decision's reason, and for an inconclusive one what would decide it."""
    if decided.tasks_to_decide is None:
        return decided.reason
    attempts = ""
    if decided.attempts_to_decide is not None:
        attempts = f", or about {decided.attempts_to_decide} attempts per task of the candidate on the same tasks"
    return (
        f"{decided.reason}; about {decided.more_tasks} more paired tasks ({decided.tasks_to_decide} in all){attempts} "
        "would decide at 80% power, if the mean difference holds"
    )


def _pass_at_1(key: KeyComparison) -> str:
    def mean(figures: Sequence[Any]) -> str:
        first = next((figure for figure in figures if figure.k == 1), None)
        return "-" if first is None or first.mean is None else f"{first.mean:.3f}"

    return f"{mean(key.baseline_pass_at)} → {mean(key.candidate_pass_at)}"


def _cell(text: str) -> str:
    """`text` safe in a Markdown table cell: pipes escaped, line breaks as spaces."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("\r", " ")


def _code(text: str) -> str:
    return _cell(text).replace("`", "'")
