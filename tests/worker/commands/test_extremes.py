"""A log of the extremes of a double, end to end: `evalstream replay` exits 0 and
summarises every run, with the same bytes as the worker's processor (SEMANTICS.md 4,
"Overflow": no input EVENTS.md accepts may make a fold fail)."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import orjson

from events.codec import decode_output, encode
from events.models import InputEvent
from tests import builders
from tests.worker.commands.test_replay import run_replay
from worker.runtime.processor import Processor, Record

LARGEST = sys.float_info.max
VALUES: tuple[object, ...] = (
    0,
    1,
    0.5,
    -0.0,
    5e-324,
    -5e-324,
    1e155,
    -1e155,
    1e308,
    -1e308,
    LARGEST,
    -LARGEST,
    "Infinity",
    "-Infinity",
    "NaN",
)


def extreme_run(run_id: str, values: tuple[object, ...]) -> list[InputEvent]:
    """A run scoring `values` in order on one task, through a metric output, a weighted view
    with extreme weights and pass@k; one more score after the close (a second revision)."""
    view = {
        "name": "weighted",
        "reducer": "weighted",
        "signals": [
            {"metric": "reward", "output": "score", "weight": 1e308},
            {"metric": "reward", "output": "other", "weight": LARGEST},
        ],
    }
    spec = builders.task_spec("t", {"reward.score": "continuous", "reward.other": "continuous"}, [view])
    log: list[InputEvent] = [builders.started(run_id, [spec, builders.task_spec("u")])]
    for number, value in enumerate(values):
        log.append(builders.trial("t", f"t-{number}", run_id=run_id))
        outputs = {"score": value, "other": values[-1 - number]}
        log.append(builders.score("t", f"t-{number}", "reward", outputs, run_id=run_id))
    log.append(builders.score("u", "u-0", "reward", {"score": values[0]}, run_id=run_id))
    log.append(builders.closed(run_id))
    return [*log, builders.score("u", "u-1", "reward", {"score": values[-1]}, run_id=run_id)]


def extreme_log() -> list[InputEvent]:
    pairs = itertools.combinations_with_replacement(VALUES, 2)
    runs = [extreme_run(f"pair-{index}", pair) for index, pair in enumerate(pairs)]
    runs.append(extreme_run("all", VALUES))
    return [event for run in runs for event in run]


def test_replay_of_the_extremes_summarises_every_run_as_the_worker_does(tmp_path: Path) -> None:
    log = extreme_log()
    path = tmp_path / "extremes.jsonl"
    path.write_bytes(b"".join(encode(event) + b"\n" for event in log))
    done = run_replay(str(path))
    assert done.returncode == 0, done.stderr
    [last] = done.stderr.decode().splitlines()  # no line was refused or failed
    assert "0 skipped" in last
    printed = done.stdout.splitlines()
    runs = {event.run_id for event in log}
    summaries = [decode_output(line) for line in printed]  # each validates as a run.summary
    assert {summary.run_id for summary in summaries} == runs
    assert len(printed) == 2 * len(runs)  # the close and the late score, for every run
    worker = Processor().handle(0, [Record(n, e.run_id.encode(), encode(e)) for n, e in enumerate(log)], 0.0)
    assert [item.value for item in worker if item.stream == "summary"] == printed


def test_reward_stats_spell_every_extreme_as_harbor_does(tmp_path: Path) -> None:
    """SEMANTICS.md section 6: each value a key as Python's repr writes it, the non-finite ones
    "inf", "-inf" and "nan" (not the wire's spelling), in the order the scores came."""
    log = extreme_run("all", VALUES)
    path = tmp_path / "all.jsonl"
    path.write_bytes(b"".join(encode(event) + b"\n" for event in log))
    done = run_replay(str(path))
    assert done.returncode == 0, done.stderr
    last = orjson.loads(done.stdout.splitlines()[-1])
    labels = list(last["harbor"]["reward_stats"]["reward.score"])
    assert labels == [repr(float(value)) for value in VALUES]  # type: ignore[arg-type]  # float("NaN") is nan
    assert labels[-3:] == ["inf", "-inf", "nan"]
