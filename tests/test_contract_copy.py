"""The contract lives in the repository (docs/spec: the wire format, what every figure means,
the t table, the example log and its summaries). Where the team's shared folder is beside
the checkout, its copy must be the same, byte for byte, so that a revision there is noticed
at once; a clone on its own has no such folder, and this test then checks that none is read."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "docs" / "spec"
SHARED = ROOT.parent / "shared"
COPIES = {
    "spec/EVENTS.md": "EVENTS.md",
    "spec/SEMANTICS.md": "SEMANTICS.md",
    "spec/t975.json": "t975.json",
    "examples/mixed-runs.jsonl": "examples/mixed-runs.jsonl",
    "examples/mixed-runs.expected.jsonl": "examples/mixed-runs.expected.jsonl",
    "examples/README.md": "examples/README.md",
}


@pytest.mark.parametrize(("shared", "ours"), COPIES.items())
def test_the_contract_in_the_repository_is_the_shared_one(shared: str, ours: str) -> None:
    assert (SPEC / ours).is_file(), f"docs/spec/{ours} is missing"
    original = SHARED / shared
    if not SHARED.is_dir():
        pytest.skip("no shared contract beside this clone: docs/spec is the contract, nothing to compare")
    assert original.is_file(), f"{original.relative_to(ROOT.parent)} is gone: the contract moved; update COPIES"
    assert (SPEC / ours).read_bytes() == original.read_bytes(), (
        f"docs/spec/{ours} differs from the shared {shared}: copy the revision in (and adapt what it changes)"
    )


def test_nothing_else_reads_the_shared_folder() -> None:
    """Only this test may: code, tests and docs read the contract from docs/spec."""
    readers = [
        str(path.relative_to(ROOT))
        for path in tracked()
        if path != Path(__file__) and SHARED_READ.search(path.read_text(errors="replace"))
    ]
    assert readers == []


def test_no_file_names_a_path_of_one_machine() -> None:
    """A clone works anywhere: no file holds a path of the machine it was written on."""
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in tracked()
        if path != Path(__file__)
        for match in MACHINE_PATH.finditer(path.read_text(errors="replace"))
    ]
    assert found == []


SHARED_READ = re.compile(r"\.\./shared\b|/ \"shared\"")
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|root|Users)/[\w.-]+|/home/(?!user\b)\w+/")


def tracked() -> list[Path]:
    """The repository's text files, as git lists them."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    paths = [ROOT / name for name in listed.decode().split("\0") if name]
    return [path for path in paths if path.is_file() and b"\0" not in path.read_bytes()[:8192]]
