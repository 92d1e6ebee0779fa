"""Certificates for the local secured broker, made on the spot with openssl.

A certificate authority of its own (`authority`) signs the broker's certificate (for
127.0.0.1 and localhost, so that clients verify the host name) and one client certificate
(for mutual TLS). Keys are EC P-256 in PKCS#8 PEM, which both Python's ssl and Kafka's
PEM key stores read; nothing is encrypted, every key file is readable by its owner only.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

KEY_ALGORITHM = ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]
DAYS = "825"  # the longest validity macOS and browsers accept for a leaf certificate


class CertificateError(RuntimeError):
    """openssl is missing or failed."""


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path


def _openssl(*args: str) -> None:
    tool = shutil.which("openssl")
    if tool is None:
        raise CertificateError("`openssl` not found on PATH; install it, e.g. `apt-get install openssl`")
    done = subprocess.run([tool, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CertificateError(f"openssl {args[0]} failed: {done.stderr.strip()[-2000:]}")


def _key(path: Path) -> None:
    path.touch(mode=0o600)  # before openssl writes it: never readable by others, even briefly
    _openssl("genpkey", *KEY_ALGORITHM, "-out", str(path))


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def authority(directory: Path, name: str = "evalstream local CA") -> Issued:
    """A self-signed CA in `directory` (ca.pem, ca.key), made unless it is there."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = Issued(directory / "ca.pem", directory / "ca.key")
    if ca.cert.exists() and ca.key.exists():
        return ca
    _key(ca.key)
    _openssl(
        "req", "-x509", "-new", "-key", str(ca.key), "-sha256", "-days", "3650", "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-addext", "subjectKeyIdentifier=hash",
        "-out", str(ca.cert),
    )  # fmt: skip
    return ca


def issue(ca: Issued, directory: Path, name: str, *, hosts: tuple[str, ...] = ()) -> Issued:
    """A certificate for `name` (its CN) signed by `ca`, made unless it is there; with
    `hosts` (DNS names or IP addresses) it serves TLS for them, and it is always good for
    client authentication."""
    issued = Issued(directory / f"{name}.pem", directory / f"{name}.key")
    if issued.cert.exists() and issued.key.exists():
        return issued
    _key(issued.key)
    csr, extensions = directory / f"{name}.csr", directory / f"{name}.ext"
    names = ",".join(f"{'IP' if _is_address(host) else 'DNS'}:{host}" for host in hosts)
    usage = "serverAuth,clientAuth" if hosts else "clientAuth"
    lines = [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        f"extendedKeyUsage={usage}",
        "subjectKeyIdentifier=hash",
        "authorityKeyIdentifier=keyid",
        *([f"subjectAltName={names}"] if names else []),
    ]
    extensions.write_text("\n".join(lines) + "\n")
    try:
        _openssl("req", "-new", "-key", str(issued.key), "-subj", f"/CN={name}", "-out", str(csr))
        _openssl(
            "x509", "-req", "-in", str(csr), "-CA", str(ca.cert), "-CAkey", str(ca.key), "-set_serial",
            str(int.from_bytes(os.urandom(8), "big")), "-days", DAYS, "-sha256", "-extfile", str(extensions),
            "-out", str(issued.cert),
        )  # fmt: skip
    finally:
        csr.unlink(missing_ok=True)
        extensions.unlink(missing_ok=True)
    return issued
