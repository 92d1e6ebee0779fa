"""`evalstream retry` on summaries files that `evalstream replay` printed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from events.codec import encode
from tests.builders import scored_run
from tests.events.importers.harbor_stats import FIXTURES, imported

ATTEMPTS: dict[str, list[object]] = {"a": [1, 1, 1], "b": [1, None, 0], "c": [1], "d": []}


def evalstream(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "worker.commands.cli", *args], input=stdin, capture_output=True, timeout=120, check=False
    )


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    events = scored_run("r", ATTEMPTS)
    events[0] = events[0].model_copy(update={"attempts_per_task": 3})
    path = tmp_path_factory.mktemp("retry") / "log.jsonl"
    path.write_bytes(b"".join(encode(event) + b"\n" for event in events))
    return path


def replayed(log: Path, *flags: str) -> bytes:
    done = evalstream("replay", str(log), *flags)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_list_a_harness_takes(log: Path) -> None:
    done = evalstream("retry", "r", "--from-file", "-", stdin=replayed(log, "--progress"))
    assert done.returncode == 0, done.stderr
    lines = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert [(line["task_id"], line["lacks"]) for line in lines] == [("b", 1), ("c", 2), ("d", 3)]
    assert lines[0] == {
        "run_id": "r",
        "task_id": "b",
        "lacks": 1,
        "attempts_per_task": 3,
        "dead_trials": ["b-1"],
        "not_retried": [],
        "keys": {"reward.score": {"measured": 2, "dead": 1, "lacks": 1, "not_retried": 0}},
    }
    assert done.stderr.decode() == (
        "retry: run 'r' (revision 1): 3 tasks lack 6 attempts (attempts_per_task 3, from its run.progress in stdin)\n"
    )


def test_attempts_per_task_unknown_is_refused_unless_given(log: Path) -> None:
    summaries = replayed(log)  # no progress lines: nothing says how many attempts a task should have
    refused = evalstream("retry", "r", "--from-file", "-", stdin=summaries)
    assert refused.returncode == 2
    assert refused.stderr.decode().startswith(
        "evalstream retry: attempts_per_task of run 'r' is unknown: its summary does not carry it, "
        "and stdin has no run.progress of it"
    )
    assert b"pass --attempts-per-task N" in refused.stderr
    given = evalstream("retry", "r", "--from-file", "-", "--attempts-per-task", "1", stdin=summaries)
    assert given.returncode == 0, given.stderr
    assert [orjson.loads(line)["task_id"] for line in given.stdout.splitlines()] == ["d"]
    assert b"1 task lacks 1 attempt (attempts_per_task 1, from --attempts-per-task)" in given.stderr


def test_bad_input_exits_2(log: Path, tmp_path: Path) -> None:
    summaries = tmp_path / "summaries.jsonl"
    summaries.write_bytes(replayed(log, "--progress"))
    for args, message in (
        (["nope"], "no summary of run 'nope' in "),
        (["r", "--attempts-per-task", "0"], "--attempts-per-task is a count, >= 1; got 0"),
    ):
        done = evalstream("retry", *args, "--from-file", str(summaries))
        assert done.returncode == 2, done.stderr
        assert message in done.stderr.decode()
        assert b"Traceback" not in done.stderr


def _harbor_retries(job: Path, tmp_path: Path) -> dict[str, tuple[int, list[str]]]:
    """What `evalstream retry` lists for an imported Harbor job: {task: (lacks, not_retried)};
    its stderr says how many trials the label left out."""
    log = tmp_path / f"{job.name}.jsonl"
    log.write_bytes(b"".join(line + b"\n" for line in imported(job)))
    (run_id,) = {orjson.loads(line)["run_id"] for line in imported(job)}
    done = evalstream("retry", run_id, "--from-file", "-", stdin=replayed(log, "--progress"))
    assert done.returncode == 0, done.stderr
    settled = sum(map(len, orjson.loads(orjson.loads(imported(job)[0])["labels"]["not_retried"]).values()))
    assert done.stderr.decode().endswith(
        f"; {settled} unmeasured trials its harness would not retry (label not_retried) left out\n"
    )
    lines = [orjson.loads(line) for line in done.stdout.splitlines()]
    return {line["task_id"]: (line["lacks"], line["not_retried"]) for line in lines}


@pytest.mark.parametrize("name", ["job-026-retry", "job-026-twotypes"])
def test_a_harbor_job_lists_what_harbor_itself_retried(name: str, tmp_path: Path) -> None:
    """Both jobs ran with max_retries 1, and every retried trial failed the same way again:
    Harbor's own `n_retries` is then the number of trials it re-ran, the attempts `retry`
    lists; a task whose trials Harbor did not re-run (BadRequestError, alone or after a
    retryable SandboxStopError) is not listed, though none of its rewards is valid."""
    job = FIXTURES / name
    result = orjson.loads((job / "result.json").read_bytes())
    listed = _harbor_retries(job, tmp_path)
    assert sum(lacks for lacks, _ in listed.values()) == result["stats"]["n_retries"] == 2
    assert listed == {"evalfix/ratelimit" if name == "job-026-retry" else "evalfix/steprate": (2, [])}


def test_a_harbor_job_whose_dead_trials_harbor_would_not_retry(tmp_path: Path) -> None:
    """job-026-mixed: dead (RewardFileNotFoundError), badrequest and the overridden ones are
    settled by Harbor's rule; rate-limited trials are retryable, so their task lacks all four."""
    listed = _harbor_retries(FIXTURES / "job-026-mixed", tmp_path)
    assert {task: lacks for task, (lacks, _) in listed.items()} == {"evalfix/ratelimit": 4}
    overridden = _harbor_retries(FIXTURES / "job-026-override", tmp_path)
    assert overridden == {}  # AgentTimeoutError's reward is not valid there, and it is never retried
