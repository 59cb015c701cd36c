"""TLS server contexts from PEM keystores and truststores (``ssl.keystore.type=PEM``), and the
principal a client certificate maps to (``ssl.principal.mapping.rules``)."""

from __future__ import annotations

import re
import ssl
import tempfile
from dataclasses import dataclass
from typing import Any

from server.settings import default

# The attribute keywords Java's X500Principal writes in RFC 2253 names.
_KEYWORDS = {"commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
             "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
             "domainComponent": "DC", "userId": "UID"}


@dataclass(frozen=True)
class TlsSettings:
    keystore_location: str | None = None
    keystore_key: str | None = None  # PEM text of the private key
    keystore_certificate_chain: str | None = None  # PEM text of the certificate chain
    key_password: str | None = None
    truststore_location: str | None = None
    truststore_certificates: str | None = None  # PEM text
    client_auth: str = default("ssl.client.auth")  # required, requested or none


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """An SSLContext for a listener; ssl.SSLError or OSError when the stores cannot be used."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if not load_keystore(context, settings):
        raise ValueError("a TLS listener needs ssl.keystore.location or ssl.keystore.key and "
                         "ssl.keystore.certificate.chain")
    if settings.truststore_location is not None:
        context.load_verify_locations(cafile=settings.truststore_location)
    elif settings.truststore_certificates is not None:
        context.load_verify_locations(cadata=settings.truststore_certificates)
    context.verify_mode = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL}.get(
        settings.client_auth, ssl.CERT_NONE)
    return context


def load_keystore(context: ssl.SSLContext, settings: TlsSettings) -> bool:
    """Present the keystore's certificate (a listener's, or a client's where the server asks
    for one); False when the settings name no keystore."""
    if settings.keystore_location is not None:
        # A PEM keystore file holds the private key and the certificate chain together.
        context.load_cert_chain(settings.keystore_location, password=settings.key_password)
    elif settings.keystore_key is not None and settings.keystore_certificate_chain is not None:
        # ssl reads keys only from files: the PEM text goes through a private temporary file.
        with tempfile.NamedTemporaryFile("w", suffix=".pem") as pem:
            pem.write(settings.keystore_key.strip() + "\n" + settings.keystore_certificate_chain.strip() + "\n")
            pem.flush()
            context.load_cert_chain(pem.name, password=settings.key_password)
    else:
        return False
    return True


def distinguished_name(peer_certificate: dict[str, Any]) -> str:
    """The subject as Java's X500Principal.getName() writes it: RFC 2253, last RDN first."""
    rdns = []
    for rdn in reversed(peer_certificate.get("subject", ())):
        rdns.append("+".join(f"{_KEYWORDS.get(key, key)}={_escape(value)}" for key, value in rdn))
    return ",".join(rdns)


def _escape(value: str) -> str:
    out = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    return out[:-1] + "\\ " if out.endswith(" ") else out


@dataclass(frozen=True)
class MappingRule:
    pattern: re.Pattern[str] | None  # None: DEFAULT, the name as it is
    replacement: str = ""
    case: str = ""  # "L" lower-cases, "U" upper-cases the result


_RULE = re.compile(r"\s*RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?)\s*(?:,|$)|\s*DEFAULT\s*(?:,|$)")


def parse_mapping_rules(text: str) -> list[MappingRule]:
    """Kafka's ``RULE:pattern/replacement/[LU]`` list, ``DEFAULT`` among them; ValueError with
    the offending part otherwise."""
    rules: list[MappingRule] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _RULE.match(text, pos)
        if match is None:
            raise ValueError(f"cannot read the rule at {text[pos:]!r}")
        if match[1] is None:
            rules.append(MappingRule(None))
        else:
            try:
                pattern = re.compile(match[1].replace("\\/", "/"))
            except re.error as exc:
                raise ValueError(f"bad pattern {match[1]!r}: {exc}") from None
            # Java writes group references as $1; Python's re wants \1.
            replacement = re.sub(r"\$(\d)", r"\\\1", match[2].replace("\\/", "/"))
            rules.append(MappingRule(pattern, replacement, match[3]))
        pos = match.end()
    return rules or [MappingRule(None)]


def map_principal_name(dn: str, rules: list[MappingRule]) -> str:
    """The user name the first matching rule makes of a certificate's distinguished name."""
    for rule in rules:
        if rule.pattern is None:
            return dn
        match = rule.pattern.fullmatch(dn)
        if match is None:
            continue
        name = match.expand(rule.replacement)
        return name.lower() if rule.case == "L" else name.upper() if rule.case == "U" else name
    return dn
