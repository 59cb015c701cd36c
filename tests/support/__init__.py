"""Helpers shared by test modules: controllers and clusters built in-process, wire clients and
their checks. Test modules import from here, never from one another or from a conftest.py
(which holds fixtures and pytest hooks only). Waiting is ``tools.processes.poll``, a free port
``tools.processes.free_port``, the controller process ``tools.controller_process``.

In-process controllers: harness (one QuorumController and its journal), replication (a
cluster of brokers and topics on one), record_families, security (ACL and SCRAM control).
Processes and their data: processes (the test broker, a controller on a Kafka directory),
metalog (log directories, snapshots, a KRaft observer), kafka_data (an independent reader of
Kafka's metadata directories), shared_data (where the reference data lives).
The wire: wire (requests as a broker sends them, raw sockets), kafka_python_wire and envelope
(kafka-python's codecs), secured_clients and certs (TLS and SASL), quorum (several voters),
observe (what the controller says of brokers and partitions), scrape (its Prometheus endpoint),
clients (the client matrix's cluster).
Schemas: schema_corpus (the project's and Kafka's schemas, generated trees) and
message_strategies (Hypothesis values for any message).
"""
