"""`evalstream import inspect LOG`: one Inspect AI eval log (`.eval` or `.json`) as one run.

The log is read by `inspect_files` and converted by `inspect_events` (where every mapping
choice is written down), the conversion the live hook uses too: run.started from the eval
spec, then per sample, in the order the samples finished, its trial.finished and one
score per scorer, then run.closed unless the log says the eval is still running.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from events.importers import inspect_events
from events.importers.inspect_files import load
from events.importers.source import ImportOptions, SourceError
from events.models import InputEvent


def read(path: Path, options: ImportOptions) -> Iterator[InputEvent]:
    log = load(path)
    try:
        events = [inspect_events.run_started(log.spec, log.samples, run=options.run_id)]
        for sample in log.samples:
            events.extend(inspect_events.sample_events(log.spec, sample, run=options.run_id))
        closed = inspect_events.run_closed(log.spec, log.status, run=options.run_id)
    except SourceError as error:
        raise SourceError(f"{path}: {error}") from None
    except (AttributeError, KeyError, TypeError, ValueError) as error:  # a shape no Inspect version writes
        raise SourceError(
            f"{path}: not laid out as an Inspect AI eval log ({type(error).__name__}: {error}); "
            "check that it is one, and which Inspect version wrote it"
        ) from None
    if closed is not None:
        events.append(closed)
    return iter(events)
