"""A private certificate authority for TLS tests, made by the `openssl` command.

What a deployment behind a TLS terminator has: its own CA (which no system store trusts) and a
server certificate it signed, for the names the server is reached by. `serving(certs)` is the
server side as `PageServer(tls=...)` takes it.
"""

from __future__ import annotations

import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.host_tools import require


@dataclass(frozen=True)
class Certs:
    ca: Path
    """The CA's certificate (PEM): what `--ca-cert` or SSL_CERT_FILE is given."""
    cert: Path
    key: Path


def make_private_ca(
    where: Path, *, names: tuple[str, ...] = ("localhost",), ips: tuple[str, ...] = ("127.0.0.1",)
) -> Certs:
    """A CA and a server certificate it signed for `names` and `ips`, valid for a day."""
    openssl = require("openssl", why="makes the test CA and certificates")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True, timeout=60)

    ca_key, ca, key, csr, cert = (
        where / n for n in ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem")
    )
    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        str(ca_key),
        "-out",
        str(ca),
        "-days",
        "1",
        "-subj",
        "/CN=vtop test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    )
    run(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        str(key),
        "-out",
        str(csr),
        "-subj",
        f"/CN={names[0]}",
    )
    san = ",".join([f"DNS:{n}" for n in names] + [f"IP:{ip}" for ip in ips])
    ext = where / "server.ext"
    ext.write_text(f"subjectAltName={san}\nextendedKeyUsage=serverAuth\n")
    run(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-out",
        str(cert),
        "-days",
        "1",
        "-extfile",
        str(ext),
    )
    return Certs(ca, cert, key)


def hashed_dir(certs: Certs, where: Path) -> Path:
    """A directory holding the CA as OpenSSL's hashed lookup wants it (`<hash>.0`), what
    `openssl rehash` makes and SSL_CERT_DIR names."""
    openssl = require("openssl", why="hashes the test CA")
    digest = subprocess.run(
        [openssl, "x509", "-hash", "-noout", "-in", str(certs.ca)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    where.mkdir(parents=True, exist_ok=True)
    (where / f"{digest}.0").write_bytes(certs.ca.read_bytes())
    return where


def serving(certs: Certs) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.cert, certs.key)
    return context
