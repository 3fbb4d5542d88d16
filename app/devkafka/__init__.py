"""A real local Apache Kafka (KRaft) for the demo, the tests and the bench.

Jars come from Maven Central through the bundled ``pom.xml`` (see :mod:`app.devkafka.jars`);
brokers run as plain ``java kafka.Kafka`` processes on free loopback ports
(see :mod:`app.devkafka.cluster`); :mod:`app.devkafka.topics` has the small admin, seeding and
read-to-end helpers that tests, ``verify`` and the bench share.
"""

from app.devkafka.cluster import BrokerProcess, LocalKafka, LocalKafkaError
from app.devkafka.jars import EnvironmentProblem, ensure_kafka_jars

__all__ = [
    "BrokerProcess",
    "EnvironmentProblem",
    "LocalKafka",
    "LocalKafkaError",
    "ensure_kafka_jars",
]
