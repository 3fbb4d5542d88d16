"""Reading the jobs' Iceberg tables as a user would: pyiceberg scans through the catalog, never
through the job's own writer."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.table import Table

from spark_jobs.iceberg.sink import BATCH_PROPERTY, COMMIT_PROPERTY, QUERY_PROPERTY
from spark_jobs.spec import AggregationSpec

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def rest_reader(uri: str) -> Catalog:
    """A pyiceberg client of the REST catalog at ``uri`` (the reader, not the writer)."""
    return load_catalog("reader", type="rest", uri=uri)


def iceberg_rows(table: Table, spec: AggregationSpec) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The table as merge key → other columns, times in epoch ms; a duplicate key fails."""
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    for values in table.scan().to_arrow().to_pylist():
        for column, value in values.items():
            if isinstance(value, datetime):
                values[column] = (value - _EPOCH) // timedelta(milliseconds=1)
        key = tuple(values.pop(k) for k in spec.merge_keys)
        assert key not in rows, f"duplicate row for {key}"
        rows[key] = values
    return rows


def batch_commits(table: Table) -> Counter[tuple[str, int]]:
    """(query id, batch id) → how many catalog commits carried it, over the main history.

    One commit may make several snapshots (an upsert deletes, then appends); they share the
    commit's ``eosbridge.commit`` id, so commits are counted, not snapshots."""
    commits: dict[str, tuple[str, int]] = {}
    snapshot = table.current_snapshot()
    while snapshot is not None:
        props = snapshot.summary.additional_properties if snapshot.summary else {}
        if COMMIT_PROPERTY in props:
            commits[props[COMMIT_PROPERTY]] = (props[QUERY_PROPERTY], int(props[BATCH_PROPERTY]))
        parent = snapshot.parent_snapshot_id
        snapshot = None if parent is None else table.snapshot_by_id(parent)
    return Counter(commits.values())
