"""A test broker for kraftwire: the KRaft broker's side of the controller protocol.

One process runs one broker or a fleet of them on one event loop. Each broker registers,
heartbeats, follows fencing and performs controlled shutdown; the process fetches the
metadata log once as an observer and replays it into one shared image with the controller's
own replay code; brokers that lead partitions in that image simulate their followers and
report ISR changes with AlterPartition. Each broker serves clients on its advertised listener
from that image and forwards their admin requests to the controller (client_api, forwarder).
"""
