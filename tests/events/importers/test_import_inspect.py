"""`import inspect`: real Inspect AI logs (tests/fixtures/inspect) against what the log says
when read with plain JSON, and against Inspect's own figures; each mapping rule; errors."""

from __future__ import annotations

import io
import json
import math
import shutil
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import zipfile_zstd  # type: ignore[import-untyped]  # noqa: F401  (the test's own zstd reading, not the importer's)
from hypothesis import given
from hypothesis import strategies as st
from inspect_ai.scorer import value_to_float  # Inspect's own, to check ours against (dev extra)

from events.codec import encode
from events.importers import inspect_events
from events.importers.inspect_log import read
from events.importers.source import ImportOptions, SourceError
from events.models import InputEvent, RunClosed, RunStarted, ScoreFailed, ScoreMeasured, TrialFinished
from projections.assembly.summary import summary
from tests.builders import fold
from worker.commands.replay import replay

FIXTURES = Path(__file__).parents[2] / "fixtures" / "inspect"
LOGS = sorted(FIXTURES.glob("*.eval")) + sorted(FIXTURES.glob("*.json"))
Log = dict[str, Any]


def events_of(path: Path, run_id: str | None = None) -> list[InputEvent]:
    return list(read(path, ImportOptions(run_id=run_id)))


def summary_of(events: list[InputEvent]) -> dict[str, Any]:
    return summary(fold(events, events[0].run_id))


def plain(path: Path) -> Log:
    """The log as Inspect wrote it, read with zipfile (zstd by zipfile_zstd) and json."""
    if path.suffix == ".json":
        log: Log = json.loads(path.read_text())
        return log
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        header: Log = json.loads(archive.read("header.json" if "header.json" in names else "_journal/start.json"))
        header.setdefault("status", "started")
        header["samples"] = [json.loads(archive.read(n)) for n in dict.fromkeys(names) if n.startswith("samples/")]
        if "reductions.json" in names:
            header["reductions"] = json.loads(archive.read("reductions.json"))
        return header


def trial_of(sample: Log) -> str:
    return f"{sample['id']}:epoch{sample['epoch']}"


def test_the_fixtures_cover_both_formats_both_compressions_and_every_status() -> None:
    kinds = {(p.suffix, zipfile.ZipFile(p).infolist()[0].compress_type if p.suffix == ".eval" else None) for p in LOGS}
    assert kinds == {(".eval", zipfile.ZIP_DEFLATED), (".eval", 93), (".json", None)}  # 93: zstd
    assert {plain(p)["status"] for p in LOGS} == {"success", "started", "cancelled", "error"}


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_every_sample_and_epoch_of_the_log_is_one_trial_with_its_scorers(path: Path) -> None:
    log = plain(path)
    events = events_of(path)
    trials = [e for e in events if isinstance(e, TrialFinished)]
    assert sorted((t.task_id, t.trial_id) for t in trials) == sorted(
        (str(s["id"]), trial_of(s)) for s in log["samples"]
    )
    assert {t.trial_id for t in trials if t.status == "failed"} == {
        trial_of(s) for s in log["samples"] if s.get("error")
    }
    scorers = [s["name"] for s in log["eval"]["scorers"]]
    scores = Counter(e.trial_id for e in events if isinstance(e, ScoreMeasured | ScoreFailed))
    assert scores == Counter({trial_of(s): len(scorers) for s in log["samples"]})

    run = summary_of(events)
    assert list(run["summary"]["task_metric_attempts"]) == [str(i) for i in log["eval"]["dataset"]["sample_ids"]]
    assert run["labels"]["task"] == log["eval"]["task"] == "mixed"
    assert run["labels"]["model"] == log["eval"]["model"]
    assert run["harbor"]["n_errors"] == sum(1 for s in log["samples"] if s.get("error"))
    epochs = Counter(str(s["id"]) for s in log["samples"])
    for task, lists in run["summary"]["task_metric_attempts"].items():
        for key, attempts in lists.items():
            assert len(attempts) <= epochs[task], (task, key)  # never more attempts than epochs logged


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_the_run_is_the_log_closed_as_its_status_says(path: Path) -> None:
    log = plain(path)
    events = events_of(path)
    assert isinstance(events[0], RunStarted)
    assert events[0].run_id == log["eval"]["eval_id"]
    assert events[0].attempts_per_task == log["eval"]["config"]["epochs"] == 3
    closing = {"success": "completed", "cancelled": "cancelled", "error": "failed"}.get(log["status"])
    assert [e.reason for e in events if isinstance(e, RunClosed)] == ([closing] if closing else [])
    if closing:
        assert isinstance(events[-1], RunClosed)


