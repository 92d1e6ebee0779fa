"""Local single-node Apache Kafka 4.x broker (KRaft combined mode), no Docker.

Jars come from Maven Central via ``deploy/kafka/pom.xml`` (cached, re-resolved
when the pom changes); the broker runs as a detached ``java`` process.
Usage: ``python -m worker.local.broker start|stop|status [--port N] [--secure]``.
With ``--secure`` it is a broker of its own (port 9094) with TLS, SASL users and ACLs:
``worker.local.secured``.

Each port's broker keeps its state in a folder of its own (`port_dir`: ``<port>/`` of the
state dir, ``secure-<port>/`` for a secured one), so that a command for one port never acts
on another's broker. A command acts only on the broker its folder records (its pid file,
checked against the process's command line), and kills it only when it answers on its port
or is this process's own child: a broker it cannot reach (another network namespace's, whose
pid this one sees) is never killed.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING

from worker.local import secured
from worker.local.broker_flags import DEFAULT_PORT, SECURE_PORT, add_arguments
from worker.local.certs import CertificateError

if TYPE_CHECKING:
    from collections.abc import Sequence

DEPLOY_DIR = Path(__file__).resolve().parents[2] / "deploy" / "kafka"
POM_PATH = DEPLOY_DIR / "pom.xml"
TEMPLATE_PATH = DEPLOY_DIR / "server.properties.template"
JVM_OPTS = ["-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-Djava.awt.headless=true"]
LOG_LEVEL = "-Dorg.apache.logging.log4j.level="  # log4j2 default config, to stdout
MVN_ARGS = "-q -B dependency:copy-dependencies -DincludeScope=runtime"
INSTALL_HINT = "install it, e.g. `apt-get install openjdk-17-jre-headless maven`"
HOST = "127.0.0.1"


class BrokerError(RuntimeError):
    """The broker could not be provisioned, started or stopped."""


def _broker_dir() -> Path:
    env = os.environ.get("EVALSTREAM_BROKER_DIR")
    return Path(env or "~/.cache/evalstream/broker").expanduser().absolute()


def port_dir(port: int, *, secure: bool = False) -> Path:
    """The state folder of `evalstream broker` on `port`: one per port."""
    return _broker_dir() / (f"secure-{port}" if secure else str(port))


def _jars_dir() -> Path:
    env = os.environ.get("EVALSTREAM_KAFKA_JARS")
    return Path(env or "~/.cache/evalstream/kafka-jars").expanduser()


@dataclass(frozen=True)
class BrokerConfig:
    port: int
    controller_port: int
    state_dir: Path
    jars_dir: Path = field(default_factory=_jars_dir)
    secure: bool = False
    """SASL_SSL with users and ACLs (`worker.local.secured`) instead of PLAINTEXT."""
    overrides: tuple[tuple[str, str], ...] = ()
    """Broker settings that replace the template's (a later line of a properties file wins),
    e.g. a short `transactional.id.expiration.ms` to bring a coordinator's forgetting about."""

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def protocol(self) -> str:
        return "SASL_SSL" if self.secure else "PLAINTEXT"

    @property
    def log_path(self) -> Path:
        return self.state_dir / "broker.log"

    @property
    def pid_path(self) -> Path:
        return self.state_dir / "broker.pid"

    @property
    def properties_path(self) -> Path:
        """Its server.properties: the argument that names this broker on its command line."""
        return self.state_dir / "server.properties"


@dataclass(frozen=True)
class BrokerStatus:
    running: bool
    pid: int | None
    bootstrap: str
    log_path: Path


def _require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        msg = f"`{tool}` not found on PATH; {INSTALL_HINT}"
        raise BrokerError(msg)
    return path


def _run(cmd: list[str], secrets: Sequence[str] = ()) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        out = (proc.stdout + proc.stderr)[-3000:]
        for secret in secrets:  # a tool may echo an argument it could not take
            out = out.replace(secret, "***")
        msg = f"command failed ({' '.join(cmd)}):\n{out}"
        raise BrokerError(msg)


