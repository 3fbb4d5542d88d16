"""One local SparkSession for all Spark tests: starting Spark costs ~20 s on two cores."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from spark_jobs.session import build_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session("eos-bridge-tests")
    try:
        yield session
    finally:
        session.stop()
