"""Compile the fold (every module of projections/ but its __init__) with mypyc, in place.

`make install` runs it with the venv's Python, which has mypy (and so mypyc) and a C compiler
is all it needs. It writes the extension modules beside their sources, one shared library
(`projections/compiled__mypyc...so`) they all link to, and last `projections/compiled.digest`,
the digest of the sources compiled: `projections/__init__.py` loads the compiled modules only
while it matches. Temporary files go to build/fold/.
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
    sources = [str(path.relative_to(ROOT)) for path in projections.compiled_sources()]
    digest = projections.source_digest()
    setup(
        name="evalstream-fold",
        ext_modules=mypycify(sources, group_name="projections.compiled", opt_level="3", target_dir="build/fold"),
        script_args=["--quiet", "build_ext", "--inplace", "--build-temp", "build/fold", "--build-lib", "build/fold"],
    )
    projections.DIGEST.write_text(digest + "\n")


if __name__ == "__main__":
    main()
