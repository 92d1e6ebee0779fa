"""`evalstream replay`: the file-to-summaries path, end to end."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from events.codec import encode
from events.outputs import RunProgress, RunSummary
from events.synthetic import interleave, synthetic_run
from projections.closed_caches import CLOSED_CACHES_BYTES
from tests import builders
from tests.projections.examples import EXAMPLE_LOG, EXPECTED
from worker.commands.replay import replay, route_key

COMPARED = ("summary", "harbor", "verdicts", "statistics", "event_count", "closed_reason", "labels")


def run_replay(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "worker.commands.cli", "replay", *args],
        input=stdin,
        capture_output=True,
        check=False,
        timeout=120,
    )


def write_log(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_the_example_log_gives_exactly_the_expected_summaries() -> None:
    done = run_replay(str(EXAMPLE_LOG))
    assert done.returncode == 0, done.stderr
    latest = {}
    for line in done.stdout.splitlines():
        record = orjson.loads(line)
        RunSummary.model_validate(record)
        latest[record["run_id"]] = record
    expected = [orjson.loads(line) for line in EXPECTED.read_bytes().splitlines()]
    assert sorted(latest) == sorted(record["run_id"] for record in expected)
    for record in expected:
        got = latest[record["run_id"]]
        for field in COMPARED:
            assert got[field] == record[field], (record["run_id"], field)
        # Key order is part of the bytes: same order as the independent implementation.
        assert orjson.dumps({f: got[f] for f in COMPARED}) == orjson.dumps({f: record[f] for f in COMPARED})


def test_late_events_give_new_revisions_and_a_second_close_changes_nothing(tmp_path: Path) -> None:
    events = [
        builders.started("r", [builders.task_spec("t", {"reward.score": "continuous"})]),
        builders.score("t", "a", "reward", {"score": 1.0}, run_id="r"),
        builders.closed("r"),
        builders.score("t", "b", "reward", {"score": 0.0}, run_id="r"),
        builders.closed("r", reason="failed"),
        builders.trial("t", "b", "failed", run_id="r"),
    ]
    done = run_replay(str(write_log(tmp_path / "log.jsonl", [encode(e) for e in events])))
    summaries = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert [s["revision"] for s in summaries] == [1, 2, 3]
    assert [s["event_count"] for s in summaries] == [3, 4, 5]
    assert {s["closed_reason"] for s in summaries} == {"completed"}
    assert summaries[-1]["harbor"]["n_errors"] == 1


def test_invalid_lines_are_reported_skipped_and_counted(tmp_path: Path) -> None:
    events = [
        encode(builders.started("r", [builders.task_spec("t", {"reward.score": "continuous"})])),
        b'{"type": "score.emitted", "oops"',
        encode(builders.score("t", "a", "reward", {"score": 1.0}, run_id="r")),
        encode(builders.started("r", [], event_id="another-start")),
        b"",
        encode(builders.closed("r")),
    ]
    done = run_replay(str(write_log(tmp_path / "log.jsonl", events)))
    assert done.returncode == 0
    errors = done.stderr.decode().splitlines()
    assert errors[0].startswith("line 2: not-json: not valid JSON")
    assert errors[1].startswith("line 4: refused: run 'r' already started")
    assert "2 skipped" in errors[-1]
    [summary] = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert summary["event_count"] == 3
    assert summary["summary"]["task_metric_attempts"] == {"t": {"reward.score": [{"trial_id": "a", "value": 1.0}]}}


def test_stdin_and_progress(tmp_path: Path) -> None:
    events = [
        builders.started(
            "r", [builders.task_spec("t", {"reward.score": "continuous"}), builders.task_spec("u")], attempts_per_task=2
        ),
        builders.score("t", "a", "reward", {"score": 1.0}, run_id="r"),
        builders.closed("r"),
    ]
    done = run_replay("-", "--progress", stdin=b"\n".join(encode(e) for e in events))
    records = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert [r["type"] for r in records] == ["run.progress", "run.progress", "run.progress", "run.summary"]
    progress = [RunProgress.model_validate(r) for r in records[:3]]
    assert [p.seq for p in progress] == [1, 2, 3]
    assert [p.status for p in progress] == ["open", "open", "closed"]
    assert progress[0].tasks.pending == 2
    assert progress[1].tasks.pending == 1
    assert progress[1].pass_at_k["reward.score"]["1"].mean == 1.0


def test_an_unreadable_input_exits_2_with_a_reason(tmp_path: Path) -> None:
    done = run_replay(str(tmp_path / "missing.jsonl"))
    assert done.returncode == 2
    assert b"cannot read" in done.stderr


def test_a_budget_of_closed_caches_changes_no_byte_of_the_output(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", EXAMPLE_LOG.read_bytes().splitlines())
    default, dropping = run_replay(str(log)), run_replay("--closed-caches-mb", "0", str(log))
    assert dropping.returncode == 0, dropping.stderr
    assert dropping.stdout == default.stdout
    assert b"summaries" in dropping.stderr
    refused = run_replay("--closed-caches-mb", "-1", str(log))
    assert refused.returncode == 2
    assert b"--closed-caches-mb: invalid natural value" in refused.stderr


@pytest.mark.parametrize("flag", ["--help"])
def test_the_cli_documents_itself(flag: str) -> None:
    done = run_replay(flag)
    assert done.returncode == 0
    assert b"--progress-every" in done.stdout


@pytest.mark.parametrize(
    ("line", "key"),
    [
        (b'{"type": "run.closed", "run_id": "r-1", "event_id": "e"}', b"r-1"),
        (b'{"run_id" :  "r-2", "type": "run.closed"}', b"r-2"),
        (b'{"labels": {"run_id": "decoy"}, "run_id": "r-3"}', b"r-3"),
        (b'{"run_id": "r\\"4", "type": "run.closed"}', b'r"4'),
        (b'{"run_id": 5}', b""),
        (b"not json at all", b""),
        (b'{"type": "run.closed"}', b""),
    ],
)
def test_route_key_finds_the_top_level_run_id(line: bytes, key: bytes) -> None:
    assert route_key(line) == key


def test_sharded_replay_and_any_budget_of_closed_caches_write_the_same_bytes_as_one_process(tmp_path: Path) -> None:
    sources = [synthetic_run(f"run-{i}", tasks=6, attempts=3, seed=3) for i in range(5)]
    lines = [orjson.dumps(event) for event in interleave(sources, seed=3)]
    lines[40:40] = [b"garbage", lines[10], b""]  # an invalid line, a redelivery, a blank line
    lines += EXAMPLE_LOG.read_bytes().splitlines()
    results = []
    for jobs, budget in ((1, CLOSED_CACHES_BYTES), (2, CLOSED_CACHES_BYTES), (3, CLOSED_CACHES_BYTES), (1, 0), (2, 0)):
        out, err = io.BytesIO(), io.StringIO()
        stats = replay(iter(lines), out, err, progress_every=7, jobs=jobs, closed_caches_bytes=budget)
        results.append((out.getvalue(), err.getvalue(), stats))
    assert results[0][0].count(b'"run.summary"') == 5 + 20  # 5 synthetic runs, 20 example revisions
    assert results[0][1].startswith("line 41: not-json")
    for other in results[1:]:
        assert other == results[0]
