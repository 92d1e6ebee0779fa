"""The changelog names every contract revision the spec pages date and every storage version
the code knows, so that a revision or a version bump without its line fails here."""

from __future__ import annotations

import re
from pathlib import Path

from projections.storage import VERSION

ROOT = Path(__file__).resolve().parents[1]
CHANGELOG = (ROOT / "docs" / "changelog.md").read_text()
SPEC = [ROOT / "docs" / "spec" / name for name in ("EVENTS.md", "SEMANTICS.md")]
DATED = re.compile(r"\((?:added|revision) (\d{4}-\d{2}(?:-\d{2})?)[:)]", re.IGNORECASE)


def table_rows(heading: str) -> list[str]:
    """The first cells of the table under `## heading`."""
    section = CHANGELOG.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return [line.split("|")[1].strip() for line in section.splitlines() if line.startswith("| ")][1:]


def test_every_dated_revision_of_the_spec_has_a_row() -> None:
    dates = {date for page in SPEC for date in DATED.findall(page.read_text())}
    assert dates, "no dated revision found in the spec pages: the pattern no longer matches them"
    assert sorted(dates - set(table_rows("Event contract"))) == []


def test_every_storage_version_has_a_row() -> None:
    assert table_rows("Storage version") == [str(v) for v in range(1, VERSION + 1)]


def test_the_dates_are_read_as_the_spec_writes_them() -> None:
    text = "(Revision 2026-12: a) (revision 2026-12-05: b) section 8 (added 2026-12) (Revision 2026)"
    assert DATED.findall(text) == ["2026-12", "2026-12-05", "2026-12"]
