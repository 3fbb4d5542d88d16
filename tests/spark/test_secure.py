"""The streaming job reads the bridge's committed output over SASL_SSL (SCRAM-SHA-512), with
the credentials the bridge itself is configured with (environment), never a command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from pyspark.sql import SparkSession

from devkit.kafka import LocalKafka
from devkit.kafka.security import create_acls
from spark_jobs.config import KafkaSource, StreamConfig, WindowSpec
from spark_jobs.security import security_options
from spark_jobs.stream import run_stream
from tests.spark.compare import assert_same_aggregates
from tests.spark.data import (
    WINDOW_MS,
    chunks,
    first_window_ms,
    make_events,
    produce_in_transactions,
)
from tests.spark.reference import aggregate
from tests.spark.tables import read_table
from tests.support.kafka import KafkaFixture

pytestmark = [pytest.mark.spark, pytest.mark.integration]

RSD = 0.05


def test_stream_job_reads_committed_output_over_sasl_ssl(
    spark: SparkSession, secure: LocalKafka, tmp_path: Path
) -> None:
    admin = KafkaFixture(secure.bootstrap)  # the super user's door, for the test's own setup
    topic = admin.create_topic(admin.unique("spark-secure"), partitions=2)
    batches = chunks(make_events(120, seed=5, t0_ms=first_window_ms()), 30)
    produce_in_transactions(admin, topic, batches, frozenset({2}))
    read, prefixed = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    allow = AclPermissionType.ALLOW
    user = "User:bridge"
    wanted = [
        (ResourceType.TOPIC, topic, read, AclOperation.READ),
        (ResourceType.TOPIC, topic, read, AclOperation.DESCRIBE),
        (ResourceType.GROUP, "spark-kafka-", prefixed, AclOperation.READ),
    ]
    create_acls(
        secure.bootstrap,
        [AclBinding(kind, name, pat, user, "*", op, allow) for kind, name, pat, op in wanted],
    )
    assert secure.security is not None
    client = secure.security.sasl_ssl_client()
    env = {
        "BRIDGE_SASL_USERNAME": client.pop("sasl.username"),
        "BRIDGE_SASL_PASSWORD": client.pop("sasl.password"),
        "BRIDGE_KAFKA": json.dumps(client),
    }
    options = security_options(env)
    assert options["kafka.security.protocol"] == "SASL_SSL"
    cfg = StreamConfig(
        source=KafkaSource(secure.sasl_bootstrap, topic, options=tuple(options.items())),
        table=str(tmp_path / "table"),
        checkpoint=str(tmp_path / "checkpoint"),
        window=WindowSpec("1 minute", "30 minutes", RSD),
    )
    run_stream(spark, cfg)
    committed = admin.read_all(topic)
    assert len(committed) == 90  # one of four transactions aborted
    assert_same_aggregates(
        read_table(spark, tmp_path / "table"), aggregate(committed, WINDOW_MS), RSD
    )
