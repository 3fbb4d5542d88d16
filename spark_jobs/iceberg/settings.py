"""``output.iceberg`` of the aggregation spec, and the target it resolves to."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, field_validator

# Iceberg identifiers the REST spec and every catalog accept: no dots (a dot separates levels).
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Catalog credentials come from the environment (the chart maps a Secret to them), never from
# the spec, which lives in a ConfigMap.
TOKEN_ENV = "ICEBERG_CATALOG_TOKEN"
CREDENTIAL_ENV = "ICEBERG_CATALOG_CREDENTIAL"  # OAuth2 client credentials, "id:secret"


class IcebergOutput(BaseModel):
    """The results also go to an Iceberg table, one catalog commit per micro-batch.

    ``uri`` is a REST catalog (``http://...``); without it the table lives in an embedded SQL
    catalog (SQLite) under ``warehouse``, for local runs.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    namespace: str
    table: str
    uri: str | None = None
    warehouse: str | None = None  # REST: the catalog's default; embedded: required
    catalog: str = "default"  # the catalog's name, in pyiceberg's sense

    @field_validator("namespace", "table")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not _IDENT.match(value):
            raise ValueError(f"{value!r} is not an Iceberg identifier (letters, digits, _)")
        return value

    @field_validator("warehouse")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty (leave it out for the default)")
        return value


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
