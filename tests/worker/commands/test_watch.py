"""`evalstream watch`'s view of a progress event, drawn as a terminal of a given width shows it."""

from __future__ import annotations

import io
from typing import Any

import orjson
import pytest
from rich.console import Console

from events.codec import encode
from events.models import InputEvent
from projections.replayer import Replayer
from tests.builders import closed, score, started, task_spec
from worker.commands.watch import render

HEADERS = ("pass@1", "pass@2", "solved", "flaky", "failed", "unmeas.", "pending")
LONG_KEY = "judge.criteria_pass_rate_of_the_whole_rubric"


def last_progress() -> dict[str, Any]:
    """The closing run.progress of a run with a long key and a short one, two attempts a task."""
    metric, output = LONG_KEY.split(".")
    tasks = [task_spec(task_id, {"reward.score": "continuous", LONG_KEY: "continuous"}) for task_id in "abc"]
    events: list[InputEvent] = [started("watched", tasks)]
    for task_id, values in {"a": [1, 0], "b": [1, 1], "c": [0, 1]}.items():
        for number, value in enumerate(values):
            events.append(score(task_id, f"{task_id}-{number}", "reward", {"score": value}, run_id="watched"))
            events.append(score(task_id, f"{task_id}-{number}", metric, {output: 1 - value}, run_id="watched"))
    events.append(closed("watched"))
    replayer = Replayer(progress_every=1)
    printed = [out for n, event in enumerate(events, 1) for _, _, out in replayer.feed(n, encode(event))]
    records: list[dict[str, Any]] = [orjson.loads(line) for line in printed]
    return [record for record in records if record["type"] == "run.progress"][-1]


def drawn(record: dict[str, Any], width: int) -> str:
    screen = io.StringIO()
    Console(file=screen, width=width, color_system=None).print(render(record))
    return screen.getvalue()


@pytest.mark.parametrize("width", [80, 100, 200])
def test_every_header_and_figure_is_shown_whole(width: int) -> None:
    record = last_progress()
    shown = drawn(record, width)
    assert "…" not in shown
    header = next(line for line in shown.splitlines() if "pass@1" in line and "key" in line)
    assert header.split()[1:] == list(HEADERS)
    assert max(len(line) for line in shown.splitlines()) <= width
    for key, by_k in record["pass_at_k"].items():
        assert f"{by_k['1']['mean']:.3f}" in shown, key
    assert LONG_KEY in "".join(line.split(" ", 1)[0] for line in shown.splitlines())  # wrapped, not cut
