"""Authentication and authorization: TLS contexts, SASL mechanisms, principals and ACLs.

Everything here is free of sockets and of the event loop, so each piece is a function of its
inputs that tests can call directly; server/network.py and server/apis.py wire them in.
"""
