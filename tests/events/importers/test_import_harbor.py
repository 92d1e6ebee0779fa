"""`evalstream import harbor JOB`: real Harbor 0.25 and 0.26 jobs (tests/fixtures/harbor) as event logs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.codec import decode
from events.importers.harbor import read, read_job, read_trial, trial_files
from events.importers.source import ImportOptions, SourceError
from events.models import RunClosed, RunStarted, ScoreFailed, ScoreMeasured, TrialFinished
from tests.events.importers.harbor_stats import (
    FIXTURES,
    JOBS,
    assert_matches_harbor,
    closing_lines,
    harbor_evals,
    imported,
    replayed,
    several_reward_keys,
    summaries,
)


def _finished(job: Path) -> bool:
    return json.loads((job / "result.json").read_text())["finished_at"] is not None


@pytest.mark.parametrize("job", JOBS, ids=[job.name for job in JOBS])
def test_the_replayed_harbor_block_is_harbors_own_job_stats(job: Path) -> None:
    finished = _finished(job)
    lines = imported(job) + ([] if finished else closing_lines(job))
    ours = summaries(replayed(lines))
    theirs = harbor_evals(job)
    assert set(ours) == set(theirs)
    for run_id, stats in theirs.items():
        assert_matches_harbor(ours[run_id]["harbor"], stats, finished=finished, multi_key=several_reward_keys(job))


def test_the_command_line_pipe_gives_the_same_summaries() -> None:
    job = FIXTURES / "job-mixed"
    cli = [sys.executable, "-m", "worker.commands.cli"]
    source = subprocess.run([*cli, "import", "harbor", str(job)], capture_output=True, check=True, timeout=120)
    folded = subprocess.run([*cli, "replay", "-"], input=source.stdout, capture_output=True, check=True, timeout=120)
    assert folded.stdout == replayed(imported(job))
    assert folded.stdout.count(b'"type":"run.summary"') == 1


@pytest.mark.parametrize("job", JOBS, ids=[job.name for job in JOBS])
def test_importing_twice_is_a_redelivery(job: Path) -> None:
    once = imported(job)
    assert imported(job) == once
    assert replayed(once + once) == replayed(once)


def test_a_job_still_running_leaves_its_runs_open_and_counts_its_cancelled_trial() -> None:
    events = list(read(FIXTURES / "job-running", ImportOptions()))
    assert not any(isinstance(event, RunClosed) for event in events)
    cancelled = [e for e in events if isinstance(e, TrialFinished) and e.error and e.error.type == "CancelledError"]
    assert len(cancelled) == 1
    assert cancelled[0].status == "failed"
    (score,) = [e for e in events if isinstance(e, ScoreFailed) and e.trial_id == cancelled[0].trial_id]
    assert score.failure == "trial"


def test_each_way_a_trial_ends() -> None:
    events = list(read(FIXTURES / "job-mixed", ImportOptions()))
    by_trial: dict[str, list[object]] = {}
    for event in events:
        if isinstance(event, TrialFinished | ScoreMeasured | ScoreFailed):
            by_trial.setdefault(event.trial_id, []).append(event)
    ways: dict[str, tuple[str, str | None, str]] = {}
    for trial_events in by_trial.values():
        finished, score = trial_events
        assert isinstance(finished, TrialFinished)
        assert isinstance(score, ScoreMeasured | ScoreFailed)
        ways.setdefault(
            finished.task_id.split("/")[-1],
            (finished.status, finished.error.type if finished.error else None, score.status),
        )
    assert ways == {
        "solid": ("completed", None, "completed"),
        "wrong": ("completed", None, "completed"),
        "flaky": ("completed", None, "completed"),
        "dead": ("failed", "RewardFileNotFoundError", "failed"),
        "teardown": ("failed", "SandboxStopError", "completed"),  # raised after the verifier graded it
        "slow": ("failed", "AgentTimeoutError", "completed"),  # timed out, then graded all the same
    }
    (start,) = [event for event in events if isinstance(event, RunStarted)]
    assert start.attempts_per_task == 4
    assert {o.kind for task in start.tasks for metric in task.metrics for o in metric.outputs} == {"continuous"}
    # dead's trials returned no reward: it declares its group's keys, so they count as failures.
    dead = next(task for task in start.tasks if task.task_id.endswith("/dead"))
    assert [o.name for o in dead.metrics[0].outputs] == ["reward"]


def _ways(job: str) -> dict[str, tuple[str, str | None, str, str | None]]:
    """Per task, how its first trial ended: (trial status, its error type, score status, failure)."""
    ways: dict[str, tuple[str, str | None, str, str | None]] = {}
    events = list(read(FIXTURES / job, ImportOptions()))
    for finished in events:
        if isinstance(finished, TrialFinished):
            (score,) = [
                e for e in events if isinstance(e, ScoreMeasured | ScoreFailed) and e.trial_id == finished.trial_id
            ]
            failure = score.failure if isinstance(score, ScoreFailed) else None
            error = finished.error.type if finished.error else None
            ways.setdefault(finished.task_id.split("/")[-1], (finished.status, error, score.status, failure))
    return ways


def test_each_way_a_harbor_0_26_trial_ends() -> None:
    assert _ways("job-026-mixed") == {
        "solid": ("completed", None, "completed", None),
        "wrong": ("completed", None, "completed", None),
        "flaky": ("completed", None, "completed", None),
        "dead": ("failed", "RewardFileNotFoundError", "failed", "trial"),
        "teardown": ("failed", "SandboxStopError", "completed", None),  # an unknown type: its reward valid
        "slow": ("failed", "AgentTimeoutError", "completed", None),  # timed out, graded, valid
        "exitcode": ("failed", "NonZeroAgentExitCodeError", "completed", None),
        "ratelimit": ("failed", "RateLimitError", "failed", "metric"),  # graded, reward not valid
        "badrequest": ("failed", "BadRequestError", "failed", "metric"),
        "steps": ("failed", "AgentTimeoutError", "completed", None),  # a step's exception
    }


def test_a_job_override_of_the_error_policy_is_followed() -> None:
    """job-026-override makes RateLimitError's reward valid and AgentTimeoutError's not."""
    ways = _ways("job-026-override")
    assert ways["ratelimit"] == ("failed", "RateLimitError", "completed", None)
    assert ways["slow"] == ("failed", "AgentTimeoutError", "failed", "metric")
    assert ways["steps"] == ("failed", "AgentTimeoutError", "failed", "metric")


def test_a_score_harbor_holds_not_valid_carries_the_exception_that_made_it_so() -> None:
    events = list(read(FIXTURES / "job-026-mixed", ImportOptions()))
    failed = [e for e in events if isinstance(e, ScoreFailed) and e.failure == "metric"]
    assert len(failed) == 8
    assert {(e.error.type, e.error.message) for e in failed if e.error} == {
        ("RateLimitError", "the model endpoint answered with RateLimitError"),
        ("BadRequestError", "the model endpoint answered with BadRequestError"),
    }


@pytest.mark.parametrize(
    ("job", "rules"),
    [(job.name, "0.26" if job.name.startswith("job-026") else "0.25") for job in JOBS],
)
def test_each_run_declares_the_harbor_rules_of_the_version_that_ran_the_job(job: str, rules: str) -> None:
    starts = [event for event in read(FIXTURES / job, ImportOptions()) if isinstance(event, RunStarted)]
    assert starts
    assert {start.harbor_rules for start in starts} == {rules}


def test_a_0_26_job_read_with_0_25_rules_is_not_harbors_figure() -> None:
    """What the rules change on a real job: pass@k counting the dead trials as 0s (0.25's
    rule) is not what Harbor 0.26 wrote, and the declared rules give Harbor's."""
    job = FIXTURES / "job-026-mixed"
    (theirs,) = harbor_evals(job).values()
    as_026 = imported(job)
    as_025 = [line.replace(b'"harbor_rules":"0.26"', b'"harbor_rules":"0.25"') for line in as_026]
    assert as_025 != as_026
    ((_, ours),) = summaries(replayed(as_026)).items()
    ((_, old),) = summaries(replayed(as_025)).items()
    assert ours["harbor"]["pass_at_k"]["harbor_reward.reward"] == theirs["pass_at_k"]
    assert old["harbor"]["pass_at_k"]["harbor_reward.reward"] != theirs["pass_at_k"]
    assert (ours["harbor"]["n_trials"], theirs["n_trials"]) == (28, 28)


