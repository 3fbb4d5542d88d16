"""One Iceberg commit per micro-batch, never two: the batch id lives in the snapshot summary.

Each micro-batch's rows (absolute values from the streaming state, keyed by the merge keys)
replace the rows of their groups in one catalog transaction whose snapshots carry
``eosbridge.query`` (the streaming query's id, kept in Spark's checkpoint),
``eosbridge.batch`` (the micro-batch id) and ``eosbridge.commit`` (a fresh id per commit).
Before committing, the table's snapshot history is searched for the (query, batch) pair: a
batch that Spark replays after a crash that came after its commit is found there and not
written again. The check and the commit are one optimistic commit: pyiceberg's commit
requires the branch to still be at the snapshot the check read (``assert-ref-snapshot-id``),
so a concurrent writer's commit in between makes ours fail; we then refresh and check again.
Two writers of one batch are never both applied.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable

import pyarrow as pa  # type: ignore[import-untyped]
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table
from pyiceberg.table.upsert_util import create_match_filter
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from spark_jobs.errors import InfrastructureError
from spark_jobs.evolution import Shape, added_columns
from spark_jobs.iceberg.catalog import catalog_error, open_catalog
from spark_jobs.iceberg.settings import IcebergTarget
from spark_jobs.plan import AggregationPlan
from spark_jobs.spec import AggregationSpec

log = logging.getLogger("spark_jobs.iceberg")

QUERY_PROPERTY = "eosbridge.query"
BATCH_PROPERTY = "eosbridge.batch"
COMMIT_PROPERTY = "eosbridge.commit"
SHAPE_PROPERTY = "eosbridge.aggregation"
COMMIT_ATTEMPTS = 10
# A test's crash hook: called with ("before_commit" | "after_commit", batch id).
FaultHook = Callable[[str, int], None]


def batch_committed(table: Table, query_id: str, batch_id: int) -> bool:
    """Whether a snapshot of ``table``'s main history carries this query's batch."""
    wanted = {QUERY_PROPERTY: query_id, BATCH_PROPERTY: str(batch_id)}
    snapshot = table.current_snapshot()
    while snapshot is not None:
        summary = snapshot.summary
        props = summary.additional_properties if summary is not None else {}
        if all(props.get(k) == v for k, v in wanted.items()):
            return True
        parent = snapshot.parent_snapshot_id
        snapshot = None if parent is None else table.snapshot_by_id(parent)
    return False


class IcebergSink:
    """The Iceberg side of one job: its table, created or evolved at open, written per batch."""

    def __init__(
        self, target: IcebergTarget, merge_keys: list[str], fault: FaultHook | None = None
    ) -> None:
        self.target = target
        self.merge_keys = merge_keys
        self.fault = fault
        self.rows_written = 0
        self._catalog: Catalog | None = None
        self._schema: pa.Schema | None = None

    def open(self, schema: StructType, shape: Shape) -> None:
        """Open the catalog; create the table for ``schema`` or evolve it to ``shape``."""
        self._catalog = open_catalog(self.target)
        self._schema = to_arrow_schema(schema, timezone="UTC")  # the session time zone
        try:
            table = self._catalog.create_table_if_not_exists(
                self.target.identifier,
                schema=self._schema,
                properties={SHAPE_PROPERTY: json.dumps(shape, sort_keys=True)},
            )
            self._evolve(table, shape)
        except Exception as exc:
            raise catalog_error(self.target, exc) from None

    def _evolve(self, table: Table, shape: Shape) -> None:
        stored = table.properties.get(SHAPE_PROPERTY)
        wanted = json.dumps(shape, sort_keys=True)
        if stored is None or stored == wanted:
            return
        added = added_columns(self.target.identifier, json.loads(stored), shape)
        with table.transaction() as tx:
            if added:
                with tx.update_schema() as update:
                    update.union_by_name(self._schema)
            tx.set_properties({SHAPE_PROPERTY: wanted})
        log.info("%s: evolved, columns added: %s", self.target.identifier, sorted(added))

    def write(self, batch: DataFrame, query_id: str, batch_id: int) -> int:
        """Commit the batch's rows once; 0 when a snapshot already carries this batch."""
        assert self._catalog is not None, "open() first"
        rows = batch.toArrow()
        props = {
            QUERY_PROPERTY: query_id,
            BATCH_PROPERTY: str(batch_id),
            COMMIT_PROPERTY: uuid.uuid4().hex,
        }
        for _ in range(COMMIT_ATTEMPTS):
            table = self._catalog.load_table(self.target.identifier)
            if batch_committed(table, query_id, batch_id):
                log.info(
                    "batch %d: already in %s, not written again", batch_id, self.target.identifier
                )
                return 0
            tx = table.transaction()
            if self.merge_keys:
                # Replace the batch's groups, never skip an unchanged row (as upsert does): a
                # commit per batch, so the batch id is in the history for the next check.
                keys = create_match_filter(rows, self.merge_keys)
                tx.overwrite(rows, overwrite_filter=keys, snapshot_properties=props)
            else:
                tx.append(rows, snapshot_properties=props)
            self._crash("before_commit", batch_id)
            try:
                tx.commit_transaction()
            except CommitFailedException:
                log.info("batch %d: %s moved on; checking again", batch_id, self.target.identifier)
                continue
            self._crash("after_commit", batch_id)
            self.rows_written += rows.num_rows
            return int(rows.num_rows)
        raise InfrastructureError(
            f"{self.target.where}: batch {batch_id} lost {COMMIT_ATTEMPTS} commit races in a row"
        )

    def _crash(self, point: str, batch_id: int) -> None:
        if self.fault is not None:
            self.fault(point, batch_id)


def open_iceberg(
    spark: SparkSession, plan: AggregationPlan, fault: FaultHook | None = None
) -> IcebergSink | None:
    """The sink of the spec's ``output.iceberg``, its table ready; None without one."""
    out = plan.spec.output.iceberg
    if out is None:
        return None
    schema = plan.output_schema(spark)
    shape = {**plan.spec.shape(), "columns": {f.name: f.dataType.simpleString() for f in schema}}
    sink = IcebergSink(IcebergTarget.of(out), plan.merge_keys, fault)
    sink.open(schema, shape)
    return sink


def check_catalog(spec: AggregationSpec | None) -> None:
    """Before Spark starts: the spec's catalog answers and knows its namespace (one line)."""
    if spec is not None and spec.output.iceberg is not None:
        open_catalog(IcebergTarget.of(spec.output.iceberg))
