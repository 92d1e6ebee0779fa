"""The secured variant of the local broker (`evalstream broker start --secure`): its TLS
material, its users and what each may do.

- TLS: a CA of its own signs the broker's certificate and one client certificate
  (`worker.local.certs`); the client listener is SASL_SSL and wants that client certificate
  too (mutual TLS), the controller listener is SSL for the broker itself.
- Users, with random passwords made at the first start and kept in `users.json` (owner
  only): `admin` (a super user; the broker's own connections), `worker` (every topic, group
  and transactional id named `evalstream*`: what `evalstream worker` reads, writes and
  creates, and the transactions it writes in), `producer`
  (writes `evalstream.events*`), `reader` (reads `evalstream.summaries*` and
  `evalstream.progress*`, nothing else). Each can sign in with SCRAM-SHA-512, SCRAM-SHA-256
  or PLAIN. The SCRAM credentials are written into the metadata log when it is formatted,
  from an arguments file (never a command line, which any local user can read).
- `<user>.env` in the state dir holds a user's EVALSTREAM_* settings (bootstrap, protocol,
  mechanism, user, password, CA, client certificate and key), ready for `set -a; . FILE`.
- ACLs are prefixed patterns, created at every start (creating one that exists changes
  nothing): a topic or group outside the prefixes is nobody's but admin's.
"""

from __future__ import annotations

import json
import os
import secrets
import ssl
from collections.abc import Iterator
from pathlib import Path
from string import Template
from typing import NamedTuple

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import for_code
from aiokafka.protocol.admin import CreateAclsRequest

from events.clients.kafka import bootstrapped
from events.clients.security import Security
from worker.local import certs

TEMPLATE_PATH = Path(__file__).resolve().parents[2] / "deploy" / "kafka" / "secure.properties.template"
USERS = ("admin", "worker", "producer", "reader")
MECHANISM = "SCRAM-SHA-512"
"""The mechanism the `<user>.env` files name; SCRAM-SHA-256 and PLAIN work as well."""
BROKER_NAME, CLIENT_NAME = "evalstream-broker", "evalstream-client"
HOSTS = ("127.0.0.1", "localhost")

# Kafka's ACL codes (org.apache.kafka.common.acl / resource).
TOPIC, GROUP, TRANSACTIONAL_ID = 2, 3, 5
PREFIXED, ALLOW = 4, 3
ALL, READ, WRITE, DESCRIBE = 2, 3, 4, 8


class Grant(NamedTuple):
    user: str
    resource: int
    prefix: str
    operation: int


GRANTS = (
    Grant("worker", TOPIC, "evalstream", ALL),
    Grant("worker", GROUP, "evalstream", ALL),
    Grant("worker", TRANSACTIONAL_ID, "evalstream", ALL),
    Grant("producer", TOPIC, "evalstream.events", WRITE),
    Grant("producer", TOPIC, "evalstream.events", DESCRIBE),
    Grant("reader", TOPIC, "evalstream.summaries", READ),
    Grant("reader", TOPIC, "evalstream.summaries", DESCRIBE),
    Grant("reader", TOPIC, "evalstream.progress", READ),
    Grant("reader", TOPIC, "evalstream.progress", DESCRIBE),
)


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path`, readable by its owner only from the first byte."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(text)
    path.chmod(0o600)


def passwords(state_dir: Path) -> dict[str, str]:
    """Every user's password, made at the first call for this state dir."""
    path = state_dir / "users.json"
    if not path.exists():
        write_private(path, json.dumps({user: secrets.token_urlsafe(18) for user in USERS}, indent=2) + "\n")
    stored: dict[str, str] = json.loads(path.read_text())
    return stored


def tls_dir(state_dir: Path) -> Path:
    return state_dir / "tls"


def prepare(state_dir: Path) -> str:
    """Make what is missing (certificates, passwords); return the security part of
    server.properties."""
    tls = tls_dir(state_dir)
    ca = certs.authority(tls)
    broker = certs.issue(ca, tls, BROKER_NAME, hosts=HOSTS)
    certs.issue(ca, tls, CLIENT_NAME)
    # Kafka's PEM key store: the private key and the certificate chain in one file.
    write_private(tls / "broker-keystore.pem", broker.key.read_text() + broker.cert.read_text() + ca.cert.read_text())
    users = passwords(state_dir)
    return Template(TEMPLATE_PATH.read_text()).substitute(
        tls_dir=tls,
        admin_password=users["admin"],
        plain_users=" ".join(f'user_{user}="{password}"' for user, password in users.items()),
    )


def scram_arguments(state_dir: Path) -> Iterator[str]:
    """`kafka-storage format` arguments adding every user's SCRAM credentials, one a line."""
    for user, password in passwords(state_dir).items():
        for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
            yield "--add-scram"
            yield f"{mechanism}=[name={user},password={password}]"


def security(state_dir: Path, user: str) -> Security:
    """How `user` connects to this broker."""
    tls = tls_dir(state_dir)
    return Security(
        protocol="SASL_SSL",
        sasl_mechanism=MECHANISM,
        sasl_username=user,
        sasl_password=passwords(state_dir)[user],
        ssl_cafile=str(tls / "ca.pem"),
        ssl_certfile=str(tls / f"{CLIENT_NAME}.pem"),
        ssl_keyfile=str(tls / f"{CLIENT_NAME}.key"),
    )


def client_env(state_dir: Path, bootstrap: str, user: str) -> dict[str, str]:
    """The EVALSTREAM_* settings that connect as `user`."""
    return {"EVALSTREAM_BOOTSTRAP": bootstrap, **security(state_dir, user).env()}


def env_path(state_dir: Path, user: str) -> Path:
    return state_dir / f"{user}.env"


def write_env_files(state_dir: Path, bootstrap: str) -> None:
    for user in USERS:
        env = client_env(state_dir, bootstrap, user)
        write_private(env_path(state_dir, user), "".join(f"{name}={value}\n" for name, value in env.items()))


def probe_context(state_dir: Path) -> ssl.SSLContext:
    """TLS as a client of this broker, with no user: enough for ApiVersions, which a SASL
    listener answers before authentication."""
    tls = tls_dir(state_dir)
    context = ssl.create_default_context(cafile=tls / "ca.pem")
    context.load_cert_chain(tls / f"{CLIENT_NAME}.pem", tls / f"{CLIENT_NAME}.key")
    return context


async def grant(state_dir: Path, bootstrap: str) -> None:
    """Create the ACLs of `GRANTS`, as admin; raises RuntimeError if the broker refuses one."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **security(state_dir, "admin").options())
    try:
        await bootstrapped(admin.start(), admin._client)
        node = admin._client.get_random_node()
        for user, resource, prefix, operation in GRANTS:
            request = CreateAclsRequest(resource, prefix, PREFIXED, f"User:{user}", "*", operation, ALLOW)
            response = await admin._client.send(node, request)
            for code, message in response.creation_responses:
                if code:
                    refused = f"{for_code(code).__name__} {message}"
                    raise RuntimeError(f"creating the ACL {user} {operation} {prefix}*: {refused}")
    finally:
        await admin.close()
