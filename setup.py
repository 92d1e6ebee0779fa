"""The two Rust crates built as extension modules by setuptools-rust, with the package: into
the wheel (`pip install .`, `pip wheel .`, `python -m build`), or in place beside their
sources for the editable install (`make install`), which also writes each crate's digest
(`events.builds.Crate`: the module is used only while the digest matches its sources).

Both are optional: where cargo is missing or a crate does not build, the package installs
without it, says so, and runs its Python twins. Everything else is in pyproject.toml.
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from pathlib import Path

from setuptools import setup
from setuptools_rust import Binding, RustExtension
from setuptools_rust import build_rust as setuptools_build_rust

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from events.builds import crates  # noqa: E402  (standard library only; the package's dependencies are not installed yet)

CRATES = crates(ROOT)
RUSTUP_CARGO = Path.home() / ".cargo" / "bin" / "cargo"


def missing(what: str, reason: str) -> None:
    """Say that a crate was not built, why, and what to do: as a warning, which pip shows
    whatever its verbosity (it hides the build's other output unless it fails)."""
    warnings.warn(
        f"evalstream: {what} not built ({reason}). The package runs its Python twins instead, slower and"
        " identical. To build it, install Rust's toolchain (https://rustup.rs) and install evalstream again.",
        stacklevel=2,
    )


class build_rust(setuptools_build_rust):
    """setuptools-rust's build, which finds rustup's cargo where PATH does not, says what it
    could not build, and in place keeps each crate's digest beside its module."""

    def run(self) -> None:
        if shutil.which(self.cargo) is None and self.cargo == "cargo" and RUSTUP_CARGO.is_file():
            os.environ["PATH"] = f"{RUSTUP_CARGO.parent}{os.pathsep}{os.environ.get('PATH', '')}"
        if shutil.which(self.cargo) is None:
            for extension in self.extensions:
                self.forget(extension.name)
            missing("the compiled modules (" + ", ".join(CRATES) + ") were", f"`{self.cargo}` was not found")
            return
        super().run()

    def forget(self, name: str) -> None:
        """In place, remove the module and digest a former build left: a build that fails is not current."""
        if self.inplace:
            crate = CRATES[name]
            crate.digest.unlink(missing_ok=True)
            for module in crate.built_modules():
                module.unlink()

    def run_for_extension(self, ext: RustExtension) -> None:
        crate = CRATES[ext.name]
        self.forget(ext.name)
        digest = crate.source_digest()
        try:
            super().run_for_extension(ext)
        except Exception as error:
            missing(f"{crate.name} ({crate.what}) was", str(error).strip() or type(error).__name__)
            raise
        if self.inplace:
            crate.digest.write_text(digest + "\n")


setup(
    rust_extensions=[
        RustExtension(
            crate.name,
            path=crate.manifest.relative_to(ROOT).as_posix(),
            binding=Binding.PyO3,
            debug=False,  # the in-place build too: the figures in docs/performance.md are the release build's
            optional=True,
            quiet=True,
            cargo_manifest_args=["--locked"],  # the versions the crate's Cargo.lock pins
        )
        for crate in CRATES.values()
    ],
    cmdclass={"build_rust": build_rust},
)
