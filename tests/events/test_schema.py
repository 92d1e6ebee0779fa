from __future__ import annotations

import json
from pathlib import Path

from events.schema import EVENT_MODELS, write_schemas


def test_a_schema_is_written_per_event_type(tmp_path: Path) -> None:
    paths = write_schemas(tmp_path)
    assert sorted(path.name for path in paths) == sorted(f"{name}.schema.json" for name in EVENT_MODELS)
    score = json.loads((tmp_path / "score.emitted.schema.json").read_text())
    shapes = score["$defs"]
    assert {"ScoreMeasured", "ScoreFailed"} <= set(shapes)
    for shape in ("ScoreMeasured", "ScoreFailed"):
        assert shapes[shape]["additionalProperties"] is False
        assert {"event_id", "run_id", "task_id", "trial_id", "metric_type", "status"} <= set(shapes[shape]["required"])
    assert "failure" in shapes["ScoreFailed"]["required"]
