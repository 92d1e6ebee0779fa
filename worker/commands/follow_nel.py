"""`evalstream follow nemo DIR`: a running NeMo Evaluator 0.3 (`nel eval run`) output
directory, its attempts published as nel verifies them (each benchmark's
`verified_log.jsonl`, then `results.jsonl` once nel writes it at the benchmark's end).

It polls the directory (`worker.commands.follow.follow`) and converts what it finds with
the importer's own functions (`events.importers.nel`), so a followed run and an imported
one are the same events. Choices:

- An attempt is published once its line is whole (ends with a newline); a half-written
  last line is read again at the next poll. An attempt read from the live log and again
  from `results.jsonl` is the same events (`events.importers.nel`), published once.
- A benchmark is done when its `eval-*.json` bundle is there and `results.jsonl` holds the
  bundle's `n_results` attempts; its `run.started` (its problems and scorers, known only
  then) and `run.closed` go out then. Follow exits when every benchmark is done: for a
  nested output directory, once nel has also written its `report.*` files, which it does
  when the whole run ends (a run configured with no report is followed until stopped; its
  runs are closed all the same).
- A resumed run (`nel eval run --resume`) writes `results.jsonl` again, with its cached
  attempts (no `scorer_rewards`, no trajectory; the scorers' rewards are read from
  `scoring_details`): the same event ids, so redeliveries that change nothing.
- Stopped and restarted, it publishes what it finds again, as redeliveries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from events.importers import nel
from events.importers.source import ImportOptions, SourceError
from events.models import InputEvent
from worker.commands.follow import Poll


@dataclass
class NelRun:
    """One nel output directory being followed: what has been published of it so far."""

    path: Path
    options: ImportOptions
    attempts: dict[str, set[tuple[int, int]]] = field(default_factory=dict)
    """Run id -> the (problem_idx, repeat) published."""
    closed: set[str] = field(default_factory=set)
    """Run ids whose run.started and run.closed were published."""

    def trial_count(self) -> int:
        return sum(len(published) for published in self.attempts.values())

    def poll(self) -> Poll:
        """The events of what landed since the last poll; raises `SourceError` when a whole
        line or file of the run cannot be read."""
        try:
            benchmarks = nel.read_benchmarks(self.path, self.options, partial_last_line=True)
        except SourceError:
            if not nel.benchmark_dirs(self.path):
                return Poll([], done=False)  # nothing written yet
            raise
        events: list[InputEvent] = []
        for benchmark in benchmarks:
            published = self.attempts.setdefault(benchmark.run_id, set())
            for attempt in benchmark.attempts:
                if (attempt.problem, attempt.repeat) not in published:
                    published.add((attempt.problem, attempt.repeat))
                    events += nel.attempt_events(benchmark, attempt)
            if benchmark.finished and benchmark.run_id not in self.closed:
                self.closed.add(benchmark.run_id)
                closing = nel.run_closed(benchmark)
                events += [nel.run_started(benchmark), *([closing] if closing is not None else [])]
        done = bool(benchmarks) and all(benchmark.finished for benchmark in benchmarks)
        if benchmarks and benchmarks[0].path != self.path:  # nested: later benchmarks may not have begun
            done = done and nel.run_ended(self.path)
        return Poll(events, done=done)
