"""Placeholder: replaced by the nemo importer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from events.importers.source import ImportOptions, SourceError
from events.models import InputEvent


def read(path: Path, options: ImportOptions) -> Iterator[InputEvent]:
    raise SourceError(f"{path}: the nemo importer is not built yet")
