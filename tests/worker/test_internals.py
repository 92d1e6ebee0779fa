"""The faust and aiokafka private attributes the worker uses are all there."""

from __future__ import annotations

import pytest

from worker.runtime import internals


def test_every_private_attribute_the_worker_uses_exists_in_the_installed_faust() -> None:
    assert internals.missing() == []


def test_a_missing_attribute_is_named_with_what_it_is_for(monkeypatch: pytest.MonkeyPatch) -> None:
    class Owner:
        def __init__(self) -> None:
            self._present = 1

    required = ((Owner, "_present", "set in __init__"), (Owner, "_gone", "the thing the worker needs"))
    monkeypatch.setattr(internals, "REQUIRED", required)
    [sentence] = internals.missing()
    assert "Owner._gone (the thing the worker needs) is gone" in sentence
