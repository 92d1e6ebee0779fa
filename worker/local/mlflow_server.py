"""A real MLflow tracking server on this machine, for the exporter's tests and benchmark:
`mlflow server` on a free port, its runs in a SQLite file and its artifacts in a folder of
`folder`, served through the server (the client uploads over HTTP, as it would to a remote one)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from worker.local.processes import free_port


@contextmanager
def mlflow_server(folder: Path, *, workers: int = 4, timeout: float = 120.0) -> Iterator[str]:
    """The server's tracking URI while it runs; stopped after the block."""
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    log = folder / "mlflow-server.log"
    command = [
        str(Path(sys.executable).with_name("mlflow")), "server",
        "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
        "--artifacts-destination", str(folder / "artifacts"),
        "--host", "127.0.0.1", "--port", str(port),
        "--workers", str(workers),
    ]  # fmt: skip
    with log.open("wb") as out:
        # A session of its own: `mlflow server` starts uvicorn and its workers as children, stopped together.
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=folder,
            start_new_session=True,
            # Tracking alone: no background job runner (eight processes of its own, unused here).
            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
        )
    try:
        deadline = time.monotonic() + timeout
        while not _healthy(uri):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"mlflow server not up after {timeout:.0f}s; its log:\n{log.read_text()[-3000:]}")
            time.sleep(0.3)
        yield uri
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _healthy(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False
