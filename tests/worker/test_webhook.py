"""`worker.webhook.post` against a real HTTP server on loopback: what it sends, what it retries
and what it gives up on, and how it says so."""

from __future__ import annotations

import asyncio

import pytest

from tests.receiver import receiver
from worker.failure import CommandError
from worker.local.processes import free_port
from worker.webhook import WebhookFailed, chat_body, checked_url, post


def test_the_body_is_a_chat_message_with_the_record_beside_it() -> None:
    with receiver() as hook:
        asyncio.run(post(hook.url, chat_body("gate FAILED: ...", {"decision": "block"})))
    assert hook.taken == [{"text": "gate FAILED: ...", "evalstream": {"decision": "block"}}]


@pytest.mark.parametrize("status", [500, 503, 429])
def test_a_busy_or_failing_server_is_tried_again_until_it_takes_it(status: int) -> None:
    with receiver([status, status]) as hook:
        asyncio.run(post(hook.url, {"text": "x"}, first_delay=0.01))
    assert len(hook.bodies) == 3
    assert hook.taken == [{"text": "x"}]


@pytest.mark.parametrize("status", [400, 403, 404])
def test_a_refusal_is_not_tried_again(status: int) -> None:
    with receiver([status]) as hook, pytest.raises(WebhookFailed, match=f"refused the message: HTTP {status}"):
        asyncio.run(post(hook.url, {"text": "x"}, first_delay=0.01))
    assert len(hook.bodies) == 1


def test_a_server_that_never_takes_it_is_given_up_on_after_the_attempts() -> None:
    with receiver([500] * 10) as hook, pytest.raises(WebhookFailed, match=r"after 3 attempts \(last: HTTP 500"):
        asyncio.run(post(hook.url, {"text": "x"}, attempts=3, first_delay=0.01))
    assert len(hook.bodies) == 3


def test_nothing_listening_is_given_up_on_with_the_reason() -> None:
    url = f"http://127.0.0.1:{free_port()}/hook"
    with pytest.raises(WebhookFailed, match=r"after 2 attempts \(last: ClientConnectorError"):
        asyncio.run(post(url, {"text": "x"}, attempts=2, first_delay=0.01))


@pytest.mark.parametrize("url", ["hooks.slack.com/services/x", "ftp://example.org/x", "https://", ""])
def test_a_url_that_is_not_one_is_the_users_to_fix(url: str) -> None:
    with pytest.raises(CommandError, match="is not an http"):
        checked_url(url, "--webhook")