def test_each_sample_and_scorer_reduced_over_epochs_is_what_inspect_reported() -> None:
    """Inspect's reductions.json (each sample's epochs, mean) and results (each scorer's metric
    over samples) equal the mean of the imported attempts that have a value."""
    log = plain(FIXTURES / "mixed.eval")
    attempts = summary_of(events_of(FIXTURES / "mixed.eval"))["summary"]["task_metric_attempts"]

    def measured(task: str, key: str) -> list[float]:
        return [a["value"] for a in attempts[task][key] if a["value"] is not None]

    per_key: dict[str, dict[str, float]] = {}
    for reduction in log["reductions"]:
        scorer = reduction["scorer"]
        for sample in reduction["samples"]:
            task, value = str(sample["sample_id"]), sample["value"]
            if not isinstance(value, dict):  # a scalar, or NaN for every key of a dict scorer
                value = dict.fromkeys([k.split(".", 1)[1] for k in attempts[task] if k.startswith(f"{scorer}.")], value)
            for output, reduced in value.items():
                key = f"{scorer}.{output}"
                if math.isnan(reduced):
                    assert measured(task, key) == [], key
                else:
                    assert math.isclose(sum(measured(task, key)) / len(measured(task, key)), reduced, rel_tol=1e-12)
                    per_key.setdefault(key, {})[task] = reduced
    compared = 0
    for result in log["results"]["scores"]:
        key = f"{result['scorer']}.{'value' if result['name'] == result['scorer'] else result['name']}"
        tasks = [task for task in attempts if measured(task, key)]
        assert sorted(tasks) == sorted(per_key[key]), key
        reported = next(m["value"] for name, m in result["metrics"].items() if name in ("accuracy", "mean"))
        ours = math.fsum(sum(measured(t, key)) / len(measured(t, key)) for t in tasks) / len(tasks)
        assert math.isclose(ours, reported, rel_tol=1e-12), key
        assert result["scored_samples"] == len(tasks), key
        compared += 1
    assert compared == 6  # match, includes, rubric's three keys, fragile


def test_both_formats_of_one_log_give_the_same_events_in_the_order_the_samples_finished() -> None:
    from_eval, from_json = events_of(FIXTURES / "mixed-running.eval"), events_of(FIXTURES / "mixed-running.json")
    assert [encode(e) for e in from_eval] == [encode(e) for e in from_json]
    samples = plain(FIXTURES / "mixed-running.json")["samples"]
    assert [trial_of(s) for s in samples] != [trial_of(s) for s in sorted(samples, key=lambda s: s["completed_at"])]
    finished = [trial_of(s) for s in sorted(samples, key=lambda s: s["completed_at"])]
    assert [e.trial_id for e in from_json if isinstance(e, TrialFinished)] == finished


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_importing_twice_is_a_redelivery(path: Path) -> None:
    lines = [encode(e) for e in events_of(path)]
    assert [encode(e) for e in events_of(path)] == lines
    assert len({e.event_id for e in events_of(path)}) == len(lines)
    once, twice, err = io.BytesIO(), io.BytesIO(), io.StringIO()
    replay(iter(lines), once, io.StringIO())
    stats = replay(iter(lines + lines), twice, err)
    assert twice.getvalue() == once.getvalue()
    assert stats.redeliveries == len(lines)


def test_run_id_overrides_the_run_and_keeps_the_event_ids() -> None:
    path = FIXTURES / "mixed.eval"
    mine, theirs = events_of(path, run_id="my-run"), events_of(path)
    assert {e.run_id for e in mine} == {"my-run"}
    assert [e.event_id for e in mine] == [e.event_id for e in theirs]


