"""The server without Kafka: a board filled by hand behind the real routes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from events.models import InputEvent
from events.outputs import RunSummary
from tests.builders import closed, score, scored_run, started, task_spec, trial
from tests.worker.dashboard.outputs import outputs
from worker.dashboard.board import Board
from worker.dashboard.pages import dom_id
from worker.dashboard.server import application

HOSTILE = "<img src=x onerror=alert(1)>"


def log(run_id: str) -> list[InputEvent]:
    return [
        started(run_id, [task_spec("t", {"reward.score": "continuous"})], attempts_per_task=2),
        trial("t", "a", run_id=run_id),
        score("t", "a", "reward", {"score": 1.0}, run_id=run_id),
        trial("t", "b", run_id=run_id),
        score("t", "b", "reward", {"score": 0.0}, run_id=run_id),
        closed(run_id),
    ]


@asynccontextmanager
async def serving(board: Board) -> AsyncIterator[TestClient[web.Request, web.Application]]:
    client: TestClient[web.Request, web.Application] = TestClient(TestServer(application(board, [])))
    await client.start_server()
    try:
        yield client
    finally:
        await client.close()


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 30))


def test_every_route_answers_in_the_form_asked_for() -> None:
    progress, _ = outputs(log(HOSTILE))
    board = Board()
    board.offer_progress(progress[2], 10.0)

    async def check() -> None:
        async with serving(board) as client:
            page = await client.get("/", headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
            assert page.content_type == "text/html"
            body = await page.text()
            assert "&lt;img src=x onerror=alert(1)&gt;" in body
            assert HOSTILE not in body
            assert "script-src 'self'" in page.headers["Content-Security-Policy"]
            listing = await (await client.get("/", headers={"Accept": "application/json"})).json()
            assert [row["run_id"] for row in listing["runs"]] == [HOSTILE]
            assert listing["runs"][0]["seq"] == progress[2].seq
            one = await client.get("/run", params={"id": HOSTILE, "format": "json"})
            assert (await one.json())["figures_from"] == "progress"
            assert (
                await client.get("/run", params={"id": "nope"}, headers={"Accept": "application/json"})
            ).status == 404
            missing = await client.get("/run", params={"id": "nope"})
            assert missing.status == 404
            drawn = await missing.text()
            assert 'id="run-head"' in drawn  # a live page that fills in when the run comes
            assert "Run not found: no progress or summary of run nope has reached this dashboard" in drawn
            assert "<title>run nope: not found" in drawn
            for open_run in ("<progress", 'class="status', "none yet (the run is open)", "pass@k and pass^k"):
                assert open_run not in drawn
            assert (await client.get("/run")).status == 400
            assert (await client.post("/", data=b"x")).status == 405
            assert (await client.get("/static/dashboard.js")).status == 200

    run(check)


async def updates(
    client: TestClient[web.Request, web.Application], path: str, **params: str
) -> AsyncIterator[dict[str, object]]:
    """The `update` events of a page's stream, decoded."""
    response = await client.get(path, params=params, headers={"Accept": "text/event-stream"})
    assert response.content_type == "text/event-stream"
    event: dict[str, str] = {}
    async for raw in response.content:
        line = raw.decode().rstrip("\n")
        if not line:
            if event.get("event") == "update":
                yield {"id": event["id"], **orjson.loads(event["data"])}
            event = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(": ")
            event[name] = value


def test_a_stream_sends_what_changed_after_the_page_was_rendered() -> None:
    progress, summaries = outputs(log("r1"))
    board = Board()
    board.offer_progress(progress[1], 1.0)
    rendered_at = str(board.stamp)

    async def check() -> None:
        async with serving(board) as client:
            board.offer_progress(progress[2], 2.0)  # after the page, before its stream
            stream = updates(client, "/", since=rendered_at)
            first = await anext(stream)  # the whole list first: the stream cannot know which rows the page has
            [rows] = [f for f in first["fragments"] if f["id"] == "runs"]  # type: ignore[attr-defined]
            assert dom_id("run", "r1") in rows["html"]
            assert f'data-seq="{progress[2].seq}"' in rows["html"]
            assert not board.offer_progress(progress[2], 3.0)  # a redelivery moves nothing
            board.offer_summary(summaries[-1], 4.0)
            second = await anext(stream)
            assert second["id"] == str(board.stamp)
            parents = {f["parent"] for f in second["fragments"]}  # type: ignore[attr-defined]
            assert parents == {"runs", "summarized", None}  # the run can now be compared

    run(check)


def test_a_run_page_streams_that_run_only() -> None:
    mine, _ = outputs(log("mine"))
    other, _ = outputs(log("other"))
    board = Board()

    async def check() -> None:
        async with serving(board) as client:
            stream = updates(client, "/run", id="mine", since=str(board.stamp))
            await asyncio.sleep(0.2)
            board.offer_progress(other[1], 1.0)
            board.offer_progress(mine[1], 2.0)
            update = await anext(stream)
            ids = [f["id"] for f in update["fragments"]]  # type: ignore[attr-defined]
            assert ids == ["run-head", "run-figures", "run-details", "topics"]  # and how the topics are read
            assert 'data-seq="2"' in update["fragments"][0]["html"]  # type: ignore[index]

    run(check)


