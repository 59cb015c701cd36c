"""The one failure every SASL mechanism reports."""


class AuthenticationFailed(Exception):
    """The client could not prove who it is; the message is safe to send back to it."""
