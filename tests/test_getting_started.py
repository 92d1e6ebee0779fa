"""The getting-started page's commands, run as a reader runs them: every `bash` block of
docs/getting-started.md, in order, in one shell, so that a page that stops matching the code
fails here. Three kinds of line stand in for what a test cannot do: `make install` (the test
runs in an installed checkout), and `evalstream broker start` / `stop` (the test session's
broker is the broker; the commands are pointed at it, on topics of their own)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import orjson
import pytest

from worker.local.processes import free_port, isolated_settings

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "getting-started.md"
STANDS_IN = re.compile(r"^(make install|evalstream broker (start|stop))\b")


def blocks(page: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", page, flags=re.DOTALL)


def script(page: str) -> str:
    lines = [line for block in blocks(page) for line in block.splitlines() if not STANDS_IN.match(line)]
    # What a reader started in the background is stopped however the page ends.
    return "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + "\n".join(lines) + "\n"


def test_the_page_has_commands_of_every_part() -> None:
    commands = "\n".join(blocks(PAGE.read_text()))
    for part in ("make install", "evalstream replay", "evalstream worker", "evalstream simulate", "evalstream gate"):
        assert part in commands


def test_every_command_of_the_getting_started_page_runs(bootstrap: str, tmp_path: Path) -> None:
    settings = isolated_settings(bootstrap)
    for name in ("docs", ".venv"):
        (tmp_path / name).symlink_to(ROOT / name)
    env = {
        **os.environ,
        "EVALSTREAM_BOOTSTRAP": bootstrap,
        "EVALSTREAM_APP_ID": settings.app_id,
        "EVALSTREAM_EVENTS_TOPIC": settings.events_topic,
        "EVALSTREAM_PROGRESS_TOPIC": settings.progress_topic,
        "EVALSTREAM_SUMMARIES_TOPIC": settings.summaries_topic,
        "EVALSTREAM_DEADLETTER_TOPIC": settings.deadletter_topic,
        "EVALSTREAM_DATA_DIR": str(tmp_path / "worker-state"),
        "EVALSTREAM_WEB_PORT": str(free_port()),
        "EVALSTREAM_DASHBOARD_PORT": "0",
    }
    done = subprocess.run(
        ["bash", "-c", script(PAGE.read_text())], cwd=tmp_path, env=env, capture_output=True, timeout=600, check=False
    )
    output = done.stdout.decode() + done.stderr.decode()
    logs = "".join(path.read_text() for path in sorted(tmp_path.glob("*.log")))
    assert done.returncode == 0, output[-4000:] + logs[-4000:]
    assert "Traceback" not in output + logs
    summaries = [orjson.loads(line) for line in (tmp_path / "summaries.jsonl").read_bytes().splitlines()]
    assert len({summary["run_id"] for summary in summaries}) == 12, "the example log's 12 runs"
    assert "demo-1" in output
