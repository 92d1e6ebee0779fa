"""`evalstream gate --live` against a real broker and worker: its exit codes, as CI sees them."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import orjson
import pytest

from events.codec import encode
from events.models import InputEvent
from tests.builders import scored_run
from tests.receiver import receiver
from worker.local.processes import WorkerProcess, topic_flags
from worker.settings import Settings

pytestmark = pytest.mark.kafka


def command(settings: Settings, *args: str) -> list[str]:
    return [sys.executable, "-m", "worker.commands.cli", *args, *topic_flags(settings)]


def evalstream(settings: Settings, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(command(settings, *args), capture_output=True, check=False, timeout=120)


def run_of(run_id: str, values: Sequence[int], tasks: int, *, close: bool = True) -> list[InputEvent]:
    """`tasks` tasks with the attempts `values` each, declaring attempts_per_task; closed or not."""
    events = scored_run(run_id, {f"t{i}": list(values) for i in range(tasks)})
    events[0] = events[0].model_copy(update={"attempts_per_task": len(values)})
    return events if close else events[:-1]


def publish(settings: Settings, folder: Path, name: str, events: list[InputEvent]) -> None:
    log = folder / f"{name}.jsonl"
    log.write_bytes(b"".join(encode(event) + b"\n" for event in events))
    published = evalstream(settings, "publish", str(log))
    assert published.returncode == 0, published.stderr


@pytest.fixture(scope="module")
def baseline(worker: WorkerProcess, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A closed baseline of 100 tasks passing 2 of 2, once the worker has its summary."""
    settings = worker.settings
    publish(settings, tmp_path_factory.mktemp("live"), "base", run_of("live-base", [1, 1], 100))
    deadline = time.monotonic() + 60
    while not evalstream(settings, "summaries", "--run", "live-base").stdout:
        assert time.monotonic() < deadline, "the worker published no summary of the baseline"
        time.sleep(0.5)
    return "live-base"


