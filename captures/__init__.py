"""Capture files: the pcap and pcapng layouts (with the link, IP and TCP headers inside them)
and a pcapng writer of synthesised TCP connections.

Both sides use them: the server records its own traffic, and ``tools.replay`` reads and
writes captures. They sit below both so that neither imports the other.
"""
