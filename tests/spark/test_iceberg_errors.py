"""Issue 58, acceptance 5: a catalog that cannot be reached ends the job with exit 3, an unknown
namespace, refused credentials and a bad table name with exit 2; each in one line, no
traceback, before Spark starts."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from pyiceberg.exceptions import UnauthorizedError

from devkit.iceberg.server import LocalRestCatalog
from spark_jobs.errors import JobConfigError
from spark_jobs.iceberg.catalog import catalog_error
from spark_jobs.iceberg.settings import IcebergTarget
from spark_jobs.iceberg_output import IcebergOutput
from tests.spark.test_job_errors import _job, _spec, assert_one_line

pytestmark = pytest.mark.spark


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends


def _run(tmp_path: Path, iceberg: dict[str, str]) -> tuple[int, str]:
    spec = _spec(tmp_path, "t", output={"iceberg": iceberg})
    return _job(tmp_path, "--bootstrap", "b:9092", "--spec", spec, "--table", str(tmp_path / "t"))


def test_an_unreachable_catalog_exits_3_in_one_line(tmp_path: Path) -> None:
    uri = f"http://127.0.0.1:{_closed_port()}"
    code, stderr = _run(tmp_path, {"uri": uri, "namespace": "eos", "table": "totals"})
    assert code == 3, stderr
    assert_one_line(
        stderr, f"output.iceberg eos.totals (catalog {uri}): the catalog is unreachable"
    )


def test_an_unknown_namespace_exits_2_in_one_line(
    tmp_path: Path, rest_catalog: LocalRestCatalog
) -> None:
    iceberg = {"uri": rest_catalog.uri, "namespace": "nowhere", "table": "totals"}
    code, stderr = _run(tmp_path, iceberg)
    assert code == 2, stderr
    assert_one_line(stderr, "namespace 'nowhere' does not exist")


def test_a_bad_table_name_exits_2_in_one_line(tmp_path: Path) -> None:
    iceberg = {"uri": "http://127.0.0.1:1", "namespace": "eos", "table": "my.totals"}
    code, stderr = _run(tmp_path, iceberg)
    assert code == 2, stderr
    assert_one_line(stderr, "'my.totals' is not an Iceberg identifier")


def test_refused_credentials_are_the_users_mistake() -> None:
    # The REST fixture server accepts any credentials, so the refusal is the catalog's answer
    # as pyiceberg raises it.
    target = IcebergTarget.of(
        IcebergOutput(uri="http://c", namespace="eos", table="t"), {"ICEBERG_CATALOG_TOKEN": "x"}
    )
    assert ("token", "x") in target.properties and "x" not in repr(target)
    error = catalog_error(target, UnauthorizedError("Not authorized"))
    assert isinstance(error, JobConfigError)
    assert "refuses the credentials" in str(error) and "\n" not in str(error)
