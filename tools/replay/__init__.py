"""Reading captured Kafka traffic, layer by layer.

capture (pcap/pcapng files -> packets) -> packet (link/IP/TCP headers -> segments) ->
tcp (segments -> per-direction byte streams with sized gaps) -> framing (streams -> Kafka
frames); `streams` chains the first three. `formats` holds the declarative layouts and
`pcapng_writer` writes captures of synthesised connections.
"""