def test_harbor_retries_a_trial_only_when_every_exception_it_recorded_is_retryable() -> None:
    """job-026-retry (max_retries 1): RateLimitError is retryable, BadRequestError not; the
    steps trial recorded AgentTimeoutError, not retryable."""
    job = read_job(FIXTURES / "job-026-retry")
    trials = {trial.task.split("/")[-1]: trial for trial in map(read_trial, trial_files(FIXTURES / "job-026-retry"))}
    running = replace(job, finished=False)
    assert running.may_retry(trials["ratelimit"])
    assert not running.may_retry(trials["badrequest"])
    assert not running.may_retry(trials["solid"])
    assert not job.may_retry(trials["ratelimit"])  # the job is done: nothing more comes
    steps = read_trial(next((FIXTURES / "job-026-mixed").glob("steps__*/result.json")))
    mixed = replace(read_job(FIXTURES / "job-026-mixed"), finished=False, max_retries=1)
    assert not mixed.may_retry(steps)
    assert mixed.retryable("RateLimitError")
    assert not mixed.retryable("AgentTimeoutError")
    both = replace(steps, raised=(*trials["ratelimit"].raised, *steps.raised))
    assert not mixed.may_retry(both)
    assert mixed.may_retry(replace(steps, raised=trials["ratelimit"].raised * 2))


