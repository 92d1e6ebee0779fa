"""JSON Schema of every v1 event type, for producers and subscribers in other languages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from events.models import RunClosed, RunStarted, Score, TrialFinished
from events.outputs import RunProgress, RunSummary

EVENT_MODELS: dict[str, Any] = {
    "run.started": RunStarted,
    "trial.finished": TrialFinished,
    "score.emitted": Score,
    "run.closed": RunClosed,
    "run.summary": RunSummary,
    "run.progress": RunProgress,
}


def schema_of(event_type: str) -> dict[str, Any]:
    schema: dict[str, Any] = TypeAdapter(EVENT_MODELS[event_type]).json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"evalstream/v1/{event_type}.schema.json"
    return schema


def write_schemas(directory: Path) -> list[Path]:
    """Write `<type>.schema.json` for every event type into `directory`; returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for event_type in EVENT_MODELS:
        path = directory / f"{event_type}.schema.json"
        path.write_text(json.dumps(schema_of(event_type), indent=2, sort_keys=True) + "\n")
        paths.append(path)
    return paths
