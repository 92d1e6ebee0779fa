"""The Inspect hook over a real broker: a real Inspect AI eval (mockllm) publishes its
samples as they end, and the worker's summary equals `replay` of `import inspect` of the
log that same eval wrote, byte for byte."""

from __future__ import annotations

import importlib.util
import io
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from events.importers.source import ImportOptions
from worker.commands.importing import import_lines
from worker.commands.replay import replay
from worker.local.processes import WorkerProcess
from worker.local.records import read_topic

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).parents[3]
TASK = ROOT / "tests/fixtures/inspect/tasks/mixed.py"


def entry_points(directory: Path) -> Path:
    """A distribution that declares pyproject.toml's `inspect_ai` entry points, so that Inspect
    finds the hook the way it does once evalstream is installed (the test venv's install of
    evalstream may predate them)."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["inspect_ai"]
    dist = directory / "evalstream_entry_points-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: evalstream-entry-points\nVersion: 0\n")
    (dist / "entry_points.txt").write_text("[inspect_ai]\n" + "".join(f"{k} = {v}\n" for k, v in declared.items()))
    return directory


def test_a_hooked_eval_publishes_the_events_and_summary_of_its_own_log(worker: WorkerProcess, tmp_path: Path) -> None:
    assert importlib.util.find_spec("inspect_ai"), "inspect_ai is not installed here: pip install -e '.[dev]'"
    settings = worker.settings
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(entry_points(tmp_path / "dist"))]),
        "EVALSTREAM_INSPECT_HOOK": "1",
        "EVALSTREAM_BOOTSTRAP": settings.bootstrap,
        "EVALSTREAM_EVENTS_TOPIC": settings.events_topic,
    }
    command = [sys.executable, str(TASK), str(tmp_path / "logs")]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "evalstream" in done.stdout, f"Inspect did not list the hook as enabled:\n{done.stdout}"
    [log] = (tmp_path / "logs").glob("*.eval")

    lines = list(import_lines("inspect", log, ImportOptions()))
    published = read_topic(settings, settings.events_topic, until=len(lines))
    assert [record.value for record in published] == lines

    out = io.BytesIO()
    replay(iter(lines), out, io.StringIO())
    expected = out.getvalue().splitlines()
    summaries = read_topic(settings, settings.summaries_topic, until=len(expected))
    assert [record.value for record in summaries] == expected
