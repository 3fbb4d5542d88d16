"""Before any query starts: the broker answers and every input topic exists.

Spark's Kafka source would otherwise fail deep inside a query (pages of Java stack traces) or
wait. The check uses the Java admin client on the driver with the job's own ``kafka.*``
options (security included), so it sees what the source will see. Errors are told apart by
the Java exception class, never by message text.
"""

from __future__ import annotations

import logging

from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
from pyspark.sql import SparkSession

from spark_jobs.config import KafkaSource
from spark_jobs.errors import InfrastructureError, JobConfigError
from spark_jobs.failures import first_line, java_causes

log = logging.getLogger("spark_jobs.preflight")

TIMEOUT_S = 30
_CONFIG = "org.apache.kafka.common.config.ConfigException"
_UNKNOWN_TOPIC = "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"


def check_topics(spark: SparkSession, source: KafkaSource, timeout_s: int = TIMEOUT_S) -> None:
    """Raise :class:`InfrastructureError` unless every topic of ``source`` is on the broker."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    props = jvm.java.util.Properties()
    props.put("bootstrap.servers", source.bootstrap)
    props.put("default.api.timeout.ms", str(timeout_s * 1000))
    props.put("request.timeout.ms", str(timeout_s * 1000))
    for key, value in source.options:
        props.put(key.removeprefix("kafka."), value)
    topics = source.topic_names
    names = jvm.java.util.ArrayList()
    for topic in topics:
        names.add(topic)
    admin = None
    try:
        admin = jvm.org.apache.kafka.clients.admin.Admin.create(props)
        seconds = jvm.java.util.concurrent.TimeUnit.SECONDS
        admin.describeTopics(names).allTopicNames().get(timeout_s + 5, seconds)
    except Py4JJavaError as exc:
        log.debug("topic check failed", exc_info=True)
        causes = java_causes(exc)
        if _UNKNOWN_TOPIC in causes:
            raise InfrastructureError(
                f"--topic {source.topic}: no such topic on {source.bootstrap} (create it, or "
                "start the bridge that writes it)"
            ) from None
        if _CONFIG in causes:
            # Kafka's own check of the settings (an unresolvable bootstrap host, conflicting
            # timeouts): a setting to fix, named in the client's one-line message.
            raise JobConfigError(
                f"--bootstrap {source.bootstrap} / --kafka-option: the Kafka client refuses "
                f"its settings: {first_line(exc)}"
            ) from None
        raise InfrastructureError(
            f"--bootstrap {source.bootstrap}: no broker answered within {timeout_s} s "
            f"({causes[-1].rsplit('.', 1)[-1]})"
        ) from None
    finally:
        if admin is not None:
            admin.close(jvm.java.time.Duration.ofSeconds(5))