def shape(event: InputEvent) -> tuple[object, ...]:
    """What a trial or score says: status, failure, error type, outputs."""
    error = getattr(event, "error", None)
    outputs = [(o.name, o.value) for o in getattr(event, "outputs", [])]
    return (event.status, getattr(event, "failure", None), error.type if error else None, outputs)  # type: ignore[union-attr]


def test_what_each_outcome_of_the_fixture_task_becomes() -> None:
    events = events_of(FIXTURES / "mixed.eval")
    by = {(e.trial_id, e.metric_type): shape(e) for e in events if isinstance(e, ScoreMeasured | ScoreFailed)}
    trials = {e.trial_id: e for e in events if isinstance(e, TrialFinished)}
    scorers = ("match", "includes", "rubric", "fragile")

    # the solver raised: a dead trial, every scorer failed/trial
    assert shape(trials["crashy:epoch2"]) == ("failed", None, "RuntimeError", [])
    assert [by["crashy:epoch2", m] for m in scorers] == [("failed", "trial", "RuntimeError", [])] * 4
    # a scorer raised after three others graded: their scores stand, its own is a metric failure
    assert shape(trials["7:epoch1"]) == ("failed", None, "ConnectionError", [])
    assert [by["7:epoch1", m][0] for m in scorers] == ["completed", "completed", "completed", "failed"]
    assert by["7:epoch1", "fragile"] == ("failed", "metric", "ConnectionError", [])
    # the judge could not grade (NaN, reason grader_failed): a metric failure, not a wrong answer
    assert by["judge-broken:epoch1", "rubric"] == ("failed", "metric", "grader_failed", [])
    # a dict score: one output per key, letters and yes/no as value_to_float reads them; a NaN key left out
    assert by["always:epoch1", "rubric"] == (
        "completed",
        None,
        None,
        [("correct", 1.0), ("length", 0.825), ("polite", 1.0)],
    )
    assert by["never:epoch1", "rubric"] == ("partial", None, None, [("correct", 0.0), ("polite", 1.0)])
    assert by["flaky:epoch2", "match"] == ("completed", None, None, [("value", 0.0)])
    usage = trials["always:epoch1"].usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens) == (12, 6)

    verdicts = summary_of(events)["verdicts"]
    assert verdicts["flaky"]["match.value"] == "flaky"
    assert verdicts["doomed"]["match.value"] == "failed"
    assert verdicts["judge-broken"]["rubric.correct"] == "unmeasured"


def test_a_sample_that_raised_and_was_scored_anyway_keeps_its_scores() -> None:
    events = events_of(FIXTURES / "mixed-cancelled.json")  # --score-on-error
    doomed = [shape(e) for e in events if getattr(e, "trial_id", None) == "doomed:epoch1"]
    assert doomed[0] == ("failed", None, "ValueError", [])
    assert {outcome[:3] for outcome in doomed[1:]} == {("completed", None, None)}
    assert summary_of(events)["harbor"]["n_trials"] == 5  # graded, though it raised


# The rules on small samples, where the fixtures do not reach.

SPEC: Log = {
    "eval_id": "E1",
    "task": "t",
    "model": "m",
    "dataset": {"sample_ids": ["a", 2]},
    "config": {"epochs": 2},
    "scorers": [
        {"name": "match", "metrics": [{"name": "inspect_ai/accuracy", "options": {}}]},
        {"name": "pkg/match", "metrics": [{"name": "inspect_ai/mean", "options": {}}]},
        {"name": "judge", "metrics": {"grade": [{"name": "mean"}], "*": [{"name": "mean"}]}},
        {"name": "mixed", "metrics": [{"name": "mean"}, {"x": [{"name": "mean"}]}]},
    ],
}


def sample(**fields: Any) -> Log:
    return {"id": "a", "epoch": 1, "uuid": "U", **fields}


