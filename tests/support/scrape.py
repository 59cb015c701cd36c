"""Reading a controller's Prometheus endpoint as a scraper does, and Kafka's MBean names in the
form the JMX exporter's usual Kafka configuration gives them."""

from __future__ import annotations

import re
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def jmx_exporter_name(mbean: str) -> str:
    """The rule ``kafka.(\\w+)<type=(.+), name=(.+)><>Value`` -> ``kafka_$1_$2_$3`` with
    ``lowercaseOutputName: true``, and characters a Prometheus name cannot hold as underscores."""
    domain, keys = mbean.split(":", 1)
    parts = dict(kv.split("=", 1) for kv in keys.split(","))
    name = f"{domain.replace('.', '_')}_{parts['type']}_{parts['name']}".lower()
    return re.sub(r"_+", "_", re.sub(r"[^a-z0-9_:]", "_", name))


KC = jmx_exporter_name("kafka.controller:type=KafkaController,name=X")[:-1]


def scrape(port: int) -> Samples:
    """Every sample of http://127.0.0.1:``port``/metrics, by name and labels."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def gauge(samples: Samples, name: str) -> float:
    """A KafkaController gauge by its MBean name (``MetadataLag``)."""
    return samples[(KC + name.lower(), ())]
