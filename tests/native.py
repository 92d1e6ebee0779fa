"""`events/native`'s module for the tests that hold it to its Python references."""

from __future__ import annotations

from types import ModuleType

import pytest

from events.compiled import NATIVE, PURE_SETTING


def native() -> ModuleType:
    """The built module; fails the test where it is not built or `EVALSTREAM_PURE=1` left it out."""
    if NATIVE is None:
        pytest.fail(
            f"events/native is not built, or {PURE_SETTING}=1 is set: run `make install` (it needs Rust's cargo)"
            " and run the tests without that setting"
        )
    return NATIVE
