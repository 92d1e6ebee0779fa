"""The local broker recipe, for real: Kafka jars from Maven Central, a KRaft node run by java.

Slow on a fresh machine (Maven resolves ~45 MB of jars once, cached after), so it is
marked `kafka`; `.ci/run` runs it like every other test, it never skips.
"""

from __future__ import annotations

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
