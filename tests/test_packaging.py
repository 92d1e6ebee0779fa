"""The installed package (the image's, `pip install .`) holds every module of the source tree.

The wheel is built with the venv's own setuptools (`--no-build-isolation`, a dev dependency)
and no index: the test needs no registry once `make install` has run."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("events", "projections", "worker")


def test_the_wheel_holds_every_module(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
    built = subprocess.run(
        [*command, "-w", str(tmp_path / "out"), str(source)], capture_output=True, check=False, timeout=300
    )
    assert built.returncode == 0, (built.stdout + built.stderr).decode(errors="replace")[-5000:]
    [wheel] = (tmp_path / "out").glob("evalstream-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    modules = {str(path.relative_to(source)) for package in PACKAGES for path in (source / package).rglob("*.py")}
    assert modules - shipped == set()
    assert "worker/py.typed" in shipped
