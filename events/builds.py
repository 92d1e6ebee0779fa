"""How a compiled part is found and judged current: the two Rust crates and the digest each
build records of its sources.

This module imports nothing but the standard library: `setup.py`, which builds the crates
(setuptools-rust), reads `crates` from it before anything of the package can be imported.
`events.compiled` (the recogniser) and `projections.kernels` (the fold's kernels) load their
crate's module through `Crate.load`; `projections/__init__.py` judges the mypyc build with
`digest_of` and `PURE_SETTING` the same way.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import warnings
from dataclasses import dataclass
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from types import ModuleType
from typing import Final

PURE_SETTING: Final = "EVALSTREAM_PURE"
"""Set to 1: run the Python sources of the compiled parts (the recogniser, the kernels and the fold)."""


def digest_of(sources: list[Path], root: Path) -> str:
    """The SHA-256 of `sources` in the order given, each as its path below `root` and its
    bytes: what a compiled build records of what it was built from (a crate, the fold)."""
    digest = hashlib.sha256()
    for path in sources:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@dataclass(frozen=True)
class Crate:
    """A Rust crate `<package>/native`, built by `setup.py` into the extension module
    `<package>.<module>`. Built in place (the editable install, `make install`), it is used
    only while `<package>/native.digest`, the digest of the sources it was built from, matches
    them; installed from a wheel, which carries the module and not the crate, it is the
    module built with the package."""

    directory: Path
    """The Python package's directory, which holds the crate and the module built."""
    package: str
    """The Python package's name (`events`, `projections`)."""
    module: str
    """The extension module's name in it (`_native`, `_kernels`)."""
    what: str
    """What it holds, for the warning when it is older than its sources."""
    shared: tuple[str, ...] = ()
    """The folders of the crates it depends on (path dependencies), below the project's root."""

    @property
    def name(self) -> str:
        """The extension module's full name (`events._native`)."""
        return f"{self.package}.{self.module}"

    @property
    def sources(self) -> Path:
        return self.directory / "native"

    @property
    def manifest(self) -> Path:
        return self.sources / "Cargo.toml"

    @property
    def digest(self) -> Path:
        return self.directory / "native.digest"

    def source_digest(self) -> str:
        """The digest of the crate's sources: its manifest, lock file and Rust files, and the
        manifest and Rust files of the crates it depends on (`shared`, their folders)."""
        sources, root = self.sources, self.directory.parent
        own = sorted([self.manifest, sources / "Cargo.lock", *sources.rglob("src/**/*.rs")])
        others = [
            path
            for folder in self.shared
            for path in sorted([root / folder / "Cargo.toml", *(root / folder).rglob("src/**/*.rs")])
        ]
        return digest_of([*own, *others], root)

    def built_modules(self) -> list[Path]:
        """The extension module built for this interpreter, if any."""
        return sorted(self.directory.glob(f"{self.module}{EXTENSION_SUFFIXES[0]}"))

    def load(self) -> ModuleType | None:
        """The extension module, when it is current and `EVALSTREAM_PURE=1` is not set (else
        None): built from the sources beside it as they are, or installed without them."""
        if not self.built_modules() or os.environ.get(PURE_SETTING) == "1":
            return None
        if self.manifest.is_file() and (
            not self.digest.is_file() or self.digest.read_text().strip() != self.source_digest()
        ):
            warnings.warn(
                f"{self.name} ({self.what}) is older than its sources in {self.sources};"
                " running without it (run `make install` to build it again)",
                stacklevel=2,
            )
            return None
        return importlib.import_module(self.name)


def crates(root: Path) -> dict[str, Crate]:
    """The crates of the source tree at `root`, by the extension module each builds."""
    built = (
        Crate(root / "events", "events", "_native", "the compiled recogniser"),
        Crate(
            root / "projections",
            "projections",
            "_kernels",
            "the fold's compiled kernels",
            shared=("events/native",),
        ),
    )
    return {crate.name: crate for crate in built}
