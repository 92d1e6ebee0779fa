"""The pure fold: input events in, run state, summaries and progress out. No I/O, no clock.

What the worker and `evalstream replay` call: `step` (one message decoded, checked and
applied, and the summary revision it makes due), `replayer` (what each line of a log makes
replay write), `footprint` (what a run costs in memory), `closed_caches` (the closed runs'
caches replay keeps within a budget) and `storage` (the stored form: a run as bytes, in
parts). Below them, one package for each thing the fold computes:
- `fold`: a run's state and `apply`, the one way it changes;
- `packed`: how a task's data is packed, the same bytes in memory and in the store;
- `figures`: the figures of SEMANTICS.md from numbers (aggregates, pass@k and pass^k,
  statistics, verdicts, Harbor's pass@k, the views' reducers);
- `assembly`: `run.summary` and `run.progress` assembled from a run's state;
- `analysis`: across runs (compare, history, retry, the gates), off the fold's path.
Which package may import which is stated in pyproject.toml (import-linter).

The fold has two builds of one source. The package's build (`setup.py`) compiles the modules
here with mypyc, all but `NOT_COMPILED`: the extension modules, one shared library they link
to, and `compiled.digest`, the digest of the sources they were compiled from; beside the
sources for the editable install (`make install`), or into the wheel. The Python source is
the reference the compiled build is tested against (`tests/projections/test_compiled.py`).

This file only picks the build, before any module of the fold is imported: the compiled one
when it exists and was compiled from the sources as they are; the Python source when
`EVALSTREAM_PURE=1`, when nothing was compiled, or when a source changed since (then with a
warning, because a compiled module would run code that is no longer in its file). The choice
is all or nothing: compiled modules call each other directly, so one module loaded from its
source beside compiled ones would not be used by them. `BUILD` says which was picked.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec
from importlib.util import spec_from_file_location
from pathlib import Path
from types import ModuleType
from typing import Final, Literal

from events.builds import PURE_SETTING, crates, digest_of

_HERE = Path(__file__).resolve().parent
DIGEST = _HERE / "compiled.digest"


NOT_COMPILED = frozenset(
    {
        "analysis/compare.py",
        "analysis/history.py",
        "analysis/retry.py",
        "analysis/gate/live.py",
        "analysis/gate/power.py",
        "analysis/gate/sequence.py",
    }
)
"""Modules that run as Python in both builds (paths below this package), besides every
`__init__.py`: those whose records the commands serialize with orjson (gate, history, the
dashboard, retry). orjson reads a dataclass's fields where a Python object keeps them, and a
compiled class keeps its float, int and bool fields unboxed: orjson would crash reading
them. None of them is on the fold's path."""


KERNEL_CRATE: Final = crates(_HERE.parent)[f"{__name__}._kernels"]
"""The fold's kernels compiled from Rust (`projections/native`, `fold-kernels`), which
`projections.kernels` alone loads: an extension module here that is part of neither build."""


def compiled_sources() -> list[Path]:
    """The modules the compiled build holds, in the order their digest reads them."""
    return sorted(
        path
        for path in _HERE.rglob("*.py")
        if path.name != "__init__.py" and path.relative_to(_HERE).as_posix() not in NOT_COMPILED
    )


def compiled_modules() -> list[Path]:
    """The extension modules mypyc compiled here for this interpreter, if any (the
    kernels' module aside)."""
    kernels = KERNEL_CRATE.built_modules()
    return sorted(path for path in _HERE.rglob(f"*{EXTENSION_SUFFIXES[0]}") if path not in kernels)


def source_digest() -> str:
    return digest_of(compiled_sources(), _HERE)


class _SourcesOnly(MetaPathFinder):
    """Finds the fold's modules as their `.py` files, ahead of the compiled ones; a compiled
    module whose source is gone (moved or removed since) is no module."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        root, _, rest = fullname.partition(".")
        if root != __name__ or not rest or rest == KERNEL_CRATE.module:
            return None
        source = _HERE.joinpath(*rest.split(".")).with_suffix(".py")
        if source.is_file():
            return spec_from_file_location(fullname, source)
        if (source.with_suffix("") / "__init__.py").is_file():
            return None  # a sub-package: its `__init__.py`, never compiled, is found as usual
        raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)


def _pick() -> Literal["compiled", "pure"]:
    built = bool(compiled_modules())
    if built and os.environ.get(PURE_SETTING) != "1":
        if DIGEST.is_file() and DIGEST.read_text().strip() == source_digest():
            return "compiled"
        warnings.warn(
            f"the compiled fold in {_HERE} is older than its sources; running them as Python"
            " (run `make install` to compile them again)",
            stacklevel=2,
        )
    if built:
        sys.meta_path.insert(0, _SourcesOnly())
    return "pure"


BUILD = _pick()
