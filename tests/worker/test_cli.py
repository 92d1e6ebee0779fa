"""Commands as a user runs them, where no broker is needed to see the answer."""

from __future__ import annotations

import subprocess
import sys

import pytest

from worker.local.processes import free_port


@pytest.mark.parametrize("command", [["worker"], ["publish", "-"], ["simulate"], ["summaries"], ["gate", "a", "b"]])
def test_an_unreachable_broker_is_named_with_what_to_do_and_no_traceback(command: list[str]) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    done = subprocess.run(
        [sys.executable, "-m", "worker.commands.cli", *command, "--bootstrap", address],
        input=b"",
        capture_output=True,
        timeout=120,
        check=False,
    )
    stderr = done.stderr.decode()
    assert done.returncode == 1, stderr
    assert f"cannot reach a Kafka broker at {address}" in stderr
    assert "evalstream broker start" in stderr
    assert "Traceback" not in stderr
