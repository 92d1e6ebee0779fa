"""`evalstream export mlflow|parquet`: run summaries written where teams already look.

Every exporter is a sink (`worker.export.sink`) behind one loop (`worker.export.pipeline`)
over one of two sources (`worker.export.sources`): the summaries topic, in a consumer group of
its own (`--group`, default `<app id>-export-<sink>`), committed records only, up to its end
as it is now or, with `--follow`, for as long as it runs; or a summaries file (`--from-file`,
what `evalstream replay` prints).

Exit codes: 0 every summary read was written, or was there already; 1 the broker, the topic
or the destination cannot be reached or written; 2 bad usage or input (a flag, a file that
cannot be read); 3 some records were skipped or some runs not written (each named on stderr,
with why), the rest was written.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import TextIO

from events.clients.kafka import TopicMissing
from worker.commands.clients import summary_subscriber
from worker.export.pipeline import Tally, export
from worker.export.sink import Sink, SinkUnavailable
from worker.export.sources import FileSource, TopicSource
from worker.failure import ENVIRONMENT, CommandError, opened, topic_missing
from worker.settings import Settings

INCOMPLETE = 3


def group_of(settings: Settings, sink: str, group: str | None) -> str:
    return group or f"{settings.app_id}-export-{sink}"


def run(
    make_sink: Callable[[], Sink],
    *,
    settings: Settings,
    group: str,
    follow: bool,
    from_file: str | None,
    err: TextIO = sys.stderr,
) -> int:
    """The command: make the sink, read, write, commit; the exit code (CommandError raised)."""
    if from_file is not None and follow:
        raise CommandError("--follow follows the summaries topic; a file is read to its end (drop one of the two)")
    try:
        sink = make_sink()
        if from_file is None:
            tally = asyncio.run(_from_topic(settings, sink, group=group, follow=follow, err=err))
        else:
            with opened(from_file, "a summaries JSONL file (what `evalstream replay` prints)") as stream:
                source = FileSource(stream, "stdin" if from_file == "-" else from_file, err)
                tally = asyncio.run(export(source.batches(), source.commit, sink, Tally(source.counts), err))
    except SinkUnavailable as error:
        raise CommandError(str(error), ENVIRONMENT) from None
    return 0 if tally.complete else INCOMPLETE


async def _from_topic(settings: Settings, sink: Sink, *, group: str, follow: bool, err: TextIO) -> Tally:
    subscriber = summary_subscriber(settings, group_id=group, keep_latest=False)
    try:
        await subscriber.start()
    except TopicMissing:
        raise topic_missing(
            settings.summaries_topic, settings.bootstrap, "--summaries-topic", "export a file with --from-file"
        ) from None
    source = TopicSource(subscriber, follow, err)
    try:
        return await export(source.batches(), source.commit, sink, Tally(source.counts), err)
    finally:
        await subscriber.stop()
