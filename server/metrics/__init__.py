"""The controller's metrics, under Apache Kafka's names, served in Prometheus' text format.

A Kafka metric ``kafka.<domain>:type=<Type>,name=<Name>[,<tag>=<value>]`` is exported as
``kafka_<domain>_<Type>_<Name>{<tag>="<value>"}``, the case of Kafka's names kept. Gauges stay
gauges; Kafka's meters (the ``...Rate`` and ``...PerSec`` names) become counters, whose name
the exposition format ends in ``_total`` (a rate is ``rate()`` of it); Kafka's histograms
(``...Ms``) become histograms in milliseconds.
"""
