"""The package's compiled parts, built with it: the fold compiled by mypyc (the modules of
`projections/` but `projections.NOT_COMPILED`) and the two Rust crates built by
setuptools-rust. Into the wheel (`pip install .`, `pip wheel .`, `python -m build`), or in
place beside their sources for the editable install (`make install`). Each build writes the
digest of the sources it was built from (`projections/compiled.digest`; in place,
`<package>/native.digest`): a part is used only while its digest matches them
(`projections/__init__.py`, `events.builds.Crate`).

Every part is optional: where mypyc, a C compiler or cargo is missing, or a part does not
build, the package installs without it, says so in a warning (pip shows those whatever its
verbosity, and hides the build's other output unless it fails), and runs as Python.
Everything else is in pyproject.toml.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
import warnings
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext as setuptools_build_ext
from setuptools_rust import Binding, RustExtension
from setuptools_rust import build_rust as setuptools_build_rust

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
# Both import the standard library only: the package's dependencies are not installed yet.
from events.builds import PURE_SETTING, crates  # noqa: E402

asked = os.environ.get(PURE_SETTING)
os.environ[PURE_SETTING] = "1"  # importing the package must not judge a former build
import projections  # noqa: E402

if asked is None:
    del os.environ[PURE_SETTING]
else:
    os.environ[PURE_SETTING] = asked

CRATES = crates(ROOT)
RUSTUP_CARGO = Path.home() / ".cargo" / "bin" / "cargo"
FOLD_TEMP = "build/fold"  # mypyc's C sources; kept, so that a C file unchanged is not compiled again


def missing(what: str, reason: str, instead: str, needs: str) -> None:
    """Say that a part was not built, why, what runs instead and what to do, as a warning."""
    warnings.warn(
        f"evalstream: {what} not built ({reason}). {instead}, slower and identical. To build it, install"
        f" {needs} and install evalstream again.",
        stacklevel=2,
    )


def crate_missing(what: str, reason: str) -> None:
    missing(what, reason, "The package runs its Python twins instead", "Rust's toolchain (https://rustup.rs)")


def fold_missing(reason: str) -> None:
    missing(
        "the compiled fold was", reason, "The fold runs from its Python source", "a C compiler and Python's headers"
    )


class build_ext(setuptools_build_ext):
    """setuptools' build of C extensions, given the fold's modules compiled by mypyc when the
    command asked builds (not for metadata or an sdist, which finalize this command too): it
    writes the fold's digest once every module is built and leaves them all out if one fails.
    In place, a fold whose modules are there and whose digest matches its sources is kept."""

    digest: str | None = None
    failed: str | None = None

    def finalize_options(self) -> None:
        asked = set(self.distribution.commands)
        builds = {"build", "build_ext", "bdist_wheel", "editable_wheel", "install"} & asked
        # egg_info may finalize this command before editable_wheel says it builds in place
        inplace = self.inplace or self.editable_mode or "editable_wheel" in asked
        if builds and not (inplace and fold_current()):
            self.digest = projections.source_digest()  # the sources as mypyc reads them
            self.distribution.ext_modules = [*(self.distribution.ext_modules or []), *fold_extensions()]
        super().finalize_options()

    def run(self) -> None:
        inplace = self.inplace  # setuptools builds into build_lib, then copies to the sources when in place
        digest = projections.DIGEST if inplace else Path(self.build_lib) / "projections" / projections.DIGEST.name
        if self.digest is not None:
            digest.unlink(missing_ok=True)  # a build that fails halfway is not current
        built = [Path(self.get_ext_fullpath(extension.name)).resolve() for extension in self.extensions]
        if inplace and self.digest is not None:  # what a former build left and this one does not build again
            for module in set(projections.compiled_modules()) - set(built):
                module.unlink()
        super().run()
        if self.failed is not None:
            for module in built:
                module.unlink(missing_ok=True)
            fold_missing(self.failed)
        elif built and self.digest is not None:
            digest.parent.mkdir(parents=True, exist_ok=True)
            digest.write_text(self.digest + "\n")

    def build_extensions(self) -> None:
        try:
            super().build_extensions()
        except Exception as error:
            self.failed = str(error).strip() or type(error).__name__
            self.extensions = []  # nothing of the fold is copied or shipped


def fold_current() -> bool:
    """Whether the fold's modules are beside their sources, compiled from them as they are."""
    suffix = EXTENSION_SUFFIXES[0]
    sources = projections.compiled_sources()
    modules = [projections.DIGEST.parent / f"compiled__mypyc{suffix}", *(path.with_suffix(suffix) for path in sources)]
    digest = projections.DIGEST.read_text().strip() if projections.DIGEST.is_file() else None
    return all(module.is_file() for module in modules) and digest == projections.source_digest()


def fold_extensions() -> list[Extension]:
    """The fold's modules as mypyc compiles them into C extensions, or none where it cannot."""
    compiler = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:  # said before mypyc spends a minute on C no one compiles
        fold_missing(f"no C compiler: `{compiler}` was not found")
        return []
    sources = [path.relative_to(ROOT).as_posix() for path in projections.compiled_sources()]
    try:
        from mypyc.build import mypycify

        return mypycify(sources, group_name="projections.compiled", opt_level="3", target_dir=FOLD_TEMP)
    except (SystemExit, Exception) as error:  # mypyc reports a failure as SystemExit
        reason = str(error).strip() if str(error) not in ("", "1", "2") else "mypyc failed; its messages are above"
        fold_missing(reason.splitlines()[-1])
        return []


class build_rust(setuptools_build_rust):
    """setuptools-rust's build, which finds rustup's cargo where PATH does not, says what it
    could not build, and in place keeps each crate's digest beside its module."""

    def run(self) -> None:
        # One target directory for both crates (they share their dependencies), out of the sources.
        os.environ.setdefault("CARGO_TARGET_DIR", str(ROOT / "build" / "cargo"))
        if shutil.which(self.cargo) is None and self.cargo == "cargo" and RUSTUP_CARGO.is_file():
            os.environ["PATH"] = f"{RUSTUP_CARGO.parent}{os.pathsep}{os.environ.get('PATH', '')}"
        if shutil.which(self.cargo) is None:
            for extension in self.extensions:
                self.forget(extension.name)
            crate_missing("the compiled modules (" + ", ".join(CRATES) + ") were", f"`{self.cargo}` was not found")
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
            crate_missing(f"{crate.name} ({crate.what}) was", str(error).strip() or type(error).__name__)
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
    cmdclass={"build_ext": build_ext, "build_rust": build_rust},
)
