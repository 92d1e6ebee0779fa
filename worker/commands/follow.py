"""`evalstream follow harbor JOB_DIR`: a running Harbor job's trials, published as they end
(`follow`, the loop `follow nemo` shares, is at the end).

It polls the job directory (every `--interval` seconds, 1 by default) and converts what it
finds with the importer's own functions (`events.importers.harbor`), so a followed job and
an imported one are the same events. Choices:

- A trial is published once its `result.json` parses as a whole Harbor trial result.
  Harbor writes that file in place, so a half-written one fails to parse; it is read again
  at the next poll, and never published (nor dead-lettered) broken.
- The job is done when its own `result.json` has `finished_at`: Harbor writes that last,
  after every trial's `result.json`. Follow then publishes what is left, each run's
  `run.started` and its `run.closed`, and exits.
- `run.started` comes last, just before `run.closed`: its declarations are the reward keys
  the trials returned, known only once they have all ended. Until then `watch` shows
  trials and scores landing, without pass@k (EVENTS.md lets `run.started` come late; the
  summary is the same).
- Run ids are the importer's, with the number of groups read from the job's `lock.json`
  (Harbor writes it when the job starts); follow waits for it.
- When the job allows retries (`retry.max_retries` > 0 in its config.json), Harbor re-runs
  a failed trial under the same name (after removing its directory) when every exception
  the trial recorded (its own and its steps') is retryable by the job's retry
  include/exclude lists: follow holds such a trial back until the job is done, then
  publishes the `result.json` that is there.
- Order: each poll publishes what ended since the last one, in the order those trials
  started. With one trial at a time (`n_concurrent_trials` 1) and nothing held back that
  is the order `import` gives the finished job, and the summary is the same bytes. With
  trials overlapping, or held back, the trials land in about the order they ended, the
  order Harbor's own live result.json lists them; the counts, the lists as sets and pass@k
  are the same, the order of trial ids in `reward_stats` and `exception_stats` (and the
  last bit of non-0/1 sums) may differ from Harbor's final result.json.
- Stopped and restarted, it publishes every trial it finds again: the same event ids, so
  redeliveries that change nothing. A job that was interrupted (Ctrl-C) never gets
  `finished_at`: follow waits until it is stopped, and the runs stay open, as `import`
  leaves them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TextIO

from events.clients.kafka import running
from events.codec import encode
from events.importers import harbor
from events.importers.source import ImportOptions, SourceError
from events.models import InputEvent
from worker.commands.clients import event_producer, send
from worker.settings import Settings

DEFAULT_INTERVAL = 1.0
"""Seconds between two looks at the job directory."""


@dataclass(frozen=True, slots=True)
class Poll:
    events: list[InputEvent]
    """To publish now, in this order."""
    done: bool
    """The job has finished and these events close its runs."""


@dataclass
class HarborJob:
    """One job directory being followed: what has been published of it so far."""

    path: Path
    options: ImportOptions
    trials: dict[Path, harbor.Trial] = field(default_factory=dict)
    """Published trials by their result.json."""

    def trial_count(self) -> int:
        return len(self.trials)

    def poll(self) -> Poll:
        """The events of what has ended since the last poll; raises `SourceError` only
        when the job is done and a trial's result.json still cannot be read."""
        try:
            job = harbor.read_job(self.path)
        except SourceError:
            return Poll([], done=False)  # not started yet, or a file of the job half-written
        if job.planned_groups is None:
            return Poll([], done=False)
        new: list[harbor.Trial] = []
        unreadable: list[SourceError] = []
        for file in harbor.trial_files(self.path):
            if file in self.trials:
                continue
            try:
                trial = harbor.read_trial(file)
            except SourceError as error:
                unreadable.append(error)
                continue
            if job.may_retry(trial):
                continue
            new.append(trial)
        if job.finished and unreadable:
            raise unreadable[0]
        events = []
        several = job.planned_groups > 1
        for trial in harbor.start_order(new):
            self.trials[trial.file] = trial
            events += harbor.trial_events(harbor.run_id(job, trial.group, self.options, several=several), trial)
        if not job.finished:
            return Poll(events, done=False)
        for group, members in harbor.grouped(self.trials.values()).items():
            run_id = harbor.run_id(job, group, self.options, several=several)
            events.append(harbor.run_started(job, run_id, members))
            closing = harbor.run_closed(job, run_id, members)
            if closing is not None:
                events.append(closing)
        return Poll(events, done=True)


class Followed(Protocol):
    """A harness's output being written: each `poll` gives what is new since the last."""

    def poll(self) -> Poll: ...

    def trial_count(self) -> int:
        """The trials published so far."""
        ...


async def follow(settings: Settings, source: Followed, *, interval: float, log: TextIO) -> int:
    """Publish `source`'s events as they appear until it is done; returns how many."""
    sent = 0
    async with running(event_producer(settings)) as producer:
        while True:
            poll = source.poll()
            if poll.events:
                sent += await send(producer, settings, [encode(event) for event in poll.events])
                print(
                    f"published {len(poll.events)} events ({source.trial_count()} trials so far)", file=log, flush=True
                )
            if poll.done:
                return sent
            await asyncio.sleep(interval)
