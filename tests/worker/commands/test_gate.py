"""`evalstream gate` as a CI job runs it, on summaries files that `evalstream replay` printed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from events.codec import encode
from tests.builders import scored_run
from tests.projections.examples import BASELINE, CANDIDATE

WORSE = {**{f"s{i}": [1, 1] for i in range(6)}, "a": [1, 1], "b": [1, 1], "c": [1, 0]}
MUCH_WORSE = {**{f"s{i}": [1, 0] for i in range(6)}, "a": [1, 0], "b": [0, 1], "c": [0, 0]}
"""Nine paired tasks, each half a point down: enough for the exact interval to decide."""


def evalstream(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "worker.commands.cli", *args], input=stdin, capture_output=True, timeout=120, check=False
    )


@pytest.fixture(scope="module")
def summaries(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The summaries replay prints for four runs; `late` has a second revision."""
    folder = tmp_path_factory.mktemp("gate")
    events = [
        *scored_run("base", BASELINE),
        *scored_run("cand", CANDIDATE),
        *scored_run("worse", WORSE),
        *scored_run("much-worse", MUCH_WORSE),
        *scored_run("other", {"x": [1], "y": [0]}),
        *scored_run("late", {"a": [1, 1], "b": [1, 1], "c": [1, 0]}),
        *scored_run("late", {"c": [0, 0, 1]})[1:-1],  # after the close: revisions 2, 3 and 4 lower c's pass rate
    ]
    log = folder / "log.jsonl"
    log.write_bytes(b"".join(encode(event) + b"\n" for event in events))
    replayed = evalstream("replay", str(log), "--progress")  # progress lines too: gate skips them
    assert replayed.returncode == 0, replayed.stderr
    path = folder / "summaries.jsonl"
    path.write_bytes(replayed.stdout)
    return path


def test_an_inconclusive_gate_prints_the_table_and_exits_0(summaries: Path) -> None:
    done = evalstream("gate", "base", "cand", "--from-file", str(summaries))
    assert done.returncode == 0, done.stderr
    table = done.stdout.decode()
    assert "candidate cand (rev 1) vs baseline base (rev 1)" in table
    assert "reward.score" in table
    assert "0.722 -> 0.667" in table  # pass@1 of each run, as its summary has it
    assert "[-1.0000, +1.0000] │ sign-flip" in table  # four tasks: the exact interval cannot exclude 0
    assert "+49 of 53" in table
    assert "note: reward.score: 53 paired tasks would resolve a difference of 0.1667 at 80% power" in table
    assert "solved -> flaky" in table
    assert "flaky -> failed" in table
    assert "failed -> flaky" in table
    assert "note: 1 task only the baseline has, not compared: e" in table
    assert "note: reward.score: 2 shared tasks with no attempt in one run or both, not compared: g, h" in table
    assert "gate INCONCLUSIVE: reward.score: the exact sign-flip 95% interval [-1.0000, +1.0000] over 4 paired" in table
    assert "about 49 more paired tasks (53 in all) would decide at 80% power" in table


def test_too_many_regressions_fail_with_exit_3(summaries: Path) -> None:
    done = evalstream("gate", "base", "cand", "--from-file", str(summaries), "--max-regressions", "1")
    assert done.returncode == 3, done.stderr
    assert "gate FAILED: reward.score: 2 regressions, more than the 1 allowed" in done.stdout.decode()


def test_a_significant_drop_fails_unless_tolerated(summaries: Path) -> None:
    assert evalstream("gate", "worse", "much-worse", "--from-file", str(summaries)).returncode == 3
    tolerated = evalstream("gate", "worse", "much-worse", "--from-file", str(summaries), "--threshold", "0.5", "--json")
    assert tolerated.returncode == 0, tolerated.stdout
    # Power for a drop of the threshold's size: sd 0 (every difference -0.5), so two tasks would do.
    assert orjson.loads(tolerated.stdout)["decision"] == "warn"  # a real drop, within the tolerance
    assert orjson.loads(tolerated.stdout)["power"] == {
        "reward.score": {"effect": 0.5, "tasks_needed": 2, "more_tasks": 0}
    }


def test_the_latest_revision_of_each_run_is_gated(summaries: Path) -> None:
    done = evalstream("gate", "worse", "late", "--from-file", str(summaries), "--json")
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    assert report["comparison"]["candidate_revision"] == 4
    (key,) = report["comparison"]["keys"]
    assert {task["task_id"]: task["candidate"] for task in key["tasks"]}["c"] == pytest.approx(2 / 5)


