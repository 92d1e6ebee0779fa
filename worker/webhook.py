"""Posting to a webhook: a chat's incoming webhook, or any HTTP endpoint that takes JSON.

The body is a chat message: `{"text": ...}` is what Slack's incoming webhooks and Teams'
incoming webhooks (Office 365 connector cards) both show; the same facts, as data, are under
`evalstream` beside it, which both ignore and a program of your own reads.

Retries: a connection error, a timeout, 429 or a 5xx is tried again after 0.5 s, then 1, 2,
4, ... (at most 30 s apart), `attempts` times in all; another 4xx says the URL or the body is
wrong, and trying again changes nothing, so it is not retried. `WebhookFailed` says what the
last answer was.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

from worker.failure import CommandError


class WebhookFailed(Exception):
    """The webhook did not take the message (its last answer, or why none came)."""


def checked_url(url: str, flag: str) -> str:
    """`url` if it is an http(s) URL with a host; the user's mistake otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CommandError(f"{flag} {url!r} is not an http(s) URL: give the webhook's full address (https://...)")
    return url


def chat_body(text: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """A chat message with `text` and, for programs, `record`."""
    return {"text": text, "evalstream": dict(record)}


def _retried(status: int) -> bool:
    return status == 429 or status >= 500


async def post(
    url: str,
    body: Mapping[str, Any],
    *,
    attempts: int = 5,
    first_delay: float = 0.5,
    timeout: float = 10.0,
    key: str | None = None,
) -> None:
    """POST `body` as JSON to `url`, retried as the module says; `WebhookFailed` if it never took
    it. `key` goes in an `Idempotency-Key` header, for a receiver that drops what it already has."""
    data = orjson.dumps(body)
    headers = {"Content-Type": "application/json", **({"Idempotency-Key": key} if key else {})}
    delay = first_delay
    last = "no attempt made"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
        for attempt in range(1, attempts + 1):
            try:
                async with session.post(url, data=data, headers=headers) as answer:
                    if answer.status < 300:
                        return
                    last = f"HTTP {answer.status} {(await answer.text())[:200]!r}"
                    if not _retried(answer.status):
                        raise WebhookFailed(f"{url} refused the message: {last}; check the URL")
            except (aiohttp.ClientError, TimeoutError) as error:
                last = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
            if attempt < attempts:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
    raise WebhookFailed(f"{url} did not take the message after {attempts} attempts (last: {last})")
