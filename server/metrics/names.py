"""Kafka's metric names and their Prometheus form (see the package docstring)."""

from __future__ import annotations


def prometheus_name(domain: str, type_: str, name: str) -> str:
    """``kafka.<domain>:type=<type_>,name=<name>`` as a Prometheus metric name, lowercased as
    the JMX exporter's usual configuration (``lowercaseOutputName: true``) writes it."""
    return f"kafka_{domain}_{type_}_{name}".lower()


def controller(name: str) -> str:
    return prometheus_name("controller", "KafkaController", name)


def event_manager(name: str) -> str:
    return prometheus_name("controller", "ControllerEventManager", name)


def request_metrics(name: str) -> str:
    return prometheus_name("network", "RequestMetrics", name)


def raft(name: str) -> str:
    """``kafka.server:type=raft-metrics``'s attributes (``current-leader``, ...), with the
    dashes Prometheus names cannot hold turned into underscores."""
    return prometheus_name("server", "raft_metrics", name.replace("-", "_"))