@pytest.mark.parametrize(("job", "rules"), [("job-026-mixed", "0.26"), ("job-mixed", "0.25")])
def test_a_lock_without_a_version_takes_the_rules_the_trials_show(tmp_path: Path, job: str, rules: str) -> None:
    """Harbor writes `version: null` where it cannot name itself: 0.26's trials record
    `reward_valid`, 0.25's do not."""
    copy = _copy(FIXTURES / job, tmp_path)
    lock = json.loads((copy / "lock.json").read_text())
    lock["harbor"]["version"] = None
    (copy / "lock.json").write_text(json.dumps(lock))
    starts = [event for event in read(copy, ImportOptions()) if isinstance(event, RunStarted)]
    assert {start.harbor_rules for start in starts} == {rules}


def test_run_ids_come_from_the_job_and_the_group_and_run_id_overrides_them() -> None:
    def run_ids(job: str, run_id: str | None) -> list[str]:
        events = read(FIXTURES / job, ImportOptions(run_id=run_id))
        return list(dict.fromkeys(event.run_id for event in events))

    assert run_ids("job-b", None) == ["job-b:oracle__tasks"]
    assert run_ids("job-b", "mine") == ["mine"]
    groups = ["oracle__tasks", "nop__tasks", "nop__acme/m-small__tasks"]
    assert sorted(run_ids("job-groups", None)) == sorted(f"job-groups:{group}" for group in groups)
    assert sorted(run_ids("job-groups", "mine")) == sorted(f"mine:{group}" for group in groups)


