"""The docs name the repository's files as they are: a page (or the README) that names a
module, test or manifest in backticks names one that exists, so that moving a file without
its docs fails here rather than misleading a reader."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
TOP = ("events/", "projections/", "worker/", "tests/", "deploy/", "bench/", "docs/", ".ci/")
NAMED = re.compile(r"`([\w./-]+)`")


def named_paths(text: str) -> list[str]:
    return [name for name in NAMED.findall(text) if name.startswith(TOP) and "*" not in name]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_file_a_page_names_exists(page: Path) -> None:
    missing = [name for name in named_paths(page.read_text()) if not (ROOT / name.rstrip("/")).exists()]
    assert missing == [], f"{page.relative_to(ROOT)} names files that do not exist: {missing}"


def test_the_check_sees_what_the_pages_name() -> None:
    assert named_paths("see `projections/figures/passk.py` and `tests/` but not `a//b` or `events/*.py`") == [
        "projections/figures/passk.py",
        "tests/",
    ]