def scores_of(spec: Log, one: Log) -> dict[str, ScoreMeasured | ScoreFailed]:
    return {
        e.metric_type: e for e in inspect_events.sample_events(spec, one) if isinstance(e, ScoreMeasured | ScoreFailed)
    }


def test_declarations_come_from_the_spec_scorers() -> None:
    started = inspect_events.run_started(SPEC)
    assert isinstance(started, RunStarted)
    assert [t.task_id for t in started.tasks] == ["a", "2"]
    declared = {m.metric_type: [(o.name, o.kind) for o in m.outputs] for m in started.tasks[0].metrics}
    assert declared == {
        "match": [("value", "continuous")],
        "match1": [("value", "continuous")],  # Inspect's unique name for a second "match"
        "judge": [("grade", "continuous")],  # "*" cannot be known before values arrive
        "mixed": [("x", "continuous")],
    }
    assert started.attempts_per_task == 2
    assert started.labels == {"task": "t", "model": "m", "eval_id": "E1"}


def test_without_spec_scorers_the_samples_name_tasks_and_outputs() -> None:
    spec = {"eval_id": "E1", "dataset": {}}
    samples = [sample(scores={"s": {"value": "C"}, "d": {"value": {"k": 1}}}), sample(id=3, scores={"s": {"value": 1}})]
    started = inspect_events.run_started(spec, samples)
    assert isinstance(started, RunStarted)
    assert [t.task_id for t in started.tasks] == ["a", "3"]
    assert [(m.metric_type, [o.name for o in m.outputs]) for m in started.tasks[0].metrics] == [
        ("s", ["value"]),
        ("d", ["k"]),
    ]


def test_a_sample_that_died_before_scoring_is_a_dead_trial_for_every_scorer() -> None:
    died = sample(error={"message": "ValueError('no sandbox')", "traceback": "..."}, scores={})
    events = list(inspect_events.sample_events(SPEC, died))
    assert shape(events[0]) == ("failed", None, "ValueError", [])
    assert [shape(e) for e in events[1:]] == [("failed", "trial", "ValueError", [])] * 4


def test_a_sample_whose_first_scorer_raised_is_a_metric_failure_by_its_events() -> None:
    raised = sample(
        error={"message": "boom", "traceback": "Traceback ...\nmy.pkg.GraderDown: the judge is down"},
        events=[{"event": "span_begin", "type": "scorers", "name": "scorers"}],
    )
    events = list(inspect_events.sample_events(SPEC, raised))
    # the message is no repr: the traceback's last line names the exception
    assert shape(events[0]) == ("failed", None, "GraderDown", [])
    assert [shape(e) for e in events[1:]] == [("failed", "metric", "GraderDown", [])] * 4


@pytest.mark.parametrize(
    ("value", "status", "outputs"),
    [
        ("C", "completed", [("value", 1.0)]),
        (["C", "I", "P"], "completed", [("0", 1.0), ("1", 0.0), ("2", 0.5)]),
        ({"a": "yes", "b": math.nan}, "partial", [("a", 1.0)]),
        ({"a": None, "b": 0.5}, "partial", [("b", 0.5)]),  # old Inspect wrote a key's NaN as null
        ({"a": math.nan}, "failed", []),
        (math.nan, "failed", []),
        (None, "failed", []),
    ],
)
def test_score_values(value: object, status: str, outputs: list[tuple[str, float]]) -> None:
    one = scores_of(SPEC, sample(scores={"judge": {"value": value}}))["judge"]
    assert one.status == status
    assert [(o.name, o.value) for o in getattr(one, "outputs", [])] == outputs
    if isinstance(one, ScoreFailed):
        assert one.failure == "metric"


def test_an_unscored_result_names_its_reason() -> None:
    def reason(score: Log) -> object:
        return shape(scores_of(SPEC, sample(scores={"judge": score}))["judge"])[2]

    assert reason({"value": math.nan, "reason": "grader_failed", "explanation": "GRADE: ?"}) == "grader_failed"
    assert reason({"value": math.nan, "metadata": {"unscored_reason": "refusal"}}) == "refusal"
    assert reason({"value": math.nan}) == "Unscored"


