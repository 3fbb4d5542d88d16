"""Opening the job's Iceberg catalog, and the one mapping of catalog errors to exit codes.

A REST catalog that cannot be reached is :class:`InfrastructureError` (exit 3: a restart may
find it up); a refusal that is the user's to fix (credentials, an unknown namespace) is
:class:`JobConfigError` (exit 2). Both in one line naming ``output.iceberg``.
"""

from __future__ import annotations

from pathlib import Path

import requests
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import (
    ForbiddenError,
    NoSuchNamespaceError,
    OAuthError,
    RESTError,
    ServerError,
    ServiceUnavailableError,
    UnauthorizedError,
)

from spark_jobs.errors import InfrastructureError, JobConfigError
from spark_jobs.iceberg.settings import IcebergTarget

_REFUSED = (UnauthorizedError, ForbiddenError, OAuthError)
_UNREACHABLE = (requests.ConnectionError, requests.Timeout, ServerError, ServiceUnavailableError)


def open_catalog(target: IcebergTarget) -> Catalog:
    """The target's catalog, its namespace checked (the embedded catalog creates its own)."""
    props = dict(target.properties)
    name = props.pop("name")
    try:
        if props["type"] == "sql":
            Path(props["warehouse"].removeprefix("file://")).mkdir(parents=True, exist_ok=True)
            catalog = load_catalog(name, **props)
            catalog.create_namespace_if_not_exists(target.namespace)
        else:
            catalog = load_catalog(name, **props)
            catalog.load_namespace_properties(target.namespace)
    except BaseException as exc:
        raise catalog_error(target, exc) from None
    return catalog


def catalog_error(target: IcebergTarget, exc: BaseException) -> BaseException:
    """The job's error for a catalog call that raised ``exc`` (itself when not the catalog's)."""
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, NoSuchNamespaceError):
        return JobConfigError(
            f"{target.where}: namespace {target.namespace!r} does not exist; create it first"
        )
    if isinstance(exc, _REFUSED):
        return JobConfigError(
            f"{target.where}: the catalog refuses the credentials ({type(exc).__name__}); "
            "check ICEBERG_CATALOG_TOKEN / ICEBERG_CATALOG_CREDENTIAL"
        )
    if isinstance(exc, _UNREACHABLE):
        # requests' own text nests its causes ("Caused by ..."): its class says enough.
        return InfrastructureError(
            f"{target.where}: the catalog is unreachable ({type(exc).__name__})"
        )
    if isinstance(exc, RESTError):
        return JobConfigError(f"{target.where}: the catalog refuses the request ({_short(detail)})")
    return exc


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
