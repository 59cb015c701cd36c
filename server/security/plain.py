"""SASL PLAIN (RFC 4616) with the users a listener's JAAS configuration lists, as Kafka's
PlainLoginModule reads them (``user_<name>="<password>"`` options)."""

from __future__ import annotations

import hmac
import re

from server.security.errors import AuthenticationFailed

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"

_JAAS = re.compile(r"\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)"
                   r"(?P<options>(?:\s+[\w.]+\s*=\s*(?:\"(?:[^\"\\]|\\.)*\"|[^\s;\"]+))*)\s*;\s*$")
_OPTION = re.compile(r"([\w.]+)\s*=\s*(?:\"((?:[^\"\\]|\\.)*)\"|([^\s;\"]+))")


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """The login module and its options of a ``sasl.jaas.config`` value; ValueError with the
    reason when it is not one JAAS login module entry."""
    match = _JAAS.match(text)
    if match is None:
        raise ValueError('expected one entry such as: <LoginModule> required key="value" ...;')
    options = {m[1]: m[2].replace('\\"', '"').replace("\\\\", "\\") if m[2] is not None else m[3]
               for m in _OPTION.finditer(match["options"])}
    return match["module"], options


def plain_users(options: dict[str, str]) -> dict[str, str]:
    return {key[len("user_"):]: value for key, value in options.items() if key.startswith("user_")}


class PlainServer:
    def __init__(self, users: dict[str, str]) -> None:
        self.users = users
        self.username = ""
        self.complete = False
        self.token_authenticated = False  # PLAIN has no token logins

    def respond(self, message: bytes) -> bytes:
        if self.complete:
            raise AuthenticationFailed("unexpected PLAIN message after the exchange ended")
        parts = message.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, username, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not username or not password:
            raise AuthenticationFailed("Authentication failed: username or password not specified")
        self.username = username  # who tried, for the log; ``complete`` says whether it worked
        expected = self.users.get(username)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id "
                                       "that is different from username")
        self.complete = True
        return b""
