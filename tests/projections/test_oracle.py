"""The fold held to the spec's oracle (`tests/projections/oracle.py`: SEMANTICS.md and
EVENTS.md transcribed, sharing nothing with the fold): every `run.summary` replay writes for
a log, every revision of every run, field by field, in order, floats to the bit.

The fold is reached through its public entry: `projections.replayer.Replayer` in this
process (the Python source, EVALSTREAM_PURE=1, tests/conftest.py), and `evalstream replay` in a
process of its own for the compiled build, the one the worker and the commands run.

The oracle is checked first against the spec's own worked examples and its example log."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events.codec import encode
from events.models import InputEvent
from events.synthetic import interleave, synthetic_run
from projections.replayer import STDOUT, Replayer
from tests import builders
from tests.projections import oracle
from tests.projections.examples import EXAMPLE_LOG, EXPECTED, section_2_example
from tests.projections.oracle import assert_spec, difference, exact
from tests.projections.test_compiled import NOT_BUILT, compiled_environment
from tests.strategies import cancelling_values, graded_runs, mixed_logs, viewed_runs

ROOT = Path(__file__).resolve().parents[2]


def assert_agree(got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    """Every output alike, in order: summaries whole; of a progress event, the figures the
    contract fixes (`oracle.progress`), each `seq` above the run's one before."""

    def outputs(records: list[dict[str, Any]]) -> list[tuple[str, str, int]]:
        return [(r["type"], r["run_id"], r.get("revision", r["event_count"])) for r in records]

    assert outputs(got) == outputs(expected)
    seqs: dict[str, int] = {}
    for mine, theirs in zip(got, expected, strict=True):
        where = f"{mine['run_id']} {mine['type']} after {mine['event_count']} events"
        if mine["type"] == "run.progress":
            assert mine["seq"] > seqs.get(mine["run_id"], 0), where
            seqs[mine["run_id"]] = mine["seq"]
            fixed = shown(mine, theirs)
            # EVENTS.md lists what progress carries, in no order.
            assert exact(fixed, ordered=False) == exact(theirs, ordered=False), f"{where}: {difference(fixed, theirs)}"
        else:
            assert_spec(mine, theirs, f"{where}: ")


def shown(record: Any, fields: Any) -> Any:
    """The part of `record` that has the fields of `fields`, nested objects alike."""
    if not isinstance(fields, dict) or not isinstance(record, dict) or set(fields) > set(record):
        return record
    nested = {"tasks", "trials"}
    return {key: shown(record[key], fields[key]) if key in nested else record[key] for key in fields}


def lines_of(log: bytes) -> list[bytes]:
    return log.splitlines()


def folded(lines: list[bytes], *, with_progress: bool = False) -> list[dict[str, Any]]:
    """Every output the fold writes for the log, in order (this process: the Python source),
    with `with_progress` a progress event for each applied event, as `replay --progress`."""
    replayer = Replayer(progress_every=1 if with_progress else None)
    written = [output for number, line in enumerate(lines, 1) for output in replayer.feed(number, line)]
    return [orjson.loads(data) for _, stream, data in written if stream == STDOUT]


def log_of(events: Iterable[InputEvent]) -> list[bytes]:
    return [encode(event) for event in events]


# --- the oracle against the spec's own examples -------------------------------------------


def test_the_oracle_gives_section_1s_example() -> None:
    kinds = {"reward.score": "continuous", "steps.count": "discrete", "usage.tokens": "model"}
    events = [
        builders.started(tasks=[builders.task_spec("t", kinds)]),
        builders.score("t", "a", "reward", {"score": 0.0}), builders.score("t", "a", "steps", {"count": 4}),
        builders.score("t", "a", "usage", {"tokens": 900}),
        builders.broken("t", "b", "reward"), builders.score("t", "b", "steps", {"count": 6}),
        builders.score("t", "b", "usage", {"tokens": 950}),
        builders.dead("t", "c", "reward"), builders.dead("t", "c", "steps"), builders.dead("t", "c", "usage"),
        builders.score("t", "d", "reward", {"score": 1.0}), builders.score("t", "d", "steps", {"count": 5}),
        builders.score("t", "d", "usage", {"tokens": 870}),
        builders.closed(),
    ]  # fmt: skip
    [record] = oracle.replayed(log_of(events))

    def attempts(*pairs: tuple[str, float | None]) -> list[dict[str, Any]]:
        return [{"trial_id": trial, "value": value} for trial, value in pairs]

    assert record["summary"]["task_metric_attempts"] == {
        "t": {
            "reward.score": attempts(("a", 0.0), ("c", None), ("d", 1.0)),
            "steps.count": attempts(("a", 4.0), ("b", 6.0), ("c", None), ("d", 5.0)),
        }
    }