def test_json_for_machines(summaries: Path) -> None:
    done = evalstream("gate", "base", "cand", "--from-file", "-", "--json", stdin=summaries.read_bytes())
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    assert set(report) == {
        "decision", "passed", "failures", "notes", "threshold", "max_regressions", "power", "decisions", "comparison",
    }  # fmt: skip
    assert (report["decision"], report["passed"], report["failures"], report["threshold"]) == (
        "inconclusive",
        True,
        [],
        0.0,
    )
    decided = report["decisions"]["reward.score"]
    assert (decided["method"], decided["interval"]) == ("sign-flip", [-1.0, 1.0])
    assert (decided["tasks_to_decide"], decided["more_tasks"]) == (53, 49)
    comparison = report["comparison"]
    assert report["power"] == {"reward.score": {"effect": pytest.approx(1 / 6), "tasks_needed": 53, "more_tasks": 49}}
    assert (comparison["only_baseline_tasks"], comparison["only_candidate_tasks"]) == (["e"], ["f"])
    (key,) = comparison["keys"]
    assert key["key"] == "reward.score"
    assert [task["task_id"] for task in key["tasks"]] == ["a", "b", "c", "d"]
    assert key["mean_difference"] == pytest.approx(-1 / 6)
    assert key["critical_value"] == 3.1824463052837078
    assert key["interval"] == pytest.approx([-0.851420, 0.518087], abs=1e-6)
    assert key["regressions"] == [
        {"task_id": "a", "baseline": "solved", "candidate": "flaky"},
        {"task_id": "b", "baseline": "flaky", "candidate": "failed"},
    ]
    assert key["unmeasured"] == [
        {"task_id": "g", "baseline": True, "candidate": False},
        {"task_id": "h", "baseline": False, "candidate": True},
    ]
    assert key["baseline_pass_at"][0] == {"k": 1, "mean": pytest.approx(13 / 18), "count": 6, "nan_count": 1}
    failed = orjson.loads(evalstream("gate", "worse", "much-worse", "--from-file", str(summaries), "--json").stdout)
    assert failed["passed"] is False
    assert failed["failures"] == [
        "reward.score: the exact sign-flip 95% interval [-0.5000, -0.5000] over 9 paired tasks lies below 0: "
        "a drop beyond the tolerance"
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["base", "nope"], "evalstream gate: no summary of run 'nope' in {file} (runs it names: "),
        (["base", "cand", "--key", "judge.pass"], "'judge.pass' is not a pass@k key of both runs"),
        (["base", "cand", "--threshold", "-0.1"], "--threshold is the drop tolerated, >= 0"),
        (["base", "cand", "--max-regressions", "-1"], "--max-regressions is a count"),
        (["base", "other"], "have no task measured in both on reward.score; nothing to gate on"),
        (
            ["base", "cand", "--timeout", "5"],
            "--timeout bounds the wait of --live; without --live the gate does not wait",
        ),
    ],
)
def test_bad_input_is_named_and_exits_2(summaries: Path, args: list[str], message: str) -> None:
    done = evalstream("gate", *args, "--from-file", str(summaries))
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert message.format(file=summaries) in stderr
    assert "Traceback" not in stderr


def test_an_unreadable_or_invalid_file_exits_2(tmp_path: Path, summaries: Path) -> None:
    missing = evalstream("gate", "base", "cand", "--from-file", str(tmp_path / "none.jsonl"))
    assert missing.returncode == 2
    assert f"cannot read {tmp_path / 'none.jsonl'}: No such file or directory" in missing.stderr.decode()
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(summaries.read_bytes() + b'{"type": "run.summary", "run_id": "base"}\n')
    done = evalstream("gate", "base", "cand", "--from-file", str(broken))
    assert done.returncode == 2
    lines = len(summaries.read_bytes().splitlines()) + 1
    assert f"{broken} line {lines}: not a run.summary record: field 'run.summary.schema_version': Field required" in (
        done.stderr.decode()
    )


