"""A self-signed certificate for the loopback provider's TLS listener (127.0.0.1 only).

Why: the ``google-genai`` SDK's Live client cannot reach a plain-HTTP loopback. With an
API key it rewrites the base URL's scheme to ``wss`` (``_api_client._websocket_base_url``),
and in every mode it hands ``websockets`` an SSL context, which ``websockets`` refuses for
a ``ws://`` address ("ssl argument is incompatible with a ws:// URI"). So the loopback
listens with TLS as well (:meth:`callsafe.loopback.server.LoopbackServer.tls_base_url`),
with a certificate made here for ``127.0.0.1`` and trusted by the program through
``SSL_CERT_FILE``, which the SDK reads for its WebSocket's SSL context. The key and
certificate are made by the maintained ``cryptography`` library (imported only when TLS is
asked for), live in a private temporary directory, and are never the process's: nothing
but the loopback presents them.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LoopbackCertificate", "make_certificate"]


@dataclass(frozen=True)
class LoopbackCertificate:
    """Where the PEM files are: ``certfile`` is also the trust anchor a client loads."""

    certfile: Path
    keyfile: Path


def make_certificate(host: str = "127.0.0.1") -> LoopbackCertificate:
    """A fresh key and a self-signed certificate for ``host`` (an IP address), valid for a
    day, its own certificate authority (so that a client can trust exactly it)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "callsafe loopback")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder = Path(tempfile.mkdtemp(prefix="callsafe-tls-"))
    certfile, keyfile = folder / "loopback.pem", folder / "loopback.key"
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    os.chmod(keyfile, 0o600)
    return LoopbackCertificate(certfile, keyfile)
