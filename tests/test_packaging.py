"""The installed package (the image's, `pip install .`) holds every module of the source tree,
the fold compiled by mypyc and the modules compiled from its Rust crates, and runs them;
where cargo is missing it installs without the crates, says what to do, and runs the Python
twins.

The wheels are built with the venv's own setuptools, setuptools-rust and mypy
(`--no-build-isolation`, dev dependencies) and no index: the tests need no registry once
`make install` has run. The full wheel is built once for the module, from a copy below
build/, in the cargo target directory `make install` uses, whose build of the crates'
dependencies it reuses: ~1 to 2 minutes, mypyc's compilation and the crates' link-time
optimisation the most of it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

import projections
from events.builds import PURE_SETTING, crates

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("events", "projections", "worker")
CRATES = crates(ROOT)
BUILT = {f"{crate.package}/{crate.module}{EXTENSION_SUFFIXES[0]}" for crate in CRATES.values()}
PROBE = (
    "import warnings; warnings.simplefilter('error');"
    " import events.compiled as c, projections.kernels as k, projections, projections.step as s;"
    " print(c.NATIVE is not None, k.KERNELS is not None, projections.BUILD, s.__file__.rsplit('.', 1)[-1], c.__file__)"
)


def copy_source(source: Path) -> Path:
    """The files a build reads, copied to `source` (cleared first): no build, no cache."""
    shutil.rmtree(source, ignore_errors=True)
    source.mkdir(parents=True)
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    skipped = shutil.ignore_patterns("__pycache__", "*.so", "*.digest")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, source / package, ignore=skipped)
    return source


def build_wheel(source: Path, out: Path, environment: dict[str, str]) -> tuple[Path, str]:
    """The wheel `pip wheel` builds from `source`, and what pip said."""
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
    built = subprocess.run(
        [*command, "-w", str(out), str(source)], capture_output=True, env=environment, check=False, timeout=900
    )
    said = (built.stdout + built.stderr).decode(errors="replace")
    assert built.returncode == 0, said[-5000:]
    [wheel] = out.glob("evalstream-*.whl")
    return wheel, said


def probe(wheel: Path, into: Path) -> list[str]:
    """What the package unpacked from `wheel` loads: recogniser built, kernels built, the
    fold's build, the kind of file `projections.step` is, and where the package is."""
    zipfile.ZipFile(wheel).extractall(into)
    environment = {name: value for name, value in os.environ.items() if name != PURE_SETTING}
    environment["PYTHONPATH"] = str(into)  # ahead of the editable install's finder
    ran = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=into, env=environment, capture_output=True, text=True, check=False
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    return ran.stdout.split()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from the tree as it is, with cargo at hand."""
    if shutil.which("cargo") is None and not (Path.home() / ".cargo" / "bin" / "cargo").is_file():
        pytest.fail("cargo is not installed: the wheel's compiled modules need it (https://rustup.rs)")
    source = copy_source(ROOT / "build" / "wheel-test")
    environment = os.environ | {"CARGO_TARGET_DIR": str(ROOT / "build" / "cargo")}  # the crates' dependencies, built
    built, _ = build_wheel(source, tmp_path_factory.mktemp("out"), environment)
    return built


def test_the_wheel_holds_every_module(wheel: Path) -> None:
    shipped = set(zipfile.ZipFile(wheel).namelist())
    modules = {str(path.relative_to(ROOT)) for package in PACKAGES for path in (ROOT / package).rglob("*.py")}
    assert modules - shipped == set()
    assert "worker/py.typed" in shipped


def test_the_wheel_holds_the_compiled_modules_and_not_the_crates(wheel: Path) -> None:
    shipped = set(zipfile.ZipFile(wheel).namelist())
    assert BUILT - shipped == set()
    fold = {
        f"{path.relative_to(ROOT).with_suffix('')}{EXTENSION_SUFFIXES[0]}" for path in projections.compiled_sources()
    }
    assert fold - shipped == set()
    assert f"projections/compiled__mypyc{EXTENSION_SUFFIXES[0]}" in shipped
    assert "projections/compiled.digest" in shipped  # the fold's sources are in the wheel: judged by it
    assert [name for name in shipped if "/native/" in name or name.endswith((".rs", "native.digest"))] == []


def test_the_installed_wheel_runs_its_compiled_parts(wheel: Path, tmp_path: Path) -> None:
    """Installed without its crates, a crate's module is the one built with the package: used,
    with no warning that it is older than its sources; the fold is its compiled build."""
    assert probe(wheel, tmp_path) == ["True", "True", "compiled", "so", str(tmp_path / "events" / "compiled.py")]


def test_without_cargo_or_a_compiler_the_package_installs_runs_python_and_says_what_to_do(tmp_path: Path) -> None:
    """No cargo on PATH, no rustup's in HOME and no C compiler: the wheel is built without
    the compiled parts, pip shows why and what to do, and the package runs as Python."""
    searched = os.environ.get("PATH", "").split(os.pathsep)
    path = [str(Path(sys.executable).parent), *(d for d in searched if d and not (Path(d) / "cargo").exists())]
    environment = os.environ | {"PATH": os.pathsep.join(path), "HOME": str(tmp_path / "home"), "CC": "no-cc"}
    environment.pop("CARGO", None)
    wheel, said = build_wheel(copy_source(tmp_path / "source"), tmp_path / "out", environment)
    assert [name for name in zipfile.ZipFile(wheel).namelist() if name.endswith((".so", ".digest"))] == []
    said = " ".join(said.split())
    assert "(events._native, projections._kernels) were not built (`cargo` was not found)" in said
    assert "The package runs its Python twins instead" in said
    assert "https://rustup.rs" in said
    assert "the compiled fold was not built (no C compiler: `no-cc` was not found)" in said
    assert "The fold runs from its Python source" in said
    installed = tmp_path / "installed"
    assert probe(wheel, installed) == ["False", "False", "pure", "py", str(installed / "events" / "compiled.py")]
