"""A Harbor job directory written step by step the way `harbor run` writes it, from a
finished job of tests/fixtures/harbor: for following a job while it runs."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path


def write_job(source: Path, target: Path, *, half_every: int = 3) -> Iterator[str]:
    """Writes `source` into `target` one step per iteration, saying what it just wrote:
    the job's config.json, lock.json and a result.json without `finished_at` (a labelled
    edit of the real one: Harbor's own says the job has not finished), then each trial's
    result.json in the order the trials started, every `half_every`-th first cut in half
    (Harbor writes the file in place), and last the job's real result.json."""
    target.mkdir(parents=True)
    for name in ("config.json", "lock.json"):
        shutil.copy(source / name, target / name)
    running = json.loads((source / "result.json").read_text())
    running["finished_at"] = None
    (target / "result.json").write_text(json.dumps(running, indent=4))
    yield "job started"
    files = sorted(source.glob("*/result.json"), key=lambda file: json.loads(file.read_text())["started_at"])
    for number, file in enumerate(files):
        trial = target / file.parent.name
        trial.mkdir()
        text = file.read_text()
        if number % half_every == 0:
            (trial / "result.json").write_text(text[: len(text) // 2])
            yield f"{trial.name} half-written"
        (trial / "result.json").write_text(text)
        yield f"{trial.name} written"
    shutil.copy(source / "result.json", target / "result.json")
    yield "job finished"