def test_trials_are_in_the_order_they_started_not_the_order_they_ended() -> None:
    job = FIXTURES / "job-overlap"
    results = [json.loads(file.read_text()) for file in job.glob("*/result.json")]
    started = [r["trial_name"] for r in sorted(results, key=lambda r: r["started_at"])]
    ended = [r["trial_name"] for r in sorted(results, key=lambda r: r["finished_at"])]
    assert started != ended  # what makes this fixture worth having
    events = [decode(line) for line in imported(job)]
    assert [e.trial_id for e in events if isinstance(e, TrialFinished)] == started


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_any_part_of_a_job_counts_its_graded_and_failed_trials(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    source = FIXTURES / "job-mixed"
    trials = sorted(path.parent.name for path in source.glob("*/result.json"))
    kept = data.draw(st.lists(st.sampled_from(trials), min_size=1, unique=True))
    job = tmp_path_factory.mktemp("job")
    for name in ("config.json", "result.json"):
        shutil.copy(source / name, job / name)
    for trial in kept:
        (job / trial).mkdir()
        shutil.copy(source / trial / "result.json", job / trial / "result.json")
    results = [json.loads((job / trial / "result.json").read_text()) for trial in kept]
    (summary,) = summaries(replayed(imported(job))).values()
    assert summary["harbor"]["n_trials"] == sum(
        (r["verifier_result"] or {}).get("rewards") is not None for r in results
    )
    assert summary["harbor"]["n_errors"] == sum(r["exception_info"] is not None for r in results)


def _cli_import(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "worker.commands.cli", "import", "harbor", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _copy(job: Path, into: Path) -> Path:
    return Path(shutil.copytree(job, into / job.name))


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (shutil.rmtree, "no such directory; pass a Harbor job directory"),
        (lambda job: (job / "result.json").unlink(), "not a Harbor job directory (it has no result.json)"),
        (
            lambda job: (job / "solid__R8goNSc" / "result.json").write_text('{\n  "id": "f6a1",\n  "task_na'),
            "solid__R8goNSc/result.json, line 3: not valid JSON",
        ),
        (
            lambda job: (job / "solid__R8goNSc" / "result.json").write_text('{"trial_name": "x"}'),
            "solid__R8goNSc/result.json: no `agent_info` object",
        ),
        (lambda job: (job / "result.json").write_text("[]"), "result.json: not a JSON object"),
        (lambda job: (job / "lock.json").write_text('{"harbor": 3, "trials": []}'), "lock.json: no `harbor` object"),
        (
            lambda job: _edit_trial(job / "solid__R8goNSc" / "result.json", step_results=[{"exception_info": 3}]),
            "solid__R8goNSc/result.json: `step_results[0].exception_info` is not an object",
        ),
        (
            lambda job: (job / "solid__R8goNSc" / "result.json").write_text("[" * 100_000 + "]" * 100_000),
            "solid__R8goNSc/result.json: nested deeper than a JSON reader follows",
        ),
    ],
    ids=[
        "missing",
        "no-result",
        "half-written-trial",
        "not-a-trial",
        "not-an-object",
        "lock-without-harbor",
        "step-exception-not-an-object",
        "nested-too-deep",
    ],
)
def test_a_missing_or_garbled_job_is_named_with_exit_2_and_no_traceback(
    tmp_path: Path, damage: object, said: str
) -> None:
    job = _copy(FIXTURES / "job-b", tmp_path)
    damage(job)  # type: ignore[operator]
    done = _cli_import(job)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr
    assert str(job) in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def _edit_trial(file: Path, **fields: object) -> None:
    file.write_text(json.dumps({**json.loads(file.read_text()), **fields}))


def test_a_trial_result_that_cannot_be_an_event_is_a_source_error(tmp_path: Path) -> None:
    job = _copy(FIXTURES / "job-b", tmp_path)
    file = job / "solid__R8goNSc" / "result.json"
    result = json.loads(file.read_text())
    result["verifier_result"]["rewards"] = {"": 1}
    file.write_text(json.dumps(result))
    with pytest.raises(
        SourceError,
        match=r"solid__R8goNSc/result.json: cannot be written as a v1 event \(.*outputs.0.name: String should",
    ):
        list(read(job, ImportOptions()))
