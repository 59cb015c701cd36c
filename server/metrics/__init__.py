"""The controller's metrics, under Apache Kafka's names, served in Prometheus' text format.

A Kafka metric ``kafka.<domain>:type=<Type>,name=<Name>[,<tag>=<value>]`` is exported as
``kafka_<domain>_<type>_<name>{<tag>="<value>"}``, all lowercase, as the JMX exporter's usual
configuration (``lowercaseOutputName: true``) names it, so dashboards and alerts written for
Kafka find the same names. Gauges stay gauges; Kafka's meters (the ``...Rate`` and
``...PerSec`` names) become counters, whose name the exposition format ends in ``_total`` (a
rate is ``rate()`` of it); Kafka's histograms (``...Ms``) become histograms in milliseconds.
"""
