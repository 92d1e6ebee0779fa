"""`evalstream import SOURCE PATH`: a harness's results on disk as a v1 event log."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path

from events.codec import encode
from events.importers.source import Importer, ImportOptions

SOURCES = {
    "harbor": "events.importers.harbor",
    "inspect": "events.importers.inspect_log",
    "nemo": "events.importers.nemo",
}
"""Source name on the command line -> the module whose `read` imports it."""


def importer(source: str) -> Importer:
    read: Importer = importlib.import_module(SOURCES[source]).read
    return read


def import_lines(source: str, path: Path, options: ImportOptions) -> Iterator[bytes]:
    """The events of `path` as encoded lines (no newline), in log order; raises
    `SourceError` when the results cannot be read."""
    for event in importer(source)(path, options):
        yield encode(event)