def _tail(config: BrokerConfig, lines: int = 40) -> str:
    try:
        text = config.log_path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return f"; no log at {config.log_path}"
    return f"; last lines of {config.log_path}:\n" + "\n".join(text)


def ensure_jars(config: BrokerConfig) -> Path:
    """Return the directory of broker jars, resolving them with Maven if needed. Processes
    starting brokers at once on a fresh machine resolve them one at a time: the first writes
    them, the others wait for it and find them there."""
    config.jars_dir.mkdir(parents=True, exist_ok=True)
    with (config.jars_dir / "resolving.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        return _resolved_jars(config)


def _resolved_jars(config: BrokerConfig) -> Path:
    lib, marker = config.jars_dir / "lib", config.jars_dir / "pom.sha256"
    digest = hashlib.sha256(POM_PATH.read_bytes()).hexdigest()
    if lib.is_dir() and marker.is_file() and marker.read_text().strip() == digest:
        return lib
    mvn = _require("mvn")
    tmp = config.jars_dir / "lib.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    _run([mvn, "-f", str(POM_PATH), *MVN_ARGS.split(), f"-DoutputDirectory={tmp}"])
    if not any(tmp.glob("kafka_*.jar")):
        msg = f"Maven resolved no Kafka jars into {tmp}; check {POM_PATH}"
        raise BrokerError(msg)
    shutil.rmtree(lib, ignore_errors=True)
    tmp.rename(lib)
    marker.write_text(digest + "\n")
    return lib


def api_versions(
    port: int, host: str = HOST, timeout: float = 2.0, context: ssl.SSLContext | None = None
) -> dict[int, int]:
    """Send a Kafka ApiVersions v0 request (over TLS with `context`); return {api_key: max_version}.

    Raises OSError (struct.error on a malformed reply) if the broker does not answer.
    """
    client = b"evalstream-broker"
    req = struct.pack(">hhih", 18, 0, 1, len(client)) + client  # key, ver, corr id
    with socket.create_connection((host, port), timeout=timeout) as raw, _wrapped(raw, host, context) as sock:
        sock.sendall(struct.pack(">i", len(req)) + req)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed during ApiVersions")
            data += chunk
    corr, error, count = struct.unpack(">ihi", data[4:14])
    if corr != 1 or error != 0:
        raise ConnectionError(f"ApiVersions failed: correlation {corr}, error {error}")
    entries = struct.iter_unpack(">hhh", data[14 : 14 + 6 * count])
    return {key: high for key, _low, high in entries}


def _wrapped(sock: socket.socket, host: str, context: ssl.SSLContext | None) -> socket.socket:
    return sock if context is None else context.wrap_socket(sock, server_hostname=host)


def _answers(config: BrokerConfig) -> bool:
    try:
        context = secured.probe_context(config.state_dir) if config.secure else None
        return bool(api_versions(config.port, context=context))
    except (OSError, struct.error):
        return False


def _child(pid: int) -> bool | None:
    """Whether `pid` is this process's own child and running (None: not its child). Its pid
    cannot be recycled while unreaped, and right after spawn its cmdline is not yet java's."""
    try:
        return os.waitpid(pid, os.WNOHANG)[0] != pid
    except ChildProcessError:
        return None


def _alive(config: BrokerConfig, pid: int) -> bool:
    """Whether `pid` is `config`'s broker, running: this process's child, or a process whose
    command line names `config`'s server.properties (a recycled pid is another program's)."""
    child = _child(pid)
    if child is not None:
        return child
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:  # Linux only; elsewhere trust kill(0)
        arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:
        return not Path("/proc/self").exists()
    except OSError:
        return True
    return b"kafka.Kafka" in arguments and os.fsencode(config.properties_path) in arguments


def _read_pid(config: BrokerConfig) -> int | None:
    try:
        pid = int(config.pid_path.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _alive(config, pid) else None


def status(config: BrokerConfig) -> BrokerStatus:
    pid = _read_pid(config)
    running = pid is not None and _answers(config)
    return BrokerStatus(running, pid, config.bootstrap, config.log_path)


def _configure(config: BrokerConfig, java: str, lib: Path) -> Path:
    """Write server.properties; format the log dir once with a stored cluster id."""
    data_dir, props = config.state_dir / "data", config.properties_path
    ports = {"port": config.port, "controller_port": config.controller_port}
    try:
        security = secured.prepare(config.state_dir) if config.secure else ""
    except CertificateError as error:
        raise BrokerError(str(error)) from None
    protocols = {"protocol": config.protocol, "controller_protocol": "SSL" if config.secure else "PLAINTEXT"}
    text = Template(TEMPLATE_PATH.read_text()).substitute(ports, **protocols, log_dir=data_dir, security=security)
    text += "".join(f"{key}={value}\n" for key, value in config.overrides)
    secured.write_private(props, text)
    if (data_dir / "meta.properties").exists():
        return props
    id_file = config.state_dir / "cluster.id"
    if not id_file.exists():  # Kafka Uuid: url-safe base64, never starting with '-'
        cid = "-"
        while cid.startswith("-"):
            cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        id_file.write_text(cid + "\n")
    cluster_id = id_file.read_text().strip()
    fmt = ["kafka.tools.StorageTool", "format", "--ignore-formatted", "-t", cluster_id, "-c", str(props)]
    if not config.secure:
        _run([java, f"{LOG_LEVEL}WARN", "-cp", f"{lib}/*", *fmt])
        return props
    arguments = config.state_dir / "format.args"  # the SCRAM passwords: a file, not the command line
    secured.write_private(arguments, "".join(f"{line}\n" for line in secured.scram_arguments(config.state_dir)))
    hidden = list(secured.passwords(config.state_dir).values())
    try:
        _run([java, f"{LOG_LEVEL}WARN", "-cp", f"{lib}/*", *fmt, f"@{arguments}"], hidden)
    finally:
        arguments.unlink()
    return props


def wait_ready(config: BrokerConfig, pid: int, timeout: float) -> None:
    """Until the broker of `pid` answers on its port (stopped if it does not in `timeout`
    and this process started it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(config, pid):
            config.pid_path.unlink(missing_ok=True)
            msg = f"Kafka broker exited during startup{_tail(config)}"
            raise BrokerError(msg)
        if _answers(config):
            return
        time.sleep(0.25)
    if _child(pid):  # started by this call: ours to end
        stop(config)
        msg = f"Kafka broker not ready after {timeout:g}s{_tail(config)}"
        raise BrokerError(msg)
    raise _unreachable(config, pid, f"after {timeout:g}s")


def _unreachable(config: BrokerConfig, pid: int, when: str) -> BrokerError:
    """A broker of `config` that runs but does not answer: left alone."""
    return BrokerError(
        f"the broker of {config.state_dir} (pid {pid}) runs but does not answer at {config.bootstrap} {when}: it "
        "is still starting, hung, or another network namespace's. It is left running; once it answers, "
        f"`evalstream broker stop --port {config.port}` stops it (if it is hung: `kill {pid}`)"
    )


def start(config: BrokerConfig, timeout: float = 60.0) -> int:
    """Start the broker (or find the running one); return its pid once it answers."""
    pid = _read_pid(config)
    if pid is not None:  # already running, or still starting up
        rendered = config.properties_path.read_text()
        if f"{config.protocol}://{config.bootstrap}," not in rendered:
            msg = f"broker pid {pid} of {config.state_dir} uses other ports; stop it"
            raise BrokerError(msg)
        wait_ready(config, pid, timeout)
        return pid
    pid = launch(config)
    wait_ready(config, pid, timeout)
    if config.secure:
        _secure(config)
    return pid


def launch(config: BrokerConfig) -> int:
    """Configure and spawn the broker without waiting for it (`start` waits; the nodes of a
    cluster are launched together, since none answers before a quorum of them runs); its pid."""
    for port in (config.port, config.controller_port):
        with socket.socket() as sock:
            if sock.connect_ex((HOST, port)) == 0:
                msg = f"port {port} is already in use by another process"
                raise BrokerError(msg)
    java = _require("java")
    lib = ensure_jars(config)
    config.state_dir.mkdir(parents=True, exist_ok=True)
    props = _configure(config, java, lib)
    if config.log_path.exists():
        config.log_path.replace(config.log_path.with_suffix(".log.1"))
    cmd = [java, *JVM_OPTS, f"{LOG_LEVEL}INFO", "-cp", f"{lib}/*", "kafka.Kafka"]
    # posix_spawn, not Popen: no "still running" ResourceWarning when we return.
    log = os.open(config.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pid = os.posix_spawn(
            java,
            [*cmd, str(props)],
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, log, 1),
                (os.POSIX_SPAWN_DUP2, log, 2),
            ],
            setsid=True,  # detached from our session: survives this process
        )
    finally:
        os.close(log)
    config.pid_path.write_text(f"{pid}\n")
    return pid


def _secure(config: BrokerConfig) -> None:
    """Give the users of a secured broker their ACLs and their settings files."""
    try:
        asyncio.run(secured.grant(config.state_dir, config.bootstrap))
    except Exception as error:
        stop(config)
        msg = (
            f"the secured broker refused its ACLs ({type(error).__name__}: {error}); if its users.json changed "
            f"since it was formatted, delete {config.state_dir} to start afresh{_tail(config)}"
        )
        raise BrokerError(msg) from None
    secured.write_env_files(config.state_dir, config.bootstrap)


def stop(config: BrokerConfig, timeout: float = 30.0) -> bool:
    """SIGTERM the broker, SIGKILL after timeout. False if none was running. A broker that
    does not answer on its port is stopped only if it is this process's child."""
    pid = _read_pid(config)
    if pid is not None:
        if not _child(pid) and not _answers(config):
            raise _unreachable(config, pid, "now")
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while _alive(config, pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if not _alive(config, pid):
                break
        else:
            msg = f"Kafka broker pid {pid} survived SIGKILL"
            raise BrokerError(msg)
    config.pid_path.unlink(missing_ok=True)
    return pid is not None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="evalstream broker", description="Local Kafka broker (KRaft).")
    add_arguments(parser)
    return run(parser.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Start, stop or show the local broker (`add_arguments` gives the flags); exit 3 from
    `status` when it is not running."""
    port = args.port or (SECURE_PORT if args.secure else DEFAULT_PORT)
    state_dir = port_dir(port, secure=args.secure)
    config = BrokerConfig(port, args.controller_port or port + 1, state_dir, secure=args.secure)
    try:
        if args.command == "start":
            began = time.monotonic()
            pid = start(config, timeout=args.timeout or 60.0)
            took = time.monotonic() - began
            print(f"kafka broker running: pid {pid}, bootstrap {config.bootstrap} ({config.protocol})")
            print(f"ready in {took:.1f}s; log: {config.log_path}")
            if config.secure:
                files = ", ".join(str(secured.env_path(state_dir, user)) for user in secured.USERS)
                print(f"users' settings (`set -a; . FILE; set +a`): {files}")
        elif args.command == "stop":
            stopped = stop(config, timeout=args.timeout or 30.0)
            print("kafka broker stopped" if stopped else "kafka broker was not running")
        else:
            st = status(config)
            state = "running" if st.running else "unresponsive" if st.pid else "stopped"
            print(f"kafka broker {state}: pid {st.pid or '-'} at {st.bootstrap}")
            print(f"log: {st.log_path}")
            return 0 if st.running else 3
    except BrokerError as exc:
        print(f"evalstream broker: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
