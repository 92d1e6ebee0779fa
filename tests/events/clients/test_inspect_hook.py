"""The Inspect hook without a broker: a sample it could send only in part is reported."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest

from events.clients.inspect_hook import EvalstreamHook, _Run
from events.importers import inspect_events
from events.models import InputEvent
from tests.events.importers.test_import_inspect import SPEC, sample


class Recorder:
    """Sends `taken` events, then fails as a broker gone away does."""

    def __init__(self, taken: int) -> None:
        self.run_id = inspect_events.run_id(SPEC)
        self.taken = taken
        self.sent: list[InputEvent] = []

    async def send(self, event: InputEvent) -> None:
        if len(self.sent) == self.taken:
            raise ConnectionError("the broker went away")
        self.sent.append(event)


def sample_ended(one: dict[str, Any]) -> Any:
    return SimpleNamespace(eval_id="E1", sample=SimpleNamespace(model_dump_json=lambda include: json.dumps(one)))


@pytest.mark.parametrize("taken", [0, 1, 4])
def test_a_sample_sent_in_part_is_named_with_how_many_of_its_events_went_out(
    taken: int, caplog: pytest.LogCaptureFixture
) -> None:
    one = sample(scores={"match": {"value": "C"}, "judge": {"value": {"grade": 1.0}}})
    events = list(inspect_events.sample_events(SPEC, one))
    assert len(events) == 5  # the trial and a score per scorer
    hook = EvalstreamHook()
    recorder = Recorder(taken)
    hook._runs["E1"] = _Run(SPEC, recorder, "evalstream.events at 127.0.0.1:9092")  # type: ignore[arg-type]

    asyncio.run(hook.on_sample_end(sample_ended(one)))

    assert recorder.sent == events[:taken]
    [record] = caplog.records
    assert record.levelname == "WARNING"
    assert record.getMessage().startswith(
        f"evalstream: run {recorder.run_id}: {taken} of the 5 events of sample 'a' epoch 1 were published"
    )
    assert "the broker went away" in record.getMessage()