def test_a_scorer_outside_the_spec_is_still_a_metric() -> None:
    assert "extra" in scores_of(SPEC, sample(scores={"extra": {"value": 1}}))


VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.sampled_from(["C", "I", "P", "N", "c", "YES", "no", "True", "false", " 1 ", "1e3", "nan", "inf", "1_0"])
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=4,
)


@given(VALUES)
def test_value_to_float_is_inspects_own(value: object) -> None:
    assert inspect_events.value_to_float(value) == value_to_float()(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("status", ["started", "success", "cancelled", "error"])
def test_the_log_status_is_the_close_reason(status: str) -> None:
    closed = inspect_events.run_closed(SPEC, status)
    assert (closed.reason if isinstance(closed, RunClosed) else None) == inspect_events.CLOSE_REASONS.get(status)


def test_an_unknown_status_or_a_spec_without_eval_id_is_refused() -> None:
    with pytest.raises(SourceError, match="unknown log status 'paused'"):
        inspect_events.run_closed(SPEC, "paused")
    with pytest.raises(SourceError, match="no eval_id"):
        inspect_events.run_started({"dataset": {}})


# The command, as a user runs it.


def run_import(path: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "worker.commands.cli", "import", "inspect", str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def test_the_command_prints_the_event_log() -> None:
    done = run_import(FIXTURES / "mixed.eval")
    assert done.returncode == 0, done.stderr
    assert done.stdout.encode().splitlines() == [encode(e) for e in events_of(FIXTURES / "mixed.eval")]


def broken_member(tmp_path: Path) -> Path:
    """mixed.eval with bytes of its header member's compressed data overwritten."""
    path = tmp_path / "member.eval"
    shutil.copy(FIXTURES / "mixed.eval", path)
    info = zipfile.ZipFile(path).getinfo("header.json")
    data = bytearray(path.read_bytes())
    start = info.header_offset + 30 + len(info.filename) + 20
    data[start : start + 40] = b"\x00" * 40
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda tmp: tmp / "absent.eval", "cannot read it: No such file or directory"),
        (lambda tmp: tmp, "is a directory; give one log file"),
        (lambda tmp: (tmp / "notes.txt").write_text("hello") and tmp / "notes.txt", "is not an Inspect AI eval log"),
        (lambda tmp: (tmp / "x.json").write_text('{"a": 1}') and tmp / "x.json", "without an 'eval' object"),
        (lambda tmp: (tmp / "x.json").write_text('{"eval": {}') and tmp / "x.json", "not valid JSON at line 1"),
        (
            lambda tmp: (tmp / "deep.json").write_text('{"a": ' * 100_000 + "1" + "}" * 100_000) and tmp / "deep.json",
            "nested deeper than a JSON reader follows",
        ),
        (
            lambda tmp: (
                (tmp / "cut.eval").write_bytes((FIXTURES / "mixed.eval").read_bytes()[:5000]) and tmp / "cut.eval"
            ),
            "not a readable zip archive",
        ),
        (broken_member, "member header.json"),
    ],
    ids=[
        "missing",
        "directory",
        "not-a-log",
        "json-not-a-log",
        "bad-json",
        "nested-too-deep",
        "truncated-zip",
        "corrupt-member",
    ],
)
def test_unreadable_logs_are_named_with_what_is_wrong_and_no_traceback(make: Any, says: str, tmp_path: Path) -> None:
    path = make(tmp_path)
    done = run_import(path)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert str(path) in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_a_log_of_an_unexpected_shape_is_refused_with_a_sentence(tmp_path: Path) -> None:
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({"eval": {"eval_id": "E", "scorers": ["match"]}, "samples": [{"id": 1}]}))
    with pytest.raises(SourceError, match=r"odd\.json: not laid out as an Inspect AI eval log"):
        events_of(path)
    path.write_text(json.dumps({"eval": {"eval_id": "E"}, "samples": [{"id": 1, "scores": {}}]}))
    with pytest.raises(SourceError, match=r"odd\.json: a sample has no 'epoch'"):
        events_of(path)
