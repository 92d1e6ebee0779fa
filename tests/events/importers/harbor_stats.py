"""Harbor's own job stats next to ours: the check that an imported job's summaries say what
Harbor said (SEMANTICS.md section 6), used over every Harbor fixture."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from events.codec import encode
from events.importers.source import ImportOptions
from tests.builders import closed
from worker.commands.importing import import_lines
from worker.commands.replay import replay

FIXTURES = Path(__file__).parents[2] / "fixtures" / "harbor"
JOBS = sorted(path for path in FIXTURES.iterdir() if (path / "result.json").exists())
PREFIX = "harbor_reward."


def replayed(lines: Iterable[bytes]) -> bytes:
    """What `evalstream replay -` prints for these event lines."""
    out, err = io.BytesIO(), io.StringIO()
    replay((line + b"\n" for line in lines), out, err)
    assert err.getvalue() == ""
    return out.getvalue()


def imported(job: Path, options: ImportOptions | None = None) -> list[bytes]:
    return list(import_lines("harbor", job, options or ImportOptions()))


def summaries(output: bytes) -> dict[str, dict[str, Any]]:
    """The latest summary of each run in replay's output."""
    return {summary["run_id"]: summary for summary in map(json.loads, output.splitlines())}


def harbor_evals(job: Path) -> dict[str, dict[str, Any]]:
    """`stats.evals` of the job's own result.json, keyed by the run id the import gives
    each group by default (`<job_name>:<group>`)."""
    result = json.loads((job / "result.json").read_text())
    name = json.loads((job / "config.json").read_text())["job_name"]
    return {f"{name}:{group}": stats for group, stats in result["stats"]["evals"].items()}


def several_reward_keys(job: Path) -> bool:
    """Whether a trial of the job returned more than one reward (Harbor then gives no pass@k)."""
    for file in job.glob("*/result.json"):
        verifier = json.loads(file.read_text()).get("verifier_result") or {}
        if len(verifier.get("rewards") or {}) > 1:
            return True
    return False


def closing_lines(job: Path) -> list[bytes]:
    """A run.closed for each group: a test-side addition, so that a job Harbor has not
    finished still gets a summary to compare with its live result.json."""
    return [encode(closed(run_id, event_id="test-closes-it")) for run_id in harbor_evals(job)]


def recorded_types(job: Path) -> dict[str, list[str]]:
    """Each trial's recorded exception types as Harbor's `recorded_exceptions` orders them (its
    own `exception_info`, then its steps'), read from the job's trial files."""
    found = {}
    for file in job.glob("*/result.json"):
        result = json.loads(file.read_text())
        steps = result.get("step_results") or []
        infos = [result.get("exception_info")] + [step.get("exception_info") for step in steps]
        found[result["trial_name"]] = [info["exception_type"] for info in infos if info]
    return found


def under_first_type(exception_stats: dict[str, list[str]], types: dict[str, list[str]]) -> dict[str, list[str]]:
    """Harbor's `exception_stats` with each trial kept under its first recorded type only,
    what an event's one error can carry (docs: choices); types left with no trial dropped."""
    kept = {kind: [trial for trial in trials if types[trial][0] == kind] for kind, trials in exception_stats.items()}
    return {kind: trials for kind, trials in kept.items() if trials}


def assert_matches_harbor(
    ours: dict[str, Any], theirs: dict[str, Any], *, finished: bool, multi_key: bool, types: dict[str, list[str]]
) -> None:
    """Our `harbor` block against Harbor's `stats.evals[group]`, bit for bit: counts equal,
    exception lists equal (in order) once a trial that recorded several types is kept under
    its first (`types`: `recorded_types`), reward lists equal per key with values compared as
    floats (Harbor writes `1` or `1.0`, we write `repr(float)`), pass@k equal as floats."""
    assert ours["n_trials"] == theirs["n_trials"]
    assert ours["n_errors"] == theirs["n_errors"]
    listed = under_first_type(theirs["exception_stats"], types)
    assert list(ours["exception_stats"].items()) == list(listed.items())
    mine = {key.removeprefix(PREFIX): values for key, values in ours["reward_stats"].items()}
    assert set(mine) == set(theirs["reward_stats"])
    for key, values in theirs["reward_stats"].items():
        assert [(float(value), names) for value, names in mine[key].items()] == [
            (float(value), names) for value, names in values.items()
        ], key
    if not finished:
        assert theirs["pass_at_k"] == {}  # Harbor computes pass@k only when the job ends
    elif multi_key:
        # Harbor drops pass@k for the whole eval; SEMANTICS.md section 6 keeps it per key.
        assert theirs["pass_at_k"] == {}
    else:
        expected = {PREFIX + key: theirs["pass_at_k"] for key in theirs["reward_stats"]} if theirs["pass_at_k"] else {}
        assert ours["pass_at_k"] == expected
        for key, figures in expected.items():
            assert [repr(v) for v in ours["pass_at_k"][key].values()] == [repr(v) for v in figures.values()]