def test_a_regression_is_established_while_the_candidate_runs(
    worker: WorkerProcess, baseline: str, tmp_path: Path
) -> None:
    settings = worker.settings
    gate = subprocess.Popen(
        command(settings, "gate", "--live", baseline, "live-worse", "--timeout", "90"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        publish(settings, tmp_path, "worse", run_of("live-worse", [0, 0], 100, close=False))  # never closes
        out, err = gate.communicate(timeout=120)
    finally:
        gate.kill()
    assert gate.returncode == 3, err
    last = out.decode().splitlines()[-1]
    assert last.startswith("gate FAILED: regression beyond 0 established on reward.score at ")
    assert "candidate trials" in last
    assert "paired tasks, 95% CS [" in last
    paired = int(last.split("reward.score: ")[1].split(" paired")[0])
    assert 2 <= paired < 100  # decided before the candidate's last task


def test_a_regression_ruled_out_passes_before_the_close(worker: WorkerProcess, baseline: str, tmp_path: Path) -> None:
    settings = worker.settings
    publish(settings, tmp_path, "same", run_of("live-same", [1, 1], 100, close=False))
    done = evalstream(settings, "gate", "--live", baseline, "live-same", "--threshold", "0.5", "--json")
    assert done.returncode == 0, done.stderr
    decision = orjson.loads(done.stdout.splitlines()[-1])
    assert (decision["type"], decision["decision"], decision["closed"]) == ("decision", "pass", False)
    assert decision["reason"] == "regression beyond -0.5 ruled out"
    (key,) = decision["keys"]
    assert key["interval"][0] > -0.5
    assert key["paired"] < 100


def test_a_close_without_a_regression_passes(worker: WorkerProcess, baseline: str, tmp_path: Path) -> None:
    settings = worker.settings
    publish(settings, tmp_path, "few", run_of("live-few", [1, 0], 4))
    done = evalstream(settings, "gate", "--live", baseline, "live-few")
    assert done.returncode == 0, done.stderr
    last = done.stdout.decode().splitlines()[-1]
    assert last.startswith(
        "gate INCONCLUSIVE: candidate closed (completed): a drop beyond 0 neither established nor ruled out at "
    )
    assert "after 8 of 8 candidate trials (100%): reward.score: 4 paired tasks" in last
    assert ", INCONCLUSIVE; " in done.stdout.decode().splitlines()[0]  # each look says its state
    strict = evalstream(settings, "gate", "--live", baseline, "live-few", "--fail-on", "inconclusive")
    assert strict.returncode == 5, strict.stderr
    # The baseline from a file instead of the summaries topic: the same decision.
    base_log = tmp_path / "base.jsonl"
    base_log.write_bytes(b"".join(encode(event) + b"\n" for event in run_of("live-base", [1, 1], 100)))
    summaries = tmp_path / "summaries.jsonl"
    replayed = subprocess.run(
        [sys.executable, "-m", "worker.commands.cli", "replay", str(base_log)], capture_output=True, check=True
    )
    summaries.write_bytes(replayed.stdout)
    from_file = evalstream(settings, "gate", "--live", baseline, "live-few", "--from-file", str(summaries))
    assert from_file.returncode == 0, from_file.stderr
    assert from_file.stdout.decode().splitlines()[-1].split(" at ")[0] == last.split(" at ")[0]


def test_a_decision_runs_the_command_and_posts_to_the_webhook_once(
    worker: WorkerProcess, baseline: str, tmp_path: Path
) -> None:
    """A regression established while the candidate runs: the command gets the decision on stdin and
    in its environment (here it stands for a harness's cancel), the webhook a chat message, once each;
    the command's output goes to stderr, so that stdout stays JSON lines."""
    settings = worker.settings
    publish(settings, tmp_path, "acted", run_of("live-acted", [0, 0], 100, close=False))
    seen = tmp_path / "seen"
    command_line = (
        f'cat > {seen}.json; echo "$EVALSTREAM_GATE_DECISION $EVALSTREAM_GATE_PASSED $EVALSTREAM_GATE_EXIT_CODE '
        f'$EVALSTREAM_GATE_BASELINE $EVALSTREAM_GATE_CANDIDATE" >> {seen}.env; echo cancelling the candidate'
    )
    with receiver([503]) as hook:  # busy once: taken on the retry
        done = evalstream(
            settings, "gate", "--live", baseline, "live-acted", "--json", "--on-decision", command_line,
            "--webhook", hook.url,
        )  # fmt: skip
    assert done.returncode == 3, done.stderr
    printed = orjson.loads(done.stdout.splitlines()[-1])
    assert (printed["decision"], printed["baseline"], printed["candidate"]) == ("block", "live-base", "live-acted")
    assert orjson.loads((tmp_path / "seen.json").read_bytes()) == printed
    assert (tmp_path / "seen.env").read_text() == "block false 3 live-base live-acted\n"
    assert b"cancelling the candidate" in done.stderr
    assert b"cancelling" not in done.stdout
    (message,) = hook.taken
    assert message["evalstream"] == printed
    assert message["text"].startswith("gate FAILED: regression beyond 0 established on reward.score at ")


def test_an_action_that_fails_is_reported_and_the_decision_stands(
    worker: WorkerProcess, baseline: str, tmp_path: Path
) -> None:
    settings = worker.settings
    publish(settings, tmp_path, "unacted", run_of("live-unacted", [0, 0], 100, close=False))
    with receiver([404]) as hook:
        done = evalstream(
            settings, "gate", "--live", baseline, "live-unacted", "--on-decision", "exit 7", "--webhook", hook.url
        )
    assert done.returncode == 3, done.stderr  # the decision's code, which CI acts on
    assert b"--on-decision 'exit 7' exited 7: see its output above; the decision stands (exit 3)" in done.stderr
    assert b"--webhook: " in done.stderr
    assert b"refused the message: HTTP 404" in done.stderr
    assert len(hook.bodies) == 1  # a refusal is not retried


def test_what_cannot_run_exits_1_or_2(worker: WorkerProcess, baseline: str, tmp_path: Path) -> None:
    settings = worker.settings
    waited = evalstream(settings, "gate", "--live", baseline, "live-nothing", "--timeout", "2")
    assert waited.returncode == 1
    assert b"no decision on 'live-nothing' after 2 s (0 candidate trials, 0 paired tasks)" in waited.stderr
    no_topic = evalstream(settings.with_overrides(events_topic="no-such-events"), "gate", "--live", baseline, "x")
    assert no_topic.returncode == 1
    assert b"no topic 'no-such-events' at " in no_topic.stderr
    no_baseline = evalstream(settings, "gate", "--live", "no-such-run", "x")
    assert no_baseline.returncode == 1
    assert b"no summary of run 'no-such-run' in topic" in no_baseline.stderr
    for args, message in (
        (["--key", "judge.pass"], b"'judge.pass' is not a pass@k key of the baseline 'live-base'"),
        (["--max-regressions", "1"], b"--max-regressions counts verdicts at the close: use it without --live"),
        (["--timeout", "0"], b"--timeout is in seconds, > 0; got 0"),
        (["--webhook", "hooks.example/x"], b"--webhook 'hooks.example/x' is not an http(s) URL"),
        (["--on-decision", " "], b"--on-decision is empty"),
    ):
        done = evalstream(settings, "gate", "--live", baseline, "x", *args)
        assert done.returncode == 2, done.stderr
        assert message in done.stderr
        assert b"Traceback" not in done.stderr
    fixed = evalstream(settings, "gate", baseline, "x", "--webhook", "https://hooks.example/x")
    assert fixed.returncode == 2
    assert b"--on-decision and --webhook act on the live gate's decision: use them with --live" in fixed.stderr
