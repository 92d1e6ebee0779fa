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


def test_summaries_and_progress_carry_section_8_statistics_in_their_schema(tmp_path: Path) -> None:
    write_schemas(tmp_path)
    for event_type in ("run.summary", "run.progress"):
        schema = json.loads((tmp_path / f"{event_type}.schema.json").read_text())
        assert "statistics" in schema["required"]
        shapes = schema["$defs"]
        assert shapes["KeyStatistics"]["required"] == ["tasks", "pass_at_k", "pass_hat_k"]
        interval = shapes["Interval"]
        assert interval["required"] == ["k", "count", "nan_count", "mean", "stderr", "ci95_low", "ci95_high"]
        assert interval["additionalProperties"] is False


def test_run_started_may_name_its_harbor_rules_in_its_schema(tmp_path: Path) -> None:
    write_schemas(tmp_path)
    schema = json.loads((tmp_path / "run.started.schema.json").read_text())
    rules = schema["properties"]["harbor_rules"]
    assert "harbor_rules" not in schema["required"]
    assert {"enum": ["0.26", "0.25"], "type": "string"} in rules["anyOf"]
