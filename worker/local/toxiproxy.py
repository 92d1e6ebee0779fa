"""Shopify's Toxiproxy, for network faults between a Kafka client and a local broker.

The server is a Go program built from source on first use (`ensure_server`: `go install`
into a cache folder, `TOXIPROXY_VERSION`); `make toxiproxy` does the same ahead of the
tests. `Toxiproxy` runs one on a free loopback port and drives it over its HTTP API: a proxy
per broker listener (`proxy`), faults as toxics on a proxy (`add`, `remove`, `cut`). A Kafka
client reaches the broker through a proxy only if the broker advertises the proxy's address
on that listener: `worker.local.clusters.proxied_broker` wires both.

Usage: ``python -m worker.local.toxiproxy install`` (prints the server's path).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from worker.local.processes import free_port

TOXIPROXY_VERSION = "v2.12.0"
MODULE = f"github.com/Shopify/toxiproxy/v2/cmd/server@{TOXIPROXY_VERSION}"
GO_FALLBACK = Path("/usr/local/go/bin/go")
HOST = "127.0.0.1"


class ToxiproxyError(RuntimeError):
    """Toxiproxy could not be built, started or driven."""


def _cache_dir() -> Path:
    env = os.environ.get("EVALSTREAM_TOXIPROXY_DIR")
    return Path(env or f"~/.cache/evalstream/toxiproxy/{TOXIPROXY_VERSION}").expanduser().absolute()


def ensure_server() -> Path:
    """The toxiproxy server's binary, built with `go install` into the cache folder when missing."""
    binary = _cache_dir() / "server"
    if binary.is_file():
        return binary
    go = shutil.which("go") or (str(GO_FALLBACK) if GO_FALLBACK.is_file() else None)
    if go is None:
        msg = f"toxiproxy is not built and `go` is not on PATH (nor at {GO_FALLBACK}): install Go 1.22 or later"
        raise ToxiproxyError(msg)
    binary.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOBIN": str(binary.parent)}
    done = subprocess.run([go, "install", MODULE], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not binary.is_file():
        msg = f"`go install {MODULE}` failed (exit {done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}"
        raise ToxiproxyError(msg)
    return binary


class Toxiproxy:
    """A toxiproxy server on a free loopback port, with its log in `log_path`; `close` stops it."""

    def __init__(self, log_dir: Path, timeout: float = 30.0) -> None:
        self.port = free_port()
        self.log_path = log_dir / "toxiproxy.log"
        log_dir.mkdir(parents=True, exist_ok=True)
        command = [str(ensure_server()), "-host", HOST, "-port", str(self.port)]
        with self.log_path.open("wb") as log:
            env = {**os.environ, "LOG_LEVEL": "info"}  # its default traces every step of every connection
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._call("GET", "/version")
                return
            except (OSError, ToxiproxyError):
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    log_text = self.log_path.read_text(errors="replace")[-2000:]
                    raise ToxiproxyError(
                        f"toxiproxy did not answer on port {self.port}; its log:\n{log_text}"
                    ) from None
                time.sleep(0.05)

    def __enter__(self) -> Toxiproxy:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://{HOST}:{self.port}{path}", data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read()
        except urllib.error.HTTPError as error:
            raise ToxiproxyError(
                f"toxiproxy answered {error.code} to {method} {path}: {error.read()[:500]!r}"
            ) from None
        return json.loads(text) if text.strip() else None

    def proxy(self, name: str, upstream: str, listen_port: int | None = None) -> int:
        """A proxy `name` from a loopback port (`listen_port`, else a free one) to `upstream`; its port."""
        port = listen_port or free_port()
        self._call("POST", "/proxies", {"name": name, "listen": f"{HOST}:{port}", "upstream": upstream})
        return port

    def add(self, proxy: str, toxic: str, kind: str, stream: str = "downstream", **attributes: int) -> None:
        """A toxic `kind` (latency, timeout, reset_peer, bandwidth, ...) named `toxic` on `proxy`:
        `stream` is downstream (broker to client) or upstream; `attributes` as the kind takes
        them (latency/jitter ms, timeout ms (0: until removed), rate KB/s)."""
        body = {"name": toxic, "type": kind, "stream": stream, "toxicity": 1.0, "attributes": attributes}
        self._call("POST", f"/proxies/{proxy}/toxics", body)

    def remove(self, proxy: str, toxic: str) -> None:
        self._call("DELETE", f"/proxies/{proxy}/toxics/{toxic}")

    def cut(self, proxy: str) -> None:
        """Blackhole `proxy` both ways: every byte is dropped and no connection closes (a
        partition, not a refusal), until `heal`."""
        for stream in ("upstream", "downstream"):
            self.add(proxy, f"cut-{stream}", "timeout", stream, timeout=0)

    def heal(self, proxy: str) -> None:
        """Lift `cut`, and drop the connections it held: their byte streams lost data, so a
        client must reconnect, as it would after a real partition's timeouts."""
        for stream in ("upstream", "downstream"):
            self.remove(proxy, f"cut-{stream}")
        self._call("POST", f"/proxies/{proxy}", {"enabled": False})
        self._call("POST", f"/proxies/{proxy}", {"enabled": True})


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args != ["install"]:
        print("usage: python -m worker.local.toxiproxy install", file=sys.stderr)
        return 2
    try:
        print(ensure_server())
    except ToxiproxyError as error:
        print(f"toxiproxy: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
