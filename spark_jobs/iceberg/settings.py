"""The target ``output.iceberg`` of the aggregation spec resolves to."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from spark_jobs.iceberg_output import IcebergOutput

# Catalog credentials come from the environment (the chart maps a Secret to them), never from
# the spec, which lives in a ConfigMap.
TOKEN_ENV = "ICEBERG_CATALOG_TOKEN"
CREDENTIAL_ENV = "ICEBERG_CATALOG_CREDENTIAL"  # OAuth2 client credentials, "id:secret"


@dataclass(slots=True, frozen=True)
class IcebergTarget:
    """Where one job's results go: the catalog's pyiceberg properties and the table."""

    namespace: str
    table: str
    properties: tuple[tuple[str, str], ...] = field(repr=False)  # may hold a token

    @property
    def identifier(self) -> str:
        return f"{self.namespace}.{self.table}"

    @property
    def where(self) -> str:
        """The catalog and table, for messages (no credentials)."""
        uri = dict(self.properties).get("uri", "")
        return f"output.iceberg {self.identifier} (catalog {uri})"

    @classmethod
    def of(cls, out: IcebergOutput, env: Mapping[str, str] | None = None) -> IcebergTarget:
        """The target of ``out``; credentials from ``env`` (default: the process's)."""
        env = os.environ if env is None else env
        props = {"name": out.catalog}
        if out.uri is None:
            root = os.path.abspath((out.warehouse or "iceberg-warehouse").removeprefix("file://"))
            props.update(type="sql", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}")
        else:
            props.update(type="rest", uri=out.uri)
            if out.warehouse is not None:
                props["warehouse"] = out.warehouse
            for var, key in ((TOKEN_ENV, "token"), (CREDENTIAL_ENV, "credential")):
                if env.get(var):
                    props[key] = env[var]
        return cls(out.namespace, out.table, tuple(props.items()))
