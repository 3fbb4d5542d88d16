"""One local SparkSession for all Spark tests (starting Spark costs ~20 s on two cores), and a
standalone cluster for the tests that run the jobs on one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from devkit.iceberg.server import LocalRestCatalog
from spark_jobs.session import build_session
from tests.spark.standalone import StandaloneCluster


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session("eos-bridge-tests")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A Spark standalone master and two one-core workers on loopback; daemon logs, worker
    directories and executor logs stay in the test's temp directory."""
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"))
    try:
        cluster.start(workers=2)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def rest_catalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRestCatalog]:
    """Apache Iceberg's REST catalog fixture server on loopback, its warehouse in a temp dir."""
    with LocalRestCatalog(tmp_path_factory.mktemp("iceberg-rest")) as catalog:
        yield catalog
