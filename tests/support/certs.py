"""Certificates made for one test run: a CA, a server certificate for 127.0.0.1, client
certificates (one from the CA, one self-signed that the server does not trust)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Pki:
    ca: Path  # the CA certificate (the truststore)
    server: Path  # key and chain in one PEM file (the keystore)
    server_key: Path
    server_cert: Path
    client_key: Path
    client_cert: Path
    stranger_key: Path  # a client whose certificate no trusted CA signed
    stranger_cert: Path


def _name(cn: str, org: str = "kraftwire-test") -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, org), x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(subject: x509.Name, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
          issuer_key: ec.EllipticCurvePrivateKey, ca: bool = False, ip: str | None = None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ip is not None:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address(ip)), x509.DNSName("localhost")]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(path: Path, *parts: bytes) -> Path:
    path.write_bytes(b"".join(parts))
    return path


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("kraftwire test CA")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    pem = serialization.Encoding.PEM
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _cert(_name("controller"), server_key, ca_name, ca_key, ip="127.0.0.1")
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _cert(_name("broker-1"), client_key, ca_name, ca_key)
    stranger_key = ec.generate_private_key(ec.SECP256R1())
    stranger = _cert(_name("stranger"), stranger_key, _name("stranger"), stranger_key)
    return Pki(
        ca=_write(directory / "ca.pem", ca.public_bytes(pem)),
        server=_write(directory / "server.pem", _key_pem(server_key), server.public_bytes(pem)),
        server_key=_write(directory / "server.key", _key_pem(server_key)),
        server_cert=_write(directory / "server.crt", server.public_bytes(pem)),
        client_key=_write(directory / "client.key", _key_pem(client_key)),
        client_cert=_write(directory / "client.crt", client.public_bytes(pem)),
        stranger_key=_write(directory / "stranger.key", _key_pem(stranger_key)),
        stranger_cert=_write(directory / "stranger.crt", stranger.public_bytes(pem)),
    )
