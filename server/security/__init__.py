"""Authentication and authorization: TLS contexts, SASL mechanisms, principals and ACLs.

The mechanisms, principals and ACLs are functions of their inputs, free of sockets and of the
event loop, so tests call them directly. Two pieces touch the world: ``tls`` reads the PEM
files a listener names when it builds its context, and ``login`` serves SaslHandshake and
SaslAuthenticate on a connection (it closes a failed one on the event loop, after the answer
went out). server/network.py and server/apis.py wire them in.
"""
