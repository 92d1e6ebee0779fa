"""Compile the fold (the modules of projections/ and its packages, but each `__init__.py` and
`projections.NOT_COMPILED`) with mypyc, in place.

`make install` runs it with the venv's Python, which has mypy (and so mypyc); a C compiler
and Python's headers are all it needs besides. It writes the extension modules beside their
sources, one shared library (`projections/compiled__mypyc...so`) they all link to, and last
`projections/compiled.digest`, the digest of the sources compiled: `projections/__init__.py`
loads the compiled modules only while it matches. Temporary files go to build/fold/.

Where it cannot compile (no compiler, say), it says why and what to do, removes what it
built, and exits 0: everything then runs the fold from its Python source, and the test of the
compiled build (`tests/projections/test_compiled.py`) fails saying it is not built.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    os.environ["EVALSTREAM_PURE"] = "1"  # importing the package must not judge the old build
    # pyproject.toml's [tool.setuptools] is the package's; this build does not read it.
    warnings.filterwarnings("ignore", message="Support for `\\[tool.setuptools\\]`")
    from mypyc.build import mypycify
    from setuptools import setup

    import projections

    projections.DIGEST.unlink(missing_ok=True)  # a build that fails halfway is not current
    for module in projections.compiled_modules():  # nor is a module a former build compiled
        module.unlink()
    sources = [str(path.relative_to(ROOT)) for path in projections.compiled_sources()]
    digest = projections.source_digest()
    scratch = "build/fold"
    try:
        setup(
            name="evalstream-fold",
            ext_modules=mypycify(sources, group_name="projections.compiled", opt_level="3", target_dir=scratch),
            script_args=["--quiet", "build_ext", "--inplace", "--build-temp", scratch, "--build-lib", scratch],
        )
    except (SystemExit, Exception) as error:  # setuptools and mypyc report their failures as SystemExit
        for module in projections.compiled_modules():
            module.unlink()
        reason = str(error) if str(error) not in ("", "1", "2") else "mypyc's messages are above"
        print(
            f"evalstream: the fold was not compiled ({reason}). It runs from its Python source, ~1.4x slower."
            " To compile it, install a C compiler (gcc or clang) and Python's headers, then run `make install`.",
            file=sys.stderr,
        )
        return
    projections.DIGEST.write_text(digest + "\n")


if __name__ == "__main__":
    main()