def test_the_oracle_gives_section_2s_and_section_8s_examples() -> None:
    [record] = oracle.replayed(log_of([*section_2_example(), builders.closed()]))
    scores = {aggregate["name"]: aggregate for aggregate in record["summary"]["scores"]}
    figures = [
        (scores[f"reward.score.pass@{k}"]["count"], scores[f"reward.score.pass@{k}"]["nan_count"]) for k in (1, 2, 3)
    ]
    assert figures == [(3, 2), (2, 2), (2, 2)]
    assert round(scores["reward.score.pass@1"]["mean"], 4) == 0.7778
    assert round(scores["reward.score.pass@2"]["mean"], 4) == 0.8333
    assert scores["reward.score.pass@3"]["mean"] == 1.0
    [pass_at_1, *_] = record["statistics"]["reward.score"]["pass_at_k"]
    # Section 8's figures, which docs/choices.md reads with section 2's estimator.
    assert pass_at_1 == {
        "k": 1, "count": 3, "nan_count": 2, "mean": 0.7777777777777777, "stderr": 0.22222222222222227,
        "ci95_low": 0.0, "ci95_high": 1.0,
    }  # fmt: skip
    hats = record["statistics"]["reward.score"]["pass_hat_k"]
    assert hats[0]["mean"] == 0.7777777777777778
    assert [(h["count"], h["nan_count"], h["mean"], h["stderr"]) for h in hats[1:]] == [(2, 2, 0.5, 0.5)] * 2
    assert [(h["ci95_low"], h["ci95_high"]) for h in hats[1:]] == [(0.0, 1.0)] * 2
    assert record["verdicts"] == {
        "t1": {"reward.score": "solved"},
        "t2": {"reward.score": "flaky"},
        "t3": {"reward.score": "solved"},
        "t4": {"reward.score": "unmeasured"},
        "t5": {"reward.score": "unmeasured"},
    }


def test_the_oracle_gives_section_4s_overflow_example() -> None:
    events = [builders.score("t", "a", "m", {"x": 0}), builders.score("t", "b", "m", {"x": 1e155}), builders.closed()]
    [record] = oracle.replayed(log_of(events))
    [aggregate] = record["summary"]["scores"]
    assert (aggregate["sum"], aggregate["mean"]) == (1e155, 5e154)
    stats = ("variance", "std_dev", "sample_variance", "sample_std_dev")
    assert [aggregate[stat] for stat in stats] == ["Infinity"] * 4


def test_the_oracle_gives_the_example_logs_expected_summaries() -> None:
    latest = {record["run_id"]: record for record in oracle.replayed(lines_of(EXAMPLE_LOG.read_bytes()))}
    expected = [orjson.loads(line) for line in EXPECTED.read_bytes().splitlines()]
    assert sorted(latest) == sorted(record["run_id"] for record in expected)
    for record in expected:
        mine = {field: latest[record["run_id"]][field] for field in record}
        assert_spec(mine, record, f"{record['run_id']}: ")


# --- the fold against the oracle ----------------------------------------------------------


def test_every_revision_of_the_example_log_is_the_oracles() -> None:
    lines = lines_of(EXAMPLE_LOG.read_bytes())
    assert_agree(folded(lines), list(oracle.replayed(lines)))


@given(mixed_logs(late=True, shared_trials=True))
def test_every_output_of_a_random_log_is_the_oracles(log: bytes) -> None:
    """Interleaved runs, redeliveries, lines that are no event, run.started anywhere (events
    before it, tasks it does not declare), late events after the close (revisions), dead
    trials, failed metrics, every `harbor_rules`, values over the whole double range. With a
    progress event after each applied event (section 7: live pass@k and statistics are the
    summary's for the events so far; verdict counts with `pending` while the run is open)."""
    lines = lines_of(log)
    assert_agree(folded(lines, with_progress=True), list(oracle.replayed(lines, with_progress=True)))


