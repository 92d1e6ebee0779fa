"""A real HTTP server on loopback that records what is posted to it, for the webhook tests:
a thread of the test process, answering each POST with the next status of `statuses` (then
200), so that a test can make it fail a few times first."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson


@dataclass
class Receiver:
    url: str
    statuses: list[int] = field(default_factory=list)
    """Answers still to give before 200s, first first."""
    bodies: list[Any] = field(default_factory=list)
    """Every JSON body posted, taken or not, in arrival order."""
    taken: list[Any] = field(default_factory=list)
    """The bodies answered with a 2xx."""
    lock: threading.Lock = field(default_factory=threading.Lock)


@contextmanager
def receiver(statuses: list[int] | None = None) -> Iterator[Receiver]:
    state: Receiver

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = orjson.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with state.lock:
                status = state.statuses.pop(0) if state.statuses else 200
                state.bodies.append(body)
                if status < 300:
                    state.taken.append(body)
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:  # quiet: the tests assert what matters
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state = Receiver(f"http://127.0.0.1:{server.server_address[1]}/hook", list(statuses or []))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
