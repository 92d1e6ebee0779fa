"""`evalstream alerts --webhook URL`: alerts without a gate, from the committed outputs.

It reads the summaries and progress topics from their start (committed records only, in no
consumer group), applies the rules of `projections.analysis.alerts` to every record, and posts
each alert to the webhook once (`worker.webhook`: the chat body, the alert's id in an
`Idempotency-Key` header, 429 and 5xx retried with backoff). It runs beside the worker and
never touches it: a slow or failing webhook delays alerts, never the fold.

Once: an alert is recorded in the state folder (`worker.commands.alerts_sent`) as soon as the
webhook took it, and before the next is sent; a restart reads the topics from their start
again, computes the same alerts under the same names, and sends only those not recorded. A
webhook that keeps failing is tried again (30 s apart, then up to 5 minutes), never skipped.

The first start with an empty state folder records the alerts of what the topics already hold
as sent without sending them (the history would otherwise arrive as a flood); `--history`
sends them instead.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TextIO

from events.clients.kafka import TopicMissing
from events.clients.subscriber import AsyncProgressSubscriber, AsyncSubscriber, AsyncSummarySubscriber
from events.outputs import RunProgress, RunSummary
from projections.analysis.alerts import Alert, Previous, Rules, progress_alerts, summary_alerts
from worker.commands.alerts_sent import SentAlerts
from worker.failure import CommandError, topic_missing
from worker.settings import Settings
from worker.webhook import WebhookFailed, chat_body, post

RETRY_FIRST, RETRY_MOST = 30.0, 300.0


class Alerter:
    """The rules' state (the previous run per labels), what is queued, and the sender."""

    def __init__(self, url: str, rules: Rules, sent: SentAlerts, err: TextIO, retry_first: float = RETRY_FIRST) -> None:
        self.url = url
        self.rules = rules
        self.sent = sent
        self.err = err
        self.retry_first = retry_first
        self.previous = Previous(rules.match)
        self.queue: asyncio.Queue[Alert] = asyncio.Queue()
        self.queued: set[str] = set()

    def alerts_of(self, record: RunSummary | RunProgress) -> list[Alert]:
        if isinstance(record, RunSummary):
            return summary_alerts(record, self.previous.before(record), self.rules)
        return progress_alerts(record, self.rules)

    def take(self, alerts: list[Alert], *, send: bool) -> None:
        """Queue the alerts not sent nor queued yet; without `send`, record them as sent (the
        history of a first start)."""
        new = [alert for alert in alerts if alert.key not in self.sent and alert.key not in self.queued]
        if not send:
            self.sent.add(*(alert.key for alert in new))
            return
        for alert in new:
            self.queued.add(alert.key)
            self.queue.put_nowait(alert)

    async def send_forever(self) -> None:
        while True:
            alert = await self.queue.get()
            wait = self.retry_first
            while alert.key not in self.sent:
                try:
                    await post(self.url, chat_body(alert.text, alert.record()), key=alert.key)
                except WebhookFailed as error:
                    self.err.write(f"evalstream alerts: {alert.key}: {error}; trying again in {wait:g} s\n")
                    self.err.flush()
                    await asyncio.sleep(wait)
                    wait = min(wait * 2, RETRY_MOST)
                    continue
                self.sent.add(alert.key)
                self.err.write(f"evalstream alerts: sent {alert.key}\n")
                self.err.flush()
            self.queued.discard(alert.key)


async def _read(
    subscriber: AsyncSubscriber[RunSummary] | AsyncSubscriber[RunProgress],
    alerter: Alerter,
    *,
    send: bool,
    follow: bool,
) -> None:
    async for batch in subscriber.batches(follow=follow):
        for received in batch:
            alerter.take(alerter.alerts_of(received.record), send=send)


async def run_alerts(
    settings: Settings,
    url: str,
    rules: Rules,
    state_dir: Path,
    *,
    history: bool = False,
    err: TextIO = sys.stderr,
    retry_first: float = RETRY_FIRST,
) -> None:
    """Follow the outputs and alert, until cancelled."""
    sent = SentAlerts(state_dir)
    alerter = Alerter(url, rules, sent, err, retry_first)
    options = {"bootstrap": settings.bootstrap, "keep_latest": False, **settings.security.options()}
    summaries = AsyncSummarySubscriber(topic=settings.summaries_topic, **options)
    progress = AsyncProgressSubscriber(topic=settings.progress_topic, **options)
    try:
        await summaries.start()
        await progress.start()
    except TopicMissing as missing:
        await summaries.stop()
        flag = "--summaries-topic" if missing.topic == settings.summaries_topic else "--progress-topic"
        raise topic_missing(missing.topic, settings.bootstrap, flag) from None
    sender = asyncio.create_task(alerter.send_forever())
    try:
        send = history or sent.seeded
        # Summaries first, so that a run's previous run is known before its progress is read.
        await _read(summaries, alerter, send=send, follow=False)
        await _read(progress, alerter, send=send, follow=False)
        if not sent.seeded:
            sent.add(seeded=True)
        err.write(
            f"evalstream alerts: following {settings.summaries_topic!r} and {settings.progress_topic!r} at "
            f"{settings.bootstrap}; {len(sent.sent)} alerts recorded as sent\n"
        )
        err.flush()
        await asyncio.gather(
            _read(summaries, alerter, send=True, follow=True),
            _read(progress, alerter, send=True, follow=True),
            sender,
        )
    finally:
        sender.cancel()
        await summaries.stop()
        await progress.stop()
        sent.close()


def checked_rules(dead_threshold: float, min_trials: int, match: str) -> Rules:
    if not 0.0 <= dead_threshold < 1.0:
        raise CommandError(f"--dead-trials is a share of finished trials, in [0, 1); got {dead_threshold:g}")
    if min_trials < 1:
        raise CommandError(f"--min-trials is a count, >= 1; got {min_trials}")
    labels = tuple(label.strip() for label in match.split(",") if label.strip())
    if not labels:
        raise CommandError("--match names the labels two runs must share to be compared, e.g. benchmark,model")
    return Rules(dead_threshold, min_trials, labels)
