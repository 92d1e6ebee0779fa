"""`evalstream digest`: run.summary / run.progress JSON lines made readable for people."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, TextIO

import orjson

from worker.failure import CommandError


def digest_line(record: dict[str, Any]) -> str:
    if record.get("type") == "run.progress":
        trials = record["trials"]
        done = f"{trials['finished']}/{trials['expected']}" if trials["expected"] else str(trials["finished"])
        passk = ", ".join(
            f"{key} pass@1 {by_k['1']['mean']:.3f}" for key, by_k in record["pass_at_k"].items() if "1" in by_k
        )
        return f"  progress {record['run_id']} #{record['seq']} [{record['status']}] trials {done} {passk}"
    summary = record["summary"]
    verdicts = Counter(v for keys in record["verdicts"].values() for v in keys.values())
    lines = [
        f"summary  {record['run_id']} rev {record['revision']} ({record['closed_reason']}): "
        f"{summary['task_count']} tasks, {summary['trial_count']} trials, {summary['score_count']} scores, "
        f"{record['harbor']['n_errors']} trial errors; verdicts "
        + (", ".join(f"{count} {verdict}" for verdict, count in sorted(verdicts.items())) or "none")
    ]
    for score in summary["scores"]:
        if ".pass@" in score["name"] and score["mean"] is not None:
            figures = f"(n={score['count']}, unmeasured={score['nan_count']})"
            lines.append(f"    {score['name']:<36} {score['mean']:.4f}  {figures}")
    return "\n".join(lines)


def digest(lines: Iterable[bytes], out: TextIO, source: str = "stdin") -> None:
    """Write each line's digest; a line that is not a run.summary or run.progress event
    stops it with a `CommandError` naming the line."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
            text = digest_line(record)
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError) as error:
            what = (
                "not JSON" if isinstance(error, orjson.JSONDecodeError) else "not a run.summary or run.progress event"
            )
            raise CommandError(
                f"{source} line {number}: {what}; pipe it the output of `evalstream replay` or `evalstream summaries`"
            ) from None
        out.write(text + "\n")
