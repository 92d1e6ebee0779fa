"""The local broker recipe, for real: Kafka jars from Maven Central, a KRaft node run by java.

Slow on a fresh machine (Maven resolves ~45 MB of jars once, cached after), so it is
marked `kafka`; `.ci/run` runs it like every other test, it never skips.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from worker.local import broker
from worker.local.processes import free_port

PRODUCE, FETCH, API_VERSIONS = 0, 1, 18


@pytest.mark.kafka
def test_a_broker_starts_from_nothing_answers_kafka_and_stops(tmp_path: Path) -> None:
    config = broker.BrokerConfig(port=free_port(), controller_port=free_port(), state_dir=tmp_path / "broker")
    pid = broker.start(config, timeout=120)
    try:
        assert broker.status(config).running
        assert broker.start(config) == pid  # a second start finds the running broker
        versions = broker.api_versions(config.port)
        assert {PRODUCE, FETCH, API_VERSIONS} <= versions.keys()
        assert versions[PRODUCE] >= 9  # a Kafka 4 broker: no produce versions older than KIP-896 allows
    finally:
        assert broker.stop(config)
    assert not broker.status(config).running
    assert not config.pid_path.exists()


def test_a_missing_tool_is_named_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    config = broker.BrokerConfig(
        port=free_port(), controller_port=free_port(), state_dir=tmp_path / "b", jars_dir=tmp_path / "j"
    )
    with pytest.raises(broker.BrokerError, match=r"`(java|mvn)` not found on PATH; install it"):
        broker.start(config, timeout=5)


FAKE_MVN = """#!/bin/sh
echo run >> "$MVN_CALLS"
sleep 1
for arg; do case "$arg" in -DoutputDirectory=*) out="${arg#-DoutputDirectory=}";; esac; done
mkdir -p "$out" && touch "$out/kafka_2.13-0.jar"
"""


def test_processes_resolving_the_jars_at_once_resolve_them_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two benches or test sessions starting on a fresh machine: one resolves, the other waits
    for it, instead of both writing (and removing) the same folder."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "mvn").write_text(FAKE_MVN)
    (tmp_path / "bin" / "mvn").chmod(0o755)
    calls = tmp_path / "calls"
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "MVN_CALLS": str(calls)}
    resolve = (
        "import sys; from pathlib import Path; from worker.local import broker; "
        "config = broker.BrokerConfig(port=1, controller_port=2, state_dir=Path('.'), jars_dir=Path(sys.argv[1])); "
        "print(broker.ensure_jars(config))"
    )
    jars = tmp_path / "jars"
    both = [
        subprocess.Popen([sys.executable, "-c", resolve, str(jars)], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=60)[0].strip() for process in both]
    assert [process.returncode for process in both] == [0, 0]
    assert outputs == [str(jars / "lib")] * 2
    assert (jars / "lib" / "kafka_2.13-0.jar").is_file()
    assert calls.read_text().splitlines() == ["run"]


def broker_command(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`evalstream broker ARGS` as a user runs it, its state under `state`."""
    return subprocess.run(
        [sys.executable, "-m", "worker.commands.cli", "broker", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, "EVALSTREAM_BROKER_DIR": str(state)},
    )


@pytest.mark.kafka
def test_each_port_has_its_own_broker_and_a_command_touches_only_its_ports(tmp_path: Path) -> None:
    first, second = free_port(), free_port()
    try:
        for port in (first, second):
            started = broker_command(tmp_path, "start", "--port", str(port), "--controller-port", str(free_port()))
            assert started.returncode == 0, started.stderr
        pids = {port: broker.status(local_config(tmp_path, port)).pid for port in (first, second)}
        assert None not in pids.values()
        assert len(set(pids.values())) == 2
        stopped = broker_command(tmp_path, "stop", "--port", str(second))
        assert (stopped.returncode, stopped.stdout) == (0, "kafka broker stopped\n")
        assert broker_command(tmp_path, "status", "--port", str(second)).returncode == 3
        status = broker_command(tmp_path, "status", "--port", str(first))
        assert status.returncode == 0, status.stdout
        assert f"kafka broker running: pid {pids[first]} at 127.0.0.1:{first}" in status.stdout
        assert broker.api_versions(first)  # still answering
    finally:
        for port in (first, second):
            broker_command(tmp_path, "stop", "--port", str(port))


def local_config(state: Path, port: int) -> broker.BrokerConfig:
    """The config `evalstream broker --port PORT` uses with EVALSTREAM_BROKER_DIR=`state`."""
    return broker.BrokerConfig(port, port + 1, state / str(port))


def test_a_broker_that_does_not_answer_is_never_killed(tmp_path: Path) -> None:
    """What a command sees of a broker in another network namespace (or hung): its pid file,
    a live process whose command line names its server.properties, and no answer on its
    port. stop, start and status say so and leave it running."""
    port = free_port()
    config = local_config(tmp_path, port)
    config.state_dir.mkdir(parents=True)
    config.properties_path.write_text(f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{port + 1}\n")
    pretender = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", "kafka.Kafka", str(config.properties_path)]
    )
    try:
        config.pid_path.write_text(f"{pretender.pid}\n")
        stopped = broker_command(tmp_path, "stop", "--port", str(port))
        assert stopped.returncode == 1
        assert f"(pid {pretender.pid}) runs but does not answer at 127.0.0.1:{port}" in stopped.stderr
        assert "It is left running" in stopped.stderr
        started = broker_command(tmp_path, "start", "--port", str(port), "--timeout", "1")
        assert started.returncode == 1
        assert "does not answer" in started.stderr
        status = broker_command(tmp_path, "status", "--port", str(port))
        assert (status.returncode, status.stdout.splitlines()[0]) == (
            3,
            f"kafka broker unresponsive: pid {pretender.pid} at 127.0.0.1:{port}",
        )
        assert pretender.poll() is None  # never signalled
        other = broker_command(tmp_path, "stop", "--port", str(free_port()))
        assert (other.returncode, other.stdout) == (0, "kafka broker was not running\n")
    finally:
        pretender.kill()
        pretender.wait()


def test_a_recorded_pid_that_is_another_program_is_not_the_broker(tmp_path: Path) -> None:
    """A pid file left behind, its pid now another program's (or another port's broker):
    no broker runs for this port, and nothing is signalled."""
    port = free_port()
    config = local_config(tmp_path, port)
    config.state_dir.mkdir(parents=True)
    other = local_config(tmp_path, free_port())
    stranger = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", "kafka.Kafka", str(other.properties_path)]
    )
    try:
        config.pid_path.write_text(f"{stranger.pid}\n")
        status = broker_command(tmp_path, "status", "--port", str(port))
        assert (status.returncode, status.stdout.splitlines()[0]) == (
            3,
            f"kafka broker stopped: pid - at 127.0.0.1:{port}",
        )
        assert broker_command(tmp_path, "stop", "--port", str(port)).stdout == "kafka broker was not running\n"
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()
