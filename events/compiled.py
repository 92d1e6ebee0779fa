"""The recogniser compiled from Rust (`events/native`), picked when it was built from the
sources as they are.

`make install` builds it (`.ci/compile_native.py`: the extension module `events/_native*.so`
and `events/native.digest`, the digest of the sources it was built from). `COMPILED`, when
it is current, is the fast path `events.codec.decode` tries first, before
`events.fastpath.recognise` (the Python reference it is tested against) and pydantic's
validator (`tests/events/test_fastpath.py` runs every case on both). It also takes the
valid run.started, which the Python fast path leaves to pydantic: there pydantic's validator
is its reference. `EVALSTREAM_PURE=1` leaves it out, as it leaves the compiled fold out; a
build older than its sources is left out with a warning. The same module holds
`events.codec.decode`'s `Decoder`. `Crate` is how a crate's build is found and judged, here
and for the fold's kernels (`projections/native`, `projections/kernels.py`).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from types import ModuleType
from typing import Final

from events import fastpath
from events.models import (
    EVENT_ID_MAX,
    MOMENT,
    NAME_MAX,
    RUN_ID_MAX,
    ErrorInfo,
    InputEvent,
    MetricSpec,
    Output,
    OutputSpec,
    Record,
    RunClosed,
    RunStarted,
    ScoreFailed,
    ScoreMeasured,
    Signal,
    TaskSpec,
    TrialFinished,
    Usage,
    ViewSpec,
)
from events.nonfinite import NONFINITE_STRINGS
from events.timestamps import epoch_seconds

PURE_SETTING: Final = "EVALSTREAM_PURE"
"""Set to 1: run the Python sources of the compiled parts (this recogniser and the fold)."""

_HERE = Path(__file__).resolve().parent

Recognise = Callable[[bytes | str], InputEvent | None]


def digest_of(sources: list[Path], root: Path) -> str:
    """The SHA-256 of `sources` in the order given, each as its path below `root` and its
    bytes: what a compiled build records of what it was built from (a crate, the fold)."""
    digest = hashlib.sha256()
    for path in sources:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@dataclass(frozen=True)
class Crate:
    """A Rust crate `<package>/native`, built by `make install` (`.ci/compile_native.py`) into
    the extension module `<package>.<module>` and `<package>/native.digest`, the digest of
    the sources it was built from; used only while that matches."""

    directory: Path
    """The Python package's directory, which holds the crate and the module built."""
    package: str
    """The Python package's name (`events`, `projections`)."""
    module: str
    """The extension module's name in it (`_native`, `_kernels`)."""
    what: str
    """What it holds, for the warning when it is older than its sources."""
    shared: tuple[str, ...] = ()
    """Rust files of another crate it compiles too (`#[path]`), below the project's root."""

    @property
    def sources(self) -> Path:
        return self.directory / "native"

    @property
    def digest(self) -> Path:
        return self.directory / "native.digest"

    def source_digest(self) -> str:
        """The digest of the crate's sources: its manifest, lock file and Rust files, and the
        manifest and Rust files of the crates it depends on (`shared`, their folders)."""
        sources, root = self.sources, self.directory.parent
        own = sorted([sources / "Cargo.toml", sources / "Cargo.lock", *sources.rglob("src/**/*.rs")])
        others = [
            path
            for folder in self.shared
            for path in sorted([root / folder / "Cargo.toml", *(root / folder).rglob("src/**/*.rs")])
        ]
        return digest_of([*own, *others], root)

    def built_modules(self) -> list[Path]:
        """The extension module `make install` built for this interpreter, if any."""
        return sorted(self.directory.glob(f"{self.module}{EXTENSION_SUFFIXES[0]}"))

    def load(self) -> ModuleType | None:
        """The extension module, when built from the sources as they are and
        `EVALSTREAM_PURE=1` is not set (else None)."""
        if not self.built_modules() or os.environ.get(PURE_SETTING) == "1":
            return None
        if not self.digest.is_file() or self.digest.read_text().strip() != self.source_digest():
            warnings.warn(
                f"{self.package}.{self.module} ({self.what}) is older than its sources in {self.sources};"
                " running without it (run `make install` to build it again)",
                stacklevel=2,
            )
            return None
        return importlib.import_module(f"{self.package}.{self.module}")


RECOGNISER: Final = Crate(_HERE, "events", "_native", "the compiled recogniser")
"""`events/native` (`event-recogniser`): this module's."""

NATIVE: Final = RECOGNISER.load()
"""`events._native`, when built from the sources as they are (else None)."""


def required(model: type[Record]) -> frozenset[str]:
    """The fields every `model` has given: its required ones."""
    return frozenset(name for name, field in model.model_fields.items() if field.is_required())


def compiled_recogniser() -> Recognise | None:
    """The compiled recogniser, given what it must agree with; None where `NATIVE` is."""
    if NATIVE is None:
        return None
    recognise: Recognise = NATIVE.Recogniser(
        {
            "score_measured": ScoreMeasured,
            "score_failed": ScoreFailed,
            "trial_finished": TrialFinished,
            "run_closed": RunClosed,
            "output": Output,
            "error_info": ErrorInfo,
            "usage": Usage,
            "run_started": RunStarted,
            "task_spec": TaskSpec,
            "metric_spec": MetricSpec,
            "output_spec": OutputSpec,
            "view_spec": ViewSpec,
            "signal": Signal,
            "epoch_seconds": epoch_seconds,
            "moment": MOMENT,
            "envelope_given": fastpath.ENVELOPE_GIVEN,
            "score_given": fastpath.SCORE_GIVEN,
            "trial_given": fastpath.TRIAL_GIVEN,
            "output_given": fastpath.OUTPUT_GIVEN,
            "started_given": required(RunStarted),
            "task_given": required(TaskSpec),
            "metric_given": required(MetricSpec),
            "output_spec_given": required(OutputSpec),
            "view_given": required(ViewSpec),
            "signal_given": required(Signal),
            "nonfinite": NONFINITE_STRINGS,
            "event_id_max": EVENT_ID_MAX,
            "run_id_max": RUN_ID_MAX,
            "name_max": NAME_MAX,
        }
    )
    return recognise


COMPILED: Final = compiled_recogniser()
