"""`evalstream export parquet` on summaries files, its tables read back with DuckDB."""

from __future__ import annotations

import math
from pathlib import Path

import orjson
import pytest

from tests.builders import scored_run
from tests.worker.export.exporting import (
    benchmark_runs,
    evalstream,
    expected_pass_figures,
    query,
    replayed,
    summaries_of,
)


def read(out: Path, table: str) -> str:
    return f"read_parquet('{out}/{table}/*/*.parquet', hive_partitioning = true)"


@pytest.fixture(scope="module")
def summaries(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return replayed(tmp_path_factory.mktemp("parquet"), benchmark_runs())


@pytest.fixture(scope="module")
def exported(summaries: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tables")
    done = evalstream("export", "parquet", "--out", str(out), "--from-file", str(summaries))
    assert done.returncode == 0, done.stderr
    assert "runs written to Parquet in" in done.stderr
    return out


def test_figures_equal_the_summaries(summaries: Path, exported: Path) -> None:
    latest = summaries_of(summaries)
    for run_id, summary in latest.items():
        rows = query(
            f"SELECT key, figure, k, value, stderr, ci95_low, ci95_high FROM {read(exported, 'figures')} "
            "WHERE run_id = $run AND figure IN ('pass@k', 'pass^k') ORDER BY ALL",
            {"run": run_id},
        )
        assert rows == expected_pass_figures(summary), run_id
        revisions = query(
            f"SELECT DISTINCT revision FROM {read(exported, 'figures')} WHERE run_id = $run", {"run": run_id}
        )
        assert revisions == [(summary.revision,)]
    means = dict(
        query(f"SELECT key, value FROM {read(exported, 'figures')} WHERE run_id = 'synthetic' AND figure = 'mean'")
    )
    # A mean over no finite value (the boolean output's: booleans are not numbers there) is left out.
    scores = {
        s.name: s.mean for s in latest["synthetic"].summary.scores if ".pass@" not in s.name and s.mean is not None
    }
    assert means == scores
    verdicts = query(
        f"SELECT figure, value FROM {read(exported, 'figures')} WHERE run_id = 'new' AND key = 'reward.score' "
        "AND figure LIKE 'verdicts.%' ORDER BY figure"
    )
    assert verdicts == [
        ("verdicts.failed", 3.0),
        ("verdicts.flaky", 0.0),
        ("verdicts.solved", 2.0),
        ("verdicts.unmeasured", 0.0),
    ]


def test_attempts_equal_the_summaries(summaries: Path, exported: Path) -> None:
    for run_id, summary in summaries_of(summaries).items():
        rows = query(
            f"SELECT task_id, key, attempt, trial_id, value, passed, labels FROM {read(exported, 'attempts')} "
            "WHERE run_id = $run ORDER BY task_id, key, attempt",
            {"run": run_id},
        )
        expected = []
        for task_id, keys in summary.summary.task_metric_attempts.items():
            for key, attempts in keys.items():
                for index, attempt in enumerate(attempts):
                    value = None if attempt.value is None else float(attempt.value)
                    passed = value is not None and value >= 1.0
                    expected.append((task_id, key, index, attempt.trial_id, value, passed, summary.labels))
        assert len(rows) == len(expected), run_id
        for row, wanted in zip(rows, sorted(expected, key=lambda row: (row[0], row[1], row[2])), strict=True):
            assert row[:4] == wanted[:4]
            assert row[4] == wanted[4] or (math.isnan(row[4]) and math.isnan(wanted[4] or 0.0))
            assert row[5:] == wanted[5:]


def test_flipped_tasks_in_sql_are_those_history_reports(summaries: Path, exported: Path) -> None:
    flipped = query(
        f"""
        WITH verdicts AS (
            SELECT run_id, task_id, key,
                   CASE WHEN bool_and(passed) THEN 'solved' WHEN bool_or(passed) THEN 'flaky' ELSE 'failed' END
                   AS verdict
            FROM {read(exported, "attempts")}
            WHERE labels['benchmark'] = 'flips'
            GROUP BY ALL)
        SELECT was.task_id FROM verdicts AS was JOIN verdicts AS now USING (task_id, key)
        WHERE was.run_id = 'old' AND now.run_id = 'new' AND was.verdict = 'solved' AND now.verdict = 'failed'
        ORDER BY 1
        """
    )
    done = evalstream("history", "--label", "benchmark=flips", "--json", "--from-file", str(summaries))
    assert done.returncode == 0, done.stderr
    history = orjson.loads(done.stdout)
    assert history["runs"] == ["old", "new"]
    from_history = []
    for flip in history["flips"]:
        task = orjson.loads(
            evalstream(
                "history",
                "--label",
                "benchmark=flips",
                "--task",
                flip["task_id"],
                "--json",
                "--from-file",
                str(summaries),
            ).stdout
        )
        before, after = (run["outcomes"][flip["key"]]["verdict"] for run in task["task"])
        if (before, after) == ("solved", "failed"):
            from_history.append((flip["task_id"],))
    assert flipped == sorted(from_history) == [("a",), ("e",)]


def test_a_second_export_writes_nothing_and_doubles_nothing(summaries: Path, exported: Path) -> None:
    before = {path: path.stat().st_mtime_ns for path in exported.rglob("*.parquet")}
    done = evalstream("export", "parquet", "--out", str(exported), "--from-file", str(summaries))
    assert done.returncode == 0, done.stderr
    assert "0 runs written" in done.stderr
    assert "4 unchanged" in done.stderr
    assert {path: path.stat().st_mtime_ns for path in exported.rglob("*.parquet")} == before
    counts = query(f"SELECT run_id, count(*) FROM {read(exported, 'figures')} GROUP BY 1")
    assert len(counts) == 4


def test_a_later_revision_replaces_its_runs_files(tmp_path: Path) -> None:
    first = replayed(tmp_path, scored_run("r", {"a": [1, 1]}), name="first")
    later = replayed(tmp_path, [*scored_run("r", {"a": [1, 1]}), *scored_run("r", {"a": [0]})[1:-1]], name="later")
    out = tmp_path / "tables"
    assert evalstream("export", "parquet", "--out", str(out), "--from-file", str(later)).returncode == 0
    # An older revision read afterwards (a file exported again) changes nothing.
    older = evalstream("export", "parquet", "--out", str(out), "--from-file", str(first))
    assert "1 unchanged" in older.stderr
    rows = query(f"SELECT revision, value FROM {read(out, 'attempts')} ORDER BY attempt")
    assert rows == [(2, 1.0), (2, 1.0), (2, 0.0)]
    assert len(list((out / "attempts").rglob("*.parquet"))) == 1
    assert not list((out / ".evalstream-tmp").iterdir())


def test_partitioned_by_a_label_read_selectively(summaries: Path, tmp_path: Path) -> None:
    done = evalstream(
        "export", "parquet", "--out", str(tmp_path), "--partition-by", "label:benchmark", "--from-file", str(summaries)
    )
    assert done.returncode == 0, done.stderr
    folders = sorted(path.name for path in (tmp_path / "figures").iterdir())
    assert folders == ["benchmark=flips", "benchmark=late%2Fone", "benchmark=synthetic"]
    assert query(f"SELECT DISTINCT run_id FROM {read(tmp_path, 'figures')} WHERE benchmark = 'late/one'") == [("late",)]
    # Only the partition asked for is opened: a file elsewhere that is not Parquet at all breaks nothing.
    (tmp_path / "figures" / "benchmark=synthetic" / "broken.parquet").write_bytes(b"not parquet")
    runs = query(f"SELECT DISTINCT run_id FROM {read(tmp_path, 'figures')} WHERE benchmark = 'flips' ORDER BY 1")
    assert runs == [("new",), ("old",)]
    again = evalstream("export", "parquet", "--out", str(tmp_path), "--from-file", str(summaries))
    assert again.returncode == 1
    assert "is partitioned by 'benchmark', not 'date'" in again.stderr


def test_bad_lines_are_named_and_the_rest_written(summaries: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b'{"type": "run.summary", "run_id": "x"}\nnot json\n' + summaries.read_bytes())
    done = evalstream("export", "parquet", "--out", str(tmp_path / "out"), "--from-file", str(broken))
    assert done.returncode == 3
    assert f"{broken} line 1: not a run.summary record, skipped: " in done.stderr
    assert f"{broken} line 2: not a run.summary record, skipped: " in done.stderr
    assert "4 runs written" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--partition-by", "month"], 2, "--partition-by is `date` or `label:NAME`"),
        (["--follow"], 2, "--follow follows the summaries topic; a file is read to its end"),
        (["--from-file", "/no/such/file"], 2, "cannot read /no/such/file"),
    ],
)
def test_usage_errors(summaries: Path, tmp_path: Path, args: list[str], code: int, message: str) -> None:
    extra = [] if "--from-file" in args else ["--from-file", str(summaries)]
    done = evalstream("export", "parquet", "--out", str(tmp_path), *extra, *args)
    assert done.returncode == code, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unwritable_directory_exits_1(summaries: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = evalstream("export", "parquet", "--out", str(blocker / "out"), "--from-file", str(summaries))
    assert done.returncode == 1
    assert f"cannot write into {blocker / 'out'}" in done.stderr
