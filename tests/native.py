"""The modules compiled from Rust, for the tests that hold them to their Python twins:
`events/native`'s (the recogniser) and `projections/native`'s (the fold's kernels)."""

from __future__ import annotations

from types import ModuleType

import pytest

from events.builds import PURE_SETTING
from events.compiled import NATIVE
from projections import KERNEL_CRATE
from projections.kernels import KERNELS


def _built(module: ModuleType | None, crate: str) -> ModuleType:
    if module is None:
        pytest.fail(
            f"{crate} is not built, or {PURE_SETTING}=1 is set: run `make install` (it needs Rust's cargo)"
            " and run the tests without that setting"
        )
    return module


def native() -> ModuleType:
    """The recogniser's module; fails the test where it is not built or `EVALSTREAM_PURE=1` left it out."""
    return _built(NATIVE, "events/native")


def kernels() -> ModuleType:
    """The fold's kernels' module (`projections._kernels`), as `native` does."""
    return _built(KERNELS, f"{KERNEL_CRATE.package}/native")