@pytest.mark.parametrize(
    ("pair", "args", "code", "decision"),
    [
        (("worse", "much-worse"), [], 3, "block"),
        (("worse", "much-worse"), ["--threshold", "0.5"], 0, "warn"),
        (("worse", "much-worse"), ["--threshold", "0.5", "--fail-on", "warn"], 4, "warn"),
        (("base", "cand"), [], 0, "inconclusive"),
        (("base", "cand"), ["--fail-on", "inconclusive"], 5, "inconclusive"),
        (("base", "cand"), ["--fail-on", "warn"], 0, "inconclusive"),
        (("worse", "worse"), [], 0, "pass"),
    ],
)
def test_each_decision_has_its_exit_code(
    summaries: Path, pair: tuple[str, str], args: list[str], code: int, decision: str
) -> None:
    done = evalstream("gate", *pair, "--from-file", str(summaries), "--json", *args)
    assert done.returncode == code, done.stderr
    assert orjson.loads(done.stdout)["decision"] == decision


def test_junit_has_a_case_per_key_and_task_and_agrees_with_json(summaries: Path, tmp_path: Path) -> None:
    from junitparser import Failure, JUnitXml, Skipped

    path = tmp_path / "gate.xml"
    done = evalstream("gate", "base", "cand", "--from-file", str(summaries), "--report", str(path))
    assert done.returncode == 0, done.stderr
    assert "candidate cand (rev 1) vs baseline base (rev 1)" in done.stdout.decode()  # the table still prints
    report = orjson.loads(evalstream("gate", "base", "cand", "--from-file", str(summaries), "--json").stdout)
    (key,) = report["comparison"]["keys"]
    (suite,) = list(JUnitXml.fromfile(str(path)))
    assert suite.name == "reward.score"
    properties = _properties(suite)
    assert properties["decision"] == report["decision"] == "inconclusive"
    assert properties["reason"] == report["decisions"]["reward.score"]["reason"]
    cases = {case.name: case for case in suite}
    assert all(case.classname == "reward.score" for case in suite)
    assert sorted(cases) == sorted(
        [task["task_id"] for task in key["tasks"]]
        + key["only_baseline"]
        + key["only_candidate"]
        + [task["task_id"] for task in key["unmeasured"]]
    )
    failed = {
        name: case.result[0] for name, case in cases.items() if case.result and isinstance(case.result[0], Failure)
    }
    assert sorted(failed) == [change["task_id"] for change in key["regressions"]] == ["a", "b"]
    assert failed["a"].message == "solved -> flaky: pass rate 1.00 -> 0.67"
    assert failed["a"].text == "baseline base: a-0=1.0 a-1=1.0 a-2=1.0\ncandidate cand: a-0=1.0 a-1=1.0 a-2=NaN"
    skipped = sorted(name for name, case in cases.items() if case.result and isinstance(case.result[0], Skipped))
    assert skipped == ["e", "f", "g", "h"]
    assert (suite.tests, suite.failures, suite.skipped) == (8, 2, 4)


def test_a_blocked_gate_in_junit_and_markdown(summaries: Path) -> None:
    from junitparser import JUnitXml

    done = evalstream("gate", "worse", "much-worse", "--from-file", str(summaries), "--format", "junit")
    assert done.returncode == 3
    xml = JUnitXml.fromstring(done.stdout.decode())
    (suite,) = list(xml)
    assert _properties(suite)["decision"] == "block"
    assert suite.failures == 9  # every task regressed: solved -> flaky or failed, flaky -> failed
    markdown = evalstream("gate", "worse", "much-worse", "--from-file", str(summaries), "--format", "markdown")
    text = markdown.stdout.decode()
    assert text.startswith("## evalstream gate: BLOCK\n")
    assert "| reward.score | 9 | 0.944 → 0.444 | -0.5000 | [-0.5000, -0.5000] | sign-flip | 9 | 0 | **BLOCK** |" in text
    assert "- **reward.score**, BLOCK: the exact sign-flip 95% interval [-0.5000, -0.5000] over 9 paired tasks" in text


def test_a_report_needs_a_format(summaries: Path, tmp_path: Path) -> None:
    done = evalstream("gate", "base", "cand", "--from-file", str(summaries), "--report", str(tmp_path / "gate.txt"))
    assert done.returncode == 2
    assert "--report " in done.stderr.decode()
    assert "say its --format (json, junit or markdown), or name it .json, .xml or .md" in done.stderr.decode()


def _properties(suite: Any) -> dict[str, str]:
    return {prop.name: prop.value for prop in suite.properties()}
