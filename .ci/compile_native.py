"""Build a Rust crate (PyO3) with cargo, in place: `events/native` (`event-recogniser`, the
compiled recogniser) or `projections/native` (`fold-kernels`, the fold's compiled kernels),
named by its package: `python .ci/compile_native.py events` or `... projections`.

`make install` runs it with the venv's Python, the interpreter the module is built for. It
needs cargo and rustc (rustup's stable toolchain) and fetches the crates `Cargo.lock` names
from crates.io. It writes the extension module (`events/_native<suffix>.so`,
`projections/_kernels<suffix>.so`) and last `<package>/native.digest`, the digest of the
sources built: `events.compiled.Crate.load` uses the module only while that matches.
Temporary files go to build/<module without its underscore>/ (build/native/, build/kernels/).

Where it cannot build (no cargo, say), it says why and what to do, removes what it built,
and exits 0: the Python twins then run alone, slower, and the tests that hold the compiled
code to them (`tests/events/test_fastpath.py`, `tests/projections/test_kernels.py`) fail
saying it is not built.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(package: str) -> None:
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    os.environ["EVALSTREAM_PURE"] = "1"  # importing the package must not judge the old build
    import projections
    from events import compiled

    crate = {"events": compiled.RECOGNISER, "projections": projections.KERNEL_CRATE}[package]
    crate.digest.unlink(missing_ok=True)  # a build that fails halfway is not current
    for module in crate.built_modules():
        module.unlink()
    target = ROOT / "build" / crate.module.lstrip("_")
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    manifest = str(crate.sources / "Cargo.toml")
    command = [cargo, "build", "--release", "--locked", "--quiet", "--manifest-path", manifest]
    environment = {**os.environ, "CARGO_TARGET_DIR": str(target), "PYO3_PYTHON": sys.executable}
    try:
        subprocess.run(command, env=environment, check=True)
    except (OSError, subprocess.CalledProcessError) as error:
        print(
            f"evalstream: the {crate.what} was not compiled ({error}). The Python twins run alone, slower."
            " To compile it, install Rust's toolchain (https://rustup.rs) and run `make install` again.",
            file=sys.stderr,
        )
        return
    built = target / "release" / f"lib{crate.module}.so"
    shutil.copyfile(built, crate.directory / f"{crate.module}{EXTENSION_SUFFIXES[0]}")
    crate.digest.write_text(crate.source_digest() + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
