"""A server writing its own traffic as pcapng (`python -m server --capture-file PATH`).

Each accepted connection becomes one synthetic TCP connection of the capture, between the
real peer address and the listening address, so that the file reads like a tcpdump of the
server's port: bytes as received, answers as sent, timestamps when that happened.
"""
from __future__ import annotations

import itertools
import os
from typing import Union

from captures import pcapng_writer

# Stands in for a peer whose address the transport does not give (a socket of another family).
_UNKNOWN_HOST = "192.0.2.1"


class ConnectionCapture:
    """The capture of one accepted connection; calls after the file closed are ignored."""

    def __init__(self, owner: ServerCapture) -> None:
        self._owner = owner
        self._conn: pcapng_writer.Connection | None = None

    def connected(self, peer: tuple | None, local: tuple | None) -> None:
        """The transport is up: `peer` and `local` are socket addresses, or None if unknown."""
        self._conn = self._owner._open(self, _endpoint(peer, self._owner), _endpoint(local, self._owner))

    def client_to_server(self, data: bytes) -> None:
        if self._conn is not None and self._owner.open:
            self._conn.client_to_server(data)

    def server_to_client(self, data: bytes) -> None:
        if self._conn is not None and self._owner.open:
            self._conn.server_to_client(data)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and self._owner.open:
            conn.close()
            self._owner._live.pop(self, None)


class ServerCapture:
    """Owns the capture file; `connection` is the listener's capture factory."""

    def __init__(self, path: Union[str, "os.PathLike[str]"]) -> None:
        self._writer = pcapng_writer.open(path)
        self._live: dict[ConnectionCapture, None] = {}
        self._ports = itertools.count(1)
        self.open = True

    def connection(self) -> ConnectionCapture:
        return ConnectionCapture(self)

    def _open(self, capture: ConnectionCapture, client: tuple[str, int],
              server: tuple[str, int]) -> pcapng_writer.Connection | None:
        if not self.open:
            return None
        self._live[capture] = None
        return self._writer.connection(client, server)

    def close(self) -> None:
        """End the connections still open (with a FIN, as at shutdown) and close the file."""
        if not self.open:
            return
        for capture in list(self._live):
            capture.close()
        self.open = False
        self._writer.close()

    def _unknown_port(self) -> int:
        return 1 + next(self._ports) % 65535


def _endpoint(address: tuple | None, owner: ServerCapture) -> tuple[str, int]:
    if isinstance(address, tuple) and len(address) >= 2 and isinstance(address[0], str):
        return address[0].split("%", 1)[0], int(address[1])  # an IPv6 scope would not parse as an address
    return _UNKNOWN_HOST, owner._unknown_port()
