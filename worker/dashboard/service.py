"""`evalstream dashboard`: read the output topics, then serve the pages until stopped.

The topics are read to their end before the server listens, so the URL printed is of a page
that already shows every run. SIGINT and SIGTERM stop it cleanly (open streams are ended, the
consumers closed). A follower that fails stops the dashboard with its error rather than leave
pages that no longer move.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys

from aiohttp import web

from worker.dashboard.board import Board
from worker.dashboard.follow import Follower, followers, start
from worker.dashboard.lookup import TopicLookup
from worker.dashboard.server import application
from worker.failure import ENVIRONMENT, CommandError
from worker.settings import Settings


async def serve(settings: Settings, host: str, port: int) -> None:
    lookup = TopicLookup(settings)
    board = Board(settings.dashboard_recent, lookup)
    readers = followers(settings, board)
    tasks: list[asyncio.Task[None]] = []
    runner: web.AppRunner | None = None
    try:
        topics = " and ".join(repr(follower.topic) for follower in readers)
        print(f"evalstream dashboard: reading {topics} at {settings.bootstrap} ...", file=sys.stderr, flush=True)
        tasks = await start(readers)
        _waiting(readers, settings)
        runner = web.AppRunner(application(board, readers), access_log=None, shutdown_timeout=5)
        await runner.setup()
        url = await _listen(runner, host, port)
        print(
            f"evalstream dashboard: {url} ({len(board)} runs, {board.in_memory()} in memory; Ctrl-C stops it)",
            flush=True,
        )
        await _until_stopped(tasks)
    finally:
        if runner is not None:
            await runner.cleanup()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for follower in readers:
            await follower.close()
        await lookup.close()


def _waiting(readers: list[Follower], settings: Settings) -> None:
    for follower in readers:
        if follower.state == "waiting":
            print(
                f"evalstream dashboard: no topic {follower.topic!r} at {settings.bootstrap} yet; waiting for it "
                "(the worker creates its topics when it starts)",
                file=sys.stderr,
            )


async def _listen(runner: web.AppRunner, host: str, port: int) -> str:
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as error:
        raise CommandError(
            f"cannot listen on {host}:{port}: {error.strerror or error}; pick another --port "
            "(or EVALSTREAM_DASHBOARD_PORT), or stop what uses it",
            ENVIRONMENT,
        ) from None
    bound_host, bound_port = runner.addresses[0][:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    return f"http://{shown}:{bound_port}/"


async def _until_stopped(tasks: list[asyncio.Task[None]]) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, stop.set)
    stopping = asyncio.create_task(stop.wait())
    try:
        done, _ = await asyncio.wait([stopping, *tasks], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is not stopping:
                task.result()  # a follower ended: raise why
    finally:
        stopping.cancel()
        for number in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError):
                loop.remove_signal_handler(number)
