"""The docs' settings tables say what `Settings` reads: every EVALSTREAM_* variable that
`Settings()` (and the security settings it holds) reads is in a table of the docs, with the
default it really has, and a default a page gives in prose for one of them is that default too.

What `Settings` reads is observed, not listed: it is built with an environment that records
every variable asked for and the default given with it."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from worker.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
NAME = re.compile(r"`(EVALSTREAM_[A-Z0-9_]+)`")
# "`EVALSTREAM_X` seconds (0.2)", "`EVALSTREAM_X`, 0.1 s", "`EVALSTREAM_X` (0.1 s)"
UNSET = "(unset)"
PROSE_DEFAULT = re.compile(r"`(EVALSTREAM_[A-Z0-9_]+)`(?: seconds)?,? \(?(\d+(?:\.\d+)?)\b")


class RecordingEnviron(dict[str, str]):
    """An empty environment that notes each variable asked for, with the default given."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: dict[str, str] = {}

    def get(self, key: str, default: Any = None) -> Any:
        self.asked[key] = "" if default is None else str(default)
        return default


def read_by_settings(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Each EVALSTREAM_* variable `Settings()` reads, with its default ('' for none)."""
    environ = RecordingEnviron()
    monkeypatch.setattr(os, "environ", environ)
    Settings()
    return {name: default for name, default in environ.asked.items() if name.startswith("EVALSTREAM_")}


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def documented_defaults(text: str) -> dict[str, str]:
    """Each variable of a settings table (a table with a `default` column whose first column
    names variables) with the default it gives: a value in backticks (a row naming two
    variables gives two, in order, or one for both); words without backticks ("unset", "the
    system's CAs") say what happens when the variable is unset."""
    found: dict[str, str] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if not (line.startswith("|") and set(lines[i + 1].replace("|", "").strip()) <= set("-: ")):
            continue
        header = [cell.lower() for cell in cells(line)]
        if "default" not in header:
            continue
        column = header.index("default")
        for row in lines[i + 2 :]:
            if not row.startswith("|"):
                break
            row_cells = cells(row)
            names = NAME.findall(row_cells[0])
            literals = re.findall(r"`([^`]*)`", row_cells[column])
            if len(literals) <= 1:
                literals = literals * len(names) or [UNSET] * len(names)
            assert len(literals) == len(names), f"a row of {len(names)} variables gives {len(literals)} defaults: {row}"
            found.update(zip(names, literals, strict=True))
    return found


def same(documented: str, actual: str) -> bool:
    if documented == UNSET:
        return actual == ""
    try:
        return float(documented) == float(actual)
    except ValueError:
        return documented.lower() == actual.lower()


def test_every_setting_is_in_a_table_with_its_default(monkeypatch: pytest.MonkeyPatch) -> None:
    read = read_by_settings(monkeypatch)
    documented: dict[str, str] = {}
    for page in PAGES:
        documented.update(documented_defaults(page.read_text()))
    assert "EVALSTREAM_FLUSH_INTERVAL" in read, "the recording environment saw nothing Settings reads"
    missing = sorted(set(read) - set(documented))
    assert missing == [], f"settings no docs table lists: {missing}"
    wrong = {name: (documented[name], read[name]) for name in read if not same(documented[name], read[name])}
    assert wrong == {}, f"documented default != Settings' default: {wrong}"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_a_default_given_in_prose_is_the_settings_default(page: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    read = read_by_settings(monkeypatch)
    wrong = [
        (name, value, read[name])
        for name, value in PROSE_DEFAULT.findall(page.read_text())
        if name in read and not same(value, read[name])
    ]
    assert wrong == [], f"{page.name} gives a default Settings does not have (name, said, real): {wrong}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "| variable | default | meaning |\n|---|---|---|\n| `EVALSTREAM_A`, `EVALSTREAM_B` | `0.1`, `7` | x |\n",
            {"EVALSTREAM_A": "0.1", "EVALSTREAM_B": "7"},
        ),
        (
            "| variable | values | default |\n|---|---|---|\n| `EVALSTREAM_C`, `EVALSTREAM_D` | a, b | `x` |\n",
            {"EVALSTREAM_C": "x", "EVALSTREAM_D": "x"},
        ),
        (
            "| variable | default | meaning |\n|---|---|---|\n| `EVALSTREAM_F` | the system's CAs | y |\n",
            {"EVALSTREAM_F": UNSET},
        ),
        ("| variable | meaning |\n|---|---|\n| `EVALSTREAM_E` | `1` |\n", {}),
    ],
)
def test_the_tables_are_read_as_a_reader_reads_them(text: str, expected: dict[str, str]) -> None:
    assert documented_defaults(text) == expected


def test_a_wrong_prose_default_is_seen() -> None:
    found = PROSE_DEFAULT.findall("checkpoints (`EVALSTREAM_FLUSH_INTERVAL`, 0.25 s, plus the commit)")
    assert found == [("EVALSTREAM_FLUSH_INTERVAL", "0.25")]
