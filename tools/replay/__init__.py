"""Reading captured Kafka traffic, layer by layer, and judging it.

capture (pcap/pcapng files -> packets) -> packet (link/IP/TCP headers -> segments) ->
tcp (segments -> per-direction byte streams with sized gaps) -> framing (streams -> Kafka
frames); `streams` chains the first three. The declarative layouts and the pcapng writer
live in the `captures` package, shared with the controller's `--capture-file`.

flows (which connections are Kafka, who is the client, the frames of each) -> decode (one
row per frame, requests matched to responses, decoded with the generated codecs) judged by
`rules`, with `walk` looking inside decoded messages. `job` runs that as a Spark job (tables
in `schema`, figures in `summary`, rendered by `report`); `send` re-sends a capture's
requests to a live server. `python -m tools.replay` is the command line.
"""
