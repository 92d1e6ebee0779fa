"""The faust and aiokafka private attributes the worker uses are all there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from aiokafka.client import AIOKafkaClient

from worker.runtime import internals

ROOT = Path(__file__).parents[3]


def test_every_private_attribute_the_worker_uses_exists_in_the_installed_faust_and_aiokafka() -> None:
    assert internals.missing() == []


def test_a_missing_attribute_is_named_with_what_it_is_for(monkeypatch: pytest.MonkeyPatch) -> None:
    class Owner:
        def __init__(self) -> None:
            self._present = 1

    required = ((Owner, "_present", "set in __init__"), (Owner, "_gone", "the thing the worker needs"))
    monkeypatch.setattr(internals, "REQUIRED", required)
    [sentence] = internals.missing()
    assert "Owner._gone (the thing the worker needs) is gone" in sentence


def test_an_aiokafka_client_that_no_longer_sets_its_settings_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    def renamed(self: AIOKafkaClient, **settings: object) -> None:
        self.settings = settings

    monkeypatch.setattr(AIOKafkaClient, "__init__", renamed)
    absent = internals.missing()
    assert len(absent) == 7
    assert "aiokafka.client.AIOKafkaClient._sasl_plain_password" in absent[-1]
    assert "the installed version is not aiokafka 0.14" in absent[-1]


def test_every_private_aiokafka_name_the_clients_read_is_checked() -> None:
    """The private names read off aiokafka objects in the worker and the clients (named
    `client`, `consumer` or `admin` there) are all in `REQUIRED`."""
    read = set()
    for path in [*(ROOT / "worker").rglob("*.py"), *(ROOT / "events/clients").rglob("*.py")]:
        read |= set(re.findall(r"\b(?:client|consumer|admin)\.(_[a-z]\w*)", path.read_text()))
    assert read, "the pattern finds nothing: the test no longer looks at the code"
    assert read <= {name for _, name, _ in internals.REQUIRED}
