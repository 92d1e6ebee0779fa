"""Build the compiled recogniser (`events/native`, Rust through PyO3) with cargo, in place.

`make install` runs it with the venv's Python, the interpreter the module is built for. It
needs cargo and rustc (rustup's stable toolchain) and fetches the crates `Cargo.lock` names
from crates.io. It writes `events/_native<suffix>.so` and last `events/native.digest`, the
digest of the sources built: `events/compiled.py` uses the module only while that matches.
Temporary files go to build/native/.

Where it cannot build (no cargo, say), it says why and what to do, removes what it built,
and exits 0: decoding then runs the Python fast path alone, and the test of the compiled
recogniser (`tests/events/test_fastpath.py`) fails saying it is not built.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    os.environ["EVALSTREAM_PURE"] = "1"  # importing the package must not judge the old build
    from events import compiled

    compiled.DIGEST.unlink(missing_ok=True)  # a build that fails halfway is not current
    for module in compiled.built_modules():
        module.unlink()
    target = ROOT / "build" / "native"
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    manifest = str(compiled.SOURCES / "Cargo.toml")
    command = [cargo, "build", "--release", "--locked", "--quiet", "--manifest-path", manifest]
    environment = {**os.environ, "CARGO_TARGET_DIR": str(target), "PYO3_PYTHON": sys.executable}
    try:
        subprocess.run(command, env=environment, check=True)
    except (OSError, subprocess.CalledProcessError) as error:
        print(
            f"evalstream: the recogniser was not compiled ({error}). Events decode on the Python fast path alone,"
            " slower. To compile it, install Rust's toolchain (https://rustup.rs) and run `make install` again.",
            file=sys.stderr,
        )
        return
    shutil.copyfile(target / "release" / "lib_native.so", compiled.SOURCES.parent / f"_native{EXTENSION_SUFFIXES[0]}")
    compiled.DIGEST.write_text(compiled.source_digest() + "\n")


if __name__ == "__main__":
    main()