@given(st.one_of(graded_runs(), graded_runs(binary=True)))
def test_every_summary_of_a_run_of_many_attempts_is_the_oracles(events: list[InputEvent]) -> None:
    """Up to 12 tasks of up to 8 attempts: pass@k, pass^k and Harbor's pass@k at large k."""
    lines = log_of(events)
    assert_agree(folded(lines), list(oracle.replayed(lines)))


@given(st.one_of(viewed_runs(), viewed_runs(output_values=cancelling_values)))
def test_every_summary_of_a_run_of_views_is_the_oracles(events: list[InputEvent]) -> None:
    """Views whose signals are all there, over the whole double range, scores in any order."""
    lines = log_of(events)
    assert_agree(folded(lines), list(oracle.replayed(lines)))


def test_view_values_add_up_in_the_order_of_their_trials_first_scores() -> None:
    """Section 4 adds view values "in summary task order"; within a task, trials come as
    their first scores did: c, b, a here, whose sum overflows where a, b, c's would not."""
    view = {"name": "v", "reducer": "single", "signals": [{"metric": "reward", "output": "score"}]}
    events = [
        builders.started(tasks=[builders.task_spec("t", {"reward.score": "continuous"}, [view])]),
        *(
            builders.score("t", trial, "reward", {"score": value})
            for trial, value in [("c", 1e308), ("b", 1e308), ("a", -1e308)]
        ),
        builders.score("t", "a", "reward", {"score": -1e308}),
        builders.closed(),
    ]
    lines = log_of(events)
    expected = list(oracle.replayed(lines))
    assert [a["sum"] for a in expected[0]["summary"]["scores"] if a["name"] == "view.v"] == ["Infinity"]
    assert_agree(folded(lines), expected)


def test_a_log_of_big_runs_is_the_oracles() -> None:
    """Three interleaved runs of 60 tasks of 5 trials (`events.synthetic`), and runs of 1,001
    and 1,002 one-attempt tasks: section 8's last tabled quantile (1,000 degrees of freedom)
    and the normal one above it."""
    sources = [synthetic_run(f"run-{i}", tasks=60, attempts=5, seed=i) for i in range(3)]
    lines = [orjson.dumps(event) for event in interleave(sources, 3)]
    for tasks in (1001, 1002):
        lines += log_of(builders.scored_run(f"wide-{tasks}", {f"t{i}": [float(i % 3 > 0)] for i in range(tasks)}))
    expected = list(oracle.replayed(lines))
    assert [s["statistics"]["reward.score"]["pass_at_k"][0]["count"] for s in expected[-2:]] == [1001, 1002]
    assert_agree(folded(lines), expected)


# --- the compiled build against the oracle -----------------------------------------------


@pytest.fixture(scope="module")
def compiled_build() -> None:
    probe = subprocess.run(
        [sys.executable, "-c", "import projections; print(projections.BUILD)"],
        cwd=ROOT, env=compiled_environment(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert probe.stdout.strip() == "compiled", NOT_BUILT


def test_evalstream_replay_writes_the_oracles_outputs_for_the_example_log(compiled_build: None) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "worker.commands.cli", "replay", "--progress", str(EXAMPLE_LOG)],
        cwd=ROOT, env=compiled_environment(), capture_output=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    expected = list(oracle.replayed(lines_of(EXAMPLE_LOG.read_bytes()), with_progress=True))
    assert_agree([orjson.loads(line) for line in done.stdout.splitlines()], expected)


@settings(max_examples=10)
@given(mixed_logs(runs=8, late=True, shared_trials=True))
def test_evalstream_replay_writes_the_oracles_outputs(
    compiled_build: None, tmp_path_factory: pytest.TempPathFactory, log: bytes
) -> None:
    """`evalstream replay --progress` as a user runs it: the compiled build, a file of up to
    8 runs."""
    path = tmp_path_factory.mktemp("oracle") / "log.jsonl"
    path.write_bytes(log)
    done = subprocess.run(
        [sys.executable, "-m", "worker.commands.cli", "replay", "--progress", str(path)],
        cwd=ROOT, env=compiled_environment(), capture_output=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert b"older than its sources" not in done.stderr
    expected = list(oracle.replayed(lines_of(log), with_progress=True))
    assert_agree([orjson.loads(line) for line in done.stdout.splitlines()], expected)