@pytest.mark.parametrize(
    ("accept", "form"),
    [
        ("", "text/html"),
        ("*/*", "text/html"),
        ("application/json", "application/json"),
        ("text/html;q=0.5, application/json", "application/json"),
        ("application/json;q=0.1, text/html", "text/html"),
    ],
)
def test_accept_picks_the_form(accept: str, form: str) -> None:
    async def check() -> None:
        async with serving(Board()) as client:
            response = await client.get("/", headers={"Accept": accept} if accept else {})
            assert response.content_type == form

    run(check)


def test_the_two_run_view_fills_in_when_both_runs_close() -> None:
    base_progress, base_summaries = outputs(log("base"))
    cand_progress, cand_summaries = outputs(log("cand"))
    board = Board()
    board.offer_progress(base_progress[-1], 1.0)
    board.offer_summary(base_summaries[-1], 1.0)
    board.offer_progress(cand_progress[1], 1.0)

    async def check() -> None:
        async with serving(board) as client:
            pair = {"baseline": "base", "candidate": "cand"}
            waiting = await client.get("/compare", params=pair, headers={"Accept": "application/json"})
            assert waiting.status == 404
            assert (await waiting.json())["waiting_for"] == ["cand"]
            assert (await client.get("/compare", params={"baseline": "base"})).status == 400
            stream = updates(client, "/compare", **pair, since=str(board.stamp))
            board.offer_summary(cand_summaries[-1], 2.0)
            update = await anext(stream)
            ids = [f["id"] for f in update["fragments"]]  # type: ignore[attr-defined]
            assert ids == ["compare-head", "compare-body", "topics"]
            assert "reward.score" in update["fragments"][1]["html"]  # type: ignore[index]
            done = await (await client.get("/compare", params={**pair, "format": "json"})).json()
            assert [key["key"] for key in done["comparison"]["keys"]] == ["reward.score"]

    run(check)


def labelled(run_id: str, model: str, value: float) -> RunSummary:
    return outputs(scored_run(run_id, {"t": [value, 1.0]}, labels={"benchmark": "b", "model": model}))[1][-1]


def test_the_runs_page_is_paged_newest_first_filtered_by_labels_and_searched_by_run_id() -> None:
    board = Board(recent=2)
    for index in range(7):
        board.offer_summary(labelled(f"run-{index}", f"m{index % 2}", 1.0), float(index))

    async def listed(client: TestClient[web.Request, web.Application], **params: str) -> dict[str, Any]:
        found: dict[str, Any] = await (await client.get("/", params={**params, "format": "json"})).json()
        return found

    async def check() -> None:
        async with serving(board) as client:
            second = await listed(client, per="3", page="2")
            assert [row["run_id"] for row in second["runs"]] == ["run-3", "run-2", "run-1"]
            assert (second["total"], second["pages"]) == (7, 3)
            m1 = await listed(client, label="model=m1", per="2")
            assert [row["run_id"] for row in m1["runs"]] == ["run-5", "run-3"]
            assert m1["total"] == 3
            client_query = [("label", "model=m0"), ("label", "benchmark=b"), ("q", "run-4"), ("format", "json")]
            both = await (await client.get("/", params=client_query)).json()
            assert [row["run_id"] for row in both["runs"]] == ["run-4"]
            page = await (await client.get("/", params={"label": "model=m1", "page": "2", "per": "2"})).text()
            assert 'href="/?label=model%3Dm1&amp;per=2"' in page  # newer: the same filter, in the URL
            assert (await client.get("/", params={"label": "model"})).status == 400
            assert (await client.get("/", params={"page": "0"})).status == 400

    run(check)


def test_a_task_history_moves_when_a_run_of_its_labels_closes() -> None:
    board = Board(recent=1)
    board.offer_summary(labelled("first", "m", 1.0), 1.0)
    board.offer_summary(labelled("second", "m", 0.0), 2.0)

    async def check() -> None:
        async with serving(board) as client:
            shown = await (
                await client.get("/task", params={"id": "t", "label": "benchmark=b", "format": "json"})
            ).json()
            assert shown["runs"] == ["first", "second"]
            assert [run["outcomes"]["reward.score"]["verdict"] for run in shown["task"]] == ["solved", "flaky"]
            assert [(flip["task_id"], flip["changes"]) for flip in shown["flips"]] == [("t", 1)]
            page = await (await client.get("/task", params={"id": HOSTILE, "label": "benchmark=b"})).text()
            assert HOSTILE not in page
            stream = updates(client, "/task", id="t", label="benchmark=b", since=str(board.stamp))
            await asyncio.sleep(0.2)
            board.offer_summary(labelled("other", "m", 0.0).model_copy(update={"labels": {}}), 3.0)
            board.offer_summary(labelled("third", "m", 1.0), 4.0)
            update = await anext(stream)
            runs_html = update["fragments"][0]["html"]  # type: ignore[index]
            assert 'data-runs="3"' in runs_html
            assert "third" in runs_html
            assert "other" not in runs_html

    run(check)


def test_a_page_of_a_previous_dashboard_is_sent_everything_it_shows() -> None:
    mine, _ = outputs(log("mine"))
    other, _ = outputs(log("other"))
    board = Board(epoch="after-restart")
    board.offer_progress(mine[1], 1.0)
    board.offer_progress(other[1], 2.0)
    board.offer_progress(other[2], 3.0)

    async def check() -> None:
        async with serving(board) as client:
            # The previous process's state 2 said nothing of what this board holds at its 2.
            stream = updates(client, "/run", id="mine", since="before-restart.2")
            update = await asyncio.wait_for(anext(stream), 10)
            assert update["id"] == "after-restart.3"
            assert 'data-seq="2"' in update["fragments"][0]["html"]  # type: ignore[index]

    run(check)
