"""The Grafana dashboard (deploy/grafana): the JSON provisioned is what the builder makes, and
every panel's query returns data from a real Prometheus (Debian's, `.ci/prometheus`) scraping
a running worker that folds an open run."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from events.clients.recorder import AsyncRunRecorder
from tests.builders import task_spec
from worker.local.processes import WorkerProcess, free_port, topic_flags

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "deploy" / "grafana"


def builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("grafana_dashboard", GRAFANA / "dashboard.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def panel_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query of every panel, as Grafana would send it for all runs."""
    dashboard = json.loads((GRAFANA / "dashboards" / "evalstream.json").read_text())
    return [
        (panel["title"], target["expr"].replace("$run", ".*").replace("$__rate_interval", "1m"))
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]


def test_the_provisioned_json_is_the_builders_output() -> None:
    assert builder().dashboard_json() == (GRAFANA / "dashboards" / "evalstream.json").read_text(), (
        "run: python deploy/grafana/dashboard.py > deploy/grafana/dashboards/evalstream.json"
    )
    assert len(panel_queries()) >= 8


async def open_run(run_id: str) -> list[bytes]:
    """An open run's events as a harness sends them (stamped as sent, so that it has an ETA): 4
    tasks x 3 attempts declared, 6 trials done, one of them dead."""
    sent: list[bytes] = []

    async def keep(_key: bytes, value: bytes) -> None:
        sent.append(value)

    async with AsyncRunRecorder(run_id, send=keep) as run:
        tasks = [task_spec(f"t{i}", {"reward.score": "continuous"}) for i in range(4)]
        await run.started(tasks=tasks, attempts_per_task=3, labels={"benchmark": "grafana"})
        for number, (task, value) in enumerate([("t0", 1), ("t1", 0), ("t2", 1), ("t3", 1), ("t0", 1)]):
            await asyncio.sleep(0.05)
            await run.trial_finished(task, f"{task}-{number}")
            await run.score(task, f"{task}-{number}", "reward", {"score": value})
        await run.trial_died("t1", "t1-9", metrics=["reward"], error_type="SandboxTimeout")
    return sent


def prometheus_binary() -> str:
    found = os.environ.get("EVALSTREAM_PROMETHEUS") or shutil.which("prometheus")
    assert found, "no prometheus: run `bash .ci/prometheus` (Debian's package), or set EVALSTREAM_PROMETHEUS"
    return found


def api(port: int, path: str, **params: str) -> Any:
    url = f"http://127.0.0.1:{port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=10) as answer:
        body = json.loads(answer.read())
    assert body["status"] == "success", body
    return body["data"]


@pytest.mark.kafka
def test_every_panel_query_returns_data_from_prometheus_scraping_a_worker(
    worker: WorkerProcess, tmp_path: Path
) -> None:
    settings = worker.settings
    worker.wait_serving()
    log = tmp_path / "open.jsonl"
    log.write_bytes(b"".join(value + b"\n" for value in asyncio.run(open_run("grafana-open"))))
    publish = [sys.executable, "-m", "worker.commands.cli", "publish", str(log), *topic_flags(settings)]
    subprocess.run(publish, check=True, capture_output=True, timeout=120)
    deadline = time.monotonic() + 60
    while 'evalstream_run_eta_seconds{run="grafana-open"}' not in worker.scrape():
        assert time.monotonic() < deadline, "the worker's /metrics never showed the open run"
        time.sleep(0.5)

    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: evalstream\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{settings.web_port}']\n"
    )
    command = [
        prometheus_binary(), f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]  # fmt: skip
    with (tmp_path / "prometheus.log").open("wb") as out:
        prometheus = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        queries = panel_queries()
        empty = queries
        deadline = time.monotonic() + 90
        while empty:
            assert prometheus.poll() is None, (tmp_path / "prometheus.log").read_text()[-3000:]
            assert time.monotonic() < deadline, f"panels with no data: {empty}"
            time.sleep(1)
            try:
                empty = [(title, expr) for title, expr in queries if not api(port, "query", query=expr)["result"]]
            except OSError:
                continue  # not listening yet
        # The run selector's values (Grafana's label_values() is the series API).
        series = api(port, "series", **{"match[]": "evalstream_run_trials_finished"})
        assert "grafana-open" in {entry["run"] for entry in series}
        (ratio,) = api(port, "query", query='evalstream_run_progress_ratio{run="grafana-open"}')["result"]
        assert float(ratio["value"][1]) == pytest.approx(6 / 12)
    finally:
        prometheus.terminate()
        prometheus.wait(timeout=30)
