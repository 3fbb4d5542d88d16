"""``output.iceberg`` of the aggregation spec: a model of its own, so the spec (which the
Iceberg sink's room reads) does not import that room."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, field_validator

# Iceberg identifiers the REST spec and every catalog accept: no dots (a dot separates levels).
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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
