"""The dashboard's web server (aiohttp): read-only pages, their JSON, and their live stream.

Every route answers in three forms, chosen by the request's `Accept` header (or `?format=json`):
- `text/html` (a browser): the page, with the current state already in it;
- `application/json`: the page's view model (`worker.dashboard.views`), for scripts;
- `text/event-stream` (the page's own script, an `EventSource`): server-sent events, each an
  `update` carrying the sections of the page that changed (`pages.Fragment`s: an element id and
  its new HTML) and, as its event id, the board state they show (`EPOCH.VERSION`: `Board.stamp`).
  A page passes the state it was rendered at (`?since=`; a reconnecting browser sends
  `Last-Event-ID`) and first gets every run changed after it, so nothing between render and
  stream is lost; a state of another epoch (the dashboard restarted since) or older than the
  board remembers gets everything the page shows.
A progress event re-sends a run's progress sections only; the per-task sections go out again
only with a new summary revision.

Only GET (and HEAD) routes exist: nothing can be changed through the server. The
Content-Security-Policy lets a page run our own script and style only, so even markup that got
past the escaping (`markup`) could run nothing.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal

import orjson
from aiohttp import web

from projections.analysis.history import history
from worker.dashboard.board import Board
from worker.dashboard.compare_page import compare_page
from worker.dashboard.follow import Follower
from worker.dashboard.listing import BadQuery, RunsQuery, label_pairs
from worker.dashboard.live import CompareLive, Live, RunLive, RunsLive, TaskLive, compared, runs_listing
from worker.dashboard.lookup import READ_TIMEOUT
from worker.dashboard.markup import Html
from worker.dashboard.pages import Fragment, footer, run_page, runs_page
from worker.dashboard.task_page import task_page
from worker.dashboard.views import RunRecords, run_view

STATIC = Path(__file__).with_name("static")
HEARTBEAT = 15.0
"""Seconds between keep-alive comments on an idle stream (a closed tab is noticed then)."""
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
Form = Literal["html", "json", "events"]
_TYPES: dict[str, Form] = {"text/html": "html", "application/json": "json", "text/event-stream": "events"}

BOARD = web.AppKey("board", Board)
FOLLOWERS = web.AppKey("followers", list[Follower])


def negotiate(request: web.Request) -> Form:
    """The form the client prefers: the highest `q` among ours in `Accept` (the first listed
    on a tie), html when it names none of them (`*/*`, or no header)."""
    if request.query.get("format") == "json":
        return "json"
    chosen: Form = "html"
    best = 0.0
    for part in request.headers.get("Accept", "").split(","):
        media, *params = (piece.strip() for piece in part.split(";"))
        form = _TYPES.get(media.lower())
        if form is not None and (quality := _quality(params)) > best:
            chosen, best = form, quality
    return chosen


def _quality(params: list[str]) -> float:
    for param in params:
        name, _, value = param.partition("=")
        if name.strip() == "q":
            try:
                return float(value)
            except ValueError:
                return 0.0
    return 1.0


def _json(value: object, status: int = 200) -> web.Response:
    return web.Response(
        body=orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS), status=status, content_type="application/json"
    )


def _page(body: Html, status: int = 200) -> web.Response:
    return web.Response(text=body, status=status, content_type="text/html", charset="utf-8")


async def runs(request: web.Request) -> web.StreamResponse:
    board = request.app[BOARD]
    form = negotiate(request)
    try:
        query = RunsQuery.parse(request.query, request.query.getall("label", []))
    except BadQuery as error:
        return _problem(form, f"{error} (in the runs page's URL)")
    if form == "events":
        return await stream(request, RunsLive(board, query))
    shown = runs_listing(board, query)
    if form == "json":
        return _json(
            {
                "version": board.version,
                "epoch": board.epoch,
                "runs": shown.rows,
                "total": shown.total,
                "page": query.page,
                "pages": shown.pages,
                "per": query.per,
                "labels": query.labels,
                "q": query.prefix,
            }
        )
    return _page(runs_page(shown, now=time.time(), version=board.stamp, footer=footer(request.app[FOLLOWERS])))


async def run(request: web.Request) -> web.StreamResponse:
    board = request.app[BOARD]
    run_id = request.query.get("id")
    form = negotiate(request)
    if not run_id:
        return _problem(form, "say which run: /run?id=RUN_ID")
    if form == "events":
        return await stream(request, RunLive(run_id))
    records = await board.load(run_id)
    if records is None and board.row(run_id) is not None:
        return _problem(
            form,
            f"the summary of run {run_id!r} could not be read back from the summaries topic within "
            f"{READ_TIMEOUT:g} s; try again (the dashboard's log says why)",
            503,
        )
    view = run_view(records or RunRecords(run_id))
    missing = 404 if records is None else 200
    if form == "json":
        if records is None:
            return _json({"error": f"no progress or summary of run {run_id!r} has arrived"}, 404)
        return _json(view)
    footer_ = footer(request.app[FOLLOWERS])
    # A run not seen yet still gets its live page: it fills in when its first record comes.
    return _page(run_page(view, now=time.time(), version=board.stamp, footer=footer_), missing)


async def two_runs(request: web.Request) -> web.StreamResponse:
    board = request.app[BOARD]
    baseline, candidate = request.query.get("baseline"), request.query.get("candidate")
    form = negotiate(request)
    if not baseline or not candidate:
        return _problem(form, "say which runs: /compare?baseline=RUN_ID&candidate=RUN_ID")
    if form == "events":
        return await stream(request, CompareLive(baseline, candidate))
    view = await compared(board, baseline, candidate)
    if form == "json":
        return _json(view, 200 if view.comparison is not None else 404)
    footer_ = footer(request.app[FOLLOWERS])
    return _page(compare_page(view, now=time.time(), version=board.stamp, footer=footer_))


async def task(request: web.Request) -> web.StreamResponse:
    board = request.app[BOARD]
    form = negotiate(request)
    try:
        labels = label_pairs(request.query.getall("label", []))
    except BadQuery as error:
        return _problem(form, f"{error} (in the task page's URL)")
    task_id = request.query.get("id") or None
    if form == "events":
        return await stream(request, TaskLive(board, task_id, labels))
    shown = history(board.tasks(), labels, task_id)
    if form == "json":
        # A shallow copy: orjson writes the records as they are (`asdict` would copy every run's).
        fields = {field.name: getattr(shown, field.name) for field in dataclasses.fields(shown)}
        return _json({"version": board.version, "epoch": board.epoch, **fields})
    return _page(task_page(shown, version=board.stamp, footer=footer(request.app[FOLLOWERS])))


def _problem(form: Form, message: str, status: int = 400) -> web.Response:
    if form == "json":
        return _json({"error": message}, status)
    return web.Response(text=message, status=status)


async def stream(request: web.Request, live: Live) -> web.StreamResponse:
    """The page's live updates, until the client goes or the server stops."""
    board = request.app[BOARD]
    since = request.headers.get("Last-Event-ID") or request.query.get("since")
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )
    await response.prepare(request)
    listener = board.listen(live.wants)  # before reading what changed: nothing falls in between
    try:
        await response.write(b"retry: 1000\n\n")
        # None: the page's state is of another epoch (the dashboard restarted) or older than the
        # board remembers; it is sent everything it shows.
        changed = board.changed_since(since)
        while not listener.closed:
            if changed is None or changed:
                fragments = await live.fragments(board, changed, time.time())
                if fragments:
                    fragments.append(Fragment("topics", footer(request.app[FOLLOWERS])))
                    data = orjson.dumps({"fragments": fragments})
                    await response.write(b"id: %s\nevent: update\ndata: %s\n\n" % (str(board.stamp).encode(), data))
            else:
                await response.write(b": idle\n\n")
            changed = await listener.changes(HEARTBEAT)
    except ConnectionResetError:
        pass  # the page was closed
    finally:
        board.forget(listener)
    return response


@web.middleware
async def headers(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    response = await handler(request)
    response.headers.setdefault("Content-Security-Policy", POLICY)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    return response


def application(board: Board, followers: list[Follower]) -> web.Application:
    app = web.Application(middlewares=[headers])
    app[BOARD] = board
    app[FOLLOWERS] = followers
    app.router.add_get("/", runs)
    app.router.add_get("/run", run)
    app.router.add_get("/compare", two_runs)
    app.router.add_get("/task", task)
    app.router.add_static("/static", STATIC)

    async def closing(_: web.Application) -> None:
        board.close()

    app.on_shutdown.append(closing)
    return app
