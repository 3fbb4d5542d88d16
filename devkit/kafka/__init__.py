"""A real local Apache Kafka (KRaft) for the demo, the tests and the bench.

Jars come from Maven Central through the bundled ``pom.xml`` (see :mod:`devkit.kafka.jars`);
brokers run as plain ``java kafka.Kafka`` processes on free loopback ports
(see :mod:`devkit.kafka.cluster`). Dev-only: tests, the bench, the demo and ``python -m
devkit.kafka`` use it; the service never imports it.
"""

from devkit.kafka.cluster import BrokerProcess, LocalKafka, LocalKafkaError
from devkit.kafka.jars import EnvironmentProblem, ensure_kafka_jars

__all__ = [
    "BrokerProcess",
    "EnvironmentProblem",
    "LocalKafka",
    "LocalKafkaError",
    "ensure_kafka_jars",
]
