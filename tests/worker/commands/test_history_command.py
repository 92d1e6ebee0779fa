"""`evalstream history` on a file of summaries: what it prints, and what it says when the
labels or the task match nothing."""

from __future__ import annotations

import subprocess
import sys

import orjson

from tests.builders import scored_run, summary_of

RUNS = [
    ("n1", {"t": [1.0, 1.0], "u": [1.0]}, "b"),
    ("n2", {"t": [0.0, 1.0], "u": [1.0]}, "b"),
    ("elsewhere", {"t": [0.0]}, "c"),
    ("n3", {"t": [0.0, 0.0], "u": [1.0]}, "b"),
]


def summaries(runs: list[tuple[str, dict[str, list[float]], str]] = RUNS) -> bytes:
    return b"\n".join(
        summary_of(scored_run(run_id, attempts, labels={"benchmark": bench}), run_id).model_dump_json().encode()
        for run_id, attempts, bench in runs
    )


def history(*args: str, given: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "worker.commands.cli", "history", "--from-file", "-", *args],
        input=summaries() if given is None else given,
        capture_output=True,
        check=False,
        timeout=60,
    )


def test_it_prints_the_task_in_each_run_and_the_tasks_that_flipped() -> None:
    done = history("--label", "benchmark=b", "--task", "t")
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.decode().splitlines()
    assert lines[:4] == [
        "task 't' in the 3 runs of benchmark=b, oldest first:",
        "  n1  reward.score  solved      1.000 (2/2)",
        "  n2  reward.score  flaky       0.500 (1/2)",
        "  n3  reward.score  failed      0.000 (0/2)",
    ]
    assert "  2/3  t  reward.score  n2  failed" in lines


def test_json_is_the_history_record() -> None:
    done = history("--label", "benchmark=b", "--json")
    shown = orjson.loads(done.stdout)
    assert shown["runs"] == ["n1", "n2", "n3"]
    assert [(flip["task_id"], flip["changes"]) for flip in shown["flips"]] == [("t", 2)]


def test_labels_or_a_task_that_match_nothing_exit_1() -> None:
    nothing = history("--label", "benchmark=zzz")
    assert nothing.returncode == 1
    assert "no run with the labels benchmark=zzz has a summary" in nothing.stderr.decode()
    no_task = history("--label", "benchmark=b", "--task", "nope")
    assert no_task.returncode == 1
    assert "has a task 'nope'" in no_task.stderr.decode()
    assert b"Traceback" not in no_task.stderr


def test_ids_reach_the_terminal_escaped() -> None:
    clear = "\x1b[2J"
    given = summaries([(f"r1{clear}", {f"t{clear}": [1.0]}, "b"), ("r2\r", {f"t{clear}": [0.0]}, "b")])
    done = history("--label", "benchmark=b", given=given)
    assert done.returncode == 0, done.stderr.decode()
    shown = done.stdout.decode()
    assert "\x1b" not in shown
    assert "\r" not in shown
    assert "  1/2  t\\x1b[2J  reward.score  r2\\r  failed" in shown.splitlines()
